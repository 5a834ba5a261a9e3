"""The untrained comparison models of a model on its own vocabulary (lpos.ui.models.untrained_like):
one float32 copy of the weights for all four other schemes, the same numbers as separate copies."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from lpos.model import GPT, GPTConfig
from lpos.positions import SCHEMES
from lpos.ui.caching import remember
from lpos.ui.models import untrained_like

CONFIG = GPTConfig(vocab_size=300, n_embd=48, n_head=4, n_layer=3, block_size=64, position="rope", bias=False)


@pytest.fixture(scope="module")
def chosen():
    return remember(GPT(CONFIG).eval(), "test-comparisons.pt")


def storage_bytes(models) -> int:
    """Bytes of the distinct tensor storages the models' parameters use."""
    storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for m in models for p in m.parameters()}
    return sum(storages.values())


def test_four_comparison_models_hold_one_copy_of_the_weights(chosen):
    others = [untrained_like(chosen, "test-comparisons.pt", s) for s in SCHEMES if s != "rope"]
    one = storage_bytes([chosen])
    own = sum(4 * m.scheme.parameter_count(m.config) for m in others)  # a learned table, a bias table, ...
    assert storage_bytes(others) == one + own  # not one copy each
    assert [m.config.position for m in others] == [s for s in SCHEMES if s != "rope"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_shared_model_computes_what_its_own_copy_computes(chosen, scheme):
    like = untrained_like(chosen, "test-comparisons.pt", scheme)
    copy = GPT(dataclasses.replace(CONFIG, position=scheme)).eval()
    copy.load_state_dict({k: v.clone() for k, v in like.state_dict().items()})
    ids = torch.randint(0, CONFIG.vocab_size, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(like(ids)[0], copy(ids)[0], rtol=0, atol=0)
    assert untrained_like(chosen, "test-comparisons.pt", scheme) is like  # built once, then cached
