"""Model outputs pinned to the numbers the code gave before the package was split into its folders.

Every case below runs a shipped checkpoint, an untrained model built as the app builds it, or an
analysis function a page shows, and reduces the result to a few exact numbers: logits at chosen
cells, sums of all logits, losses, attention weights, embedding rows, the order-blindness
experiment, similarity maps, loss by length, RoPE scaling, probes. `pinned_numbers.json` holds the
same numbers from the code before the restructuring.

They are compared with a tolerance (ATOL, RTOL below) that another processor's order of summation stays
far inside and a changed formula far exceeds (on another processor of the same kind a bit-for-bit
comparison failed 61 cases by their last bits); integers, strings and numbers exact by
construction are compared exactly. `test_a_last_bits_change_passes` and `test_a_changed_formula_fails`
show both sides. The reference was written with `python tests/test_pinned_numbers.py --write` run against a git
worktree of 6f0641e, the last commit before the split (cwd and PYTHONPATH the worktree; the
shipped checkpoints are tracked, so they are there): see `_recorded` in the JSON. Another build of torch
may change an algorithm, not only an order, so a run with another torch is skipped, not failed; the
processor is recorded, not checked. Everything runs on one thread.

Names that may move in the restructuring are looked up in each place they may live
(`_first_importable`); only public names are used.
"""
from __future__ import annotations

import copy as copy_module
import dataclasses
import functools
import importlib
import json
import math
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

PINNED = Path(__file__).with_name("pinned_numbers.json")
SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")
SENTENCES = {
    "dog": "The dog bit the man.",
    "story": ("Once upon a time, in a small town at the foot of a green hill, there lived a little girl named Pip. "
              "Pip had a red coat, a round face and a laugh that made the birds stop singing to listen. She lived "
              "with her grandpa in a blue house with a crooked chimney."),
    "emoji": "My dog 🐶 loves pizza 🍕, and so do I! 🎉",
}
TOKEN_IDS = (0, 13, 262, 290, 3290, 50256)  # "!", ".", " the", " and", " dog", <|endoftext|>
LONG = 300  # tokens of the built-in story: past the 128 of the shipped models' training
STREAM = 513  # tokens of the built-in story for loss by length: two windows of 256


def _importable(*names: str):
    """The object at the first dotted name that imports ("lpos.analysis.shuffle.shuffle_experiment"), or None."""
    for name in names:
        module_name, _, attribute = name.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        if hasattr(module, attribute):
            return getattr(module, attribute)
    return None


def _first_importable(*names: str):
    found = _importable(*names)
    assert found is not None, f"none of these names exists any more: {', '.join(names)}"
    return found


def _analysis(name: str, *modules: str):
    """An analysis function by name: from lpos.analysis itself, else from one of its modules."""
    return _first_importable(f"lpos.analysis.{name}", *(f"lpos.analysis.{m}.{name}" for m in modules))


@contextmanager
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            yield
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------- models and inputs


@functools.cache
def trained(scheme: str):
    load = _first_importable("lpos.checkpoints.load")
    model, _ = load(scheme)
    return model.eval()


@functools.cache
def untrained(scheme: str):
    """The app's untrained model: its own builder where the package has one, else the construction
    lpos/ui/models.py had at 6f0641e (seed 0, shipped size, the shipped models' init_seed)."""
    build = _importable("lpos.model.untrained_model")
    if build is not None:
        return build(scheme).eval()
    from lpos.model import GPT, GPTConfig

    seed = _first_importable("lpos.checkpoints.SHIPPED_SEED", "lpos.corpus.SHIPPED_SEED")
    torch.manual_seed(0)
    return GPT(GPTConfig(position=scheme, init_seed=seed)).eval()


def encode(text: str) -> list[int]:
    from lpos.tokenizer import encode as encode_text

    return encode_text(text)


@functools.cache
def story_ids() -> tuple[int, ...]:
    story = _first_importable("lpos.corpus.story", "lpos.analysis.lengths.story")
    return tuple(encode(story()))


def yarn4():
    from lpos.positions import RopeScaling

    return RopeScaling("yarn", 4.0)


# ---------------------------------------------------------------- reductions to exact numbers


def as_tensor(values) -> torch.Tensor:
    """A tensor as it is; an array (or a DataFrame column) copied into one."""
    return values if isinstance(values, torch.Tensor) else torch.tensor(np.asarray(values))


def total(values) -> float:
    """Sum in float64 of the finite entries (a corpus-vocabulary model's logits are -inf elsewhere)."""
    values = as_tensor(values)
    finite = values.isfinite()
    return float((values if bool(finite.all()) else values[finite]).sum(dtype=torch.float64))


def abs_total(values) -> float:
    return total(as_tensor(values).abs())


def floats(values) -> list[float]:
    return [float(v) for v in np.asarray(values).reshape(-1)]


def attention_numbers(weights) -> dict:
    """Weights (nh, T, T) or (1, nh, T, T): their sum, the key position they average to, four cells."""
    weights = as_tensor(weights)
    weights = weights.reshape(-1, *weights.shape[-2:])  # (nh, T, T)
    nh, T, _ = weights.shape
    cells = [(0, T - 1, 0), (1 % nh, T - 1, T - 1), (2 % nh, T // 2, T // 4), (nh - 1, T - 1, T // 2)]
    return {"sum": total(weights), "key_position": total(weights * torch.arange(T)),
            "cells": [float(weights[h, q, k]) for h, q, k in cells]}


def forward_numbers(model, ids: list[int], **options) -> dict:
    """Logits, losses, every layer's attention and the embedding parts for one sentence."""
    idx = torch.tensor([ids], dtype=torch.long)
    T = len(ids)
    logits, _, attention = model(idx, return_attention=True, **options)
    _, loss = model(idx[:, :-1], idx[:, 1:], **options)
    logits = logits[0]  # (T, vocab)
    scored = logits[:, logits[0].isfinite()]  # (T, V'): the columns of the model's output vocabulary
    positions = sorted({0, T // 2, T - 1})
    numbers = {
        "ids": list(ids),
        "logits": [float(logits[t, i]) for t in positions for i in TOKEN_IDS],
        "argmax": [int(logits[t].argmax()) for t in positions],
        "logits_sum": total(scored), "logits_abs_sum": abs_total(scored), "finite": int(scored.isfinite().sum()),
        "loss": float(loss), "vocab_loss": float(model.vocab_loss(idx[:, :-1], idx[:, 1:], **options)),
    }
    for layer, weights in enumerate(attention):
        numbers.update({f"attention{layer}_{k}": v for k, v in attention_numbers(weights).items()})
    parts = model.embed_parts(idx, offset=options.get("offset", 0))
    for name in ("token", "position", "total"):
        rows = getattr(parts, name)
        numbers[f"embed_{name}"] = None if rows is None else [total(rows), abs_total(rows), float(rows.reshape(-1)[7])]
    return numbers


# ---------------------------------------------------------------- the cases


def model_cases() -> dict[str, Callable[[], dict]]:
    cases = {}
    for scheme in SCHEMES:
        for name, text in SENTENCES.items():
            cases[f"trained/{scheme}/{name}"] = functools.partial(lambda s, t: forward_numbers(trained(s), encode(t)), scheme, text)
        cases[f"untrained/{scheme}/story"] = functools.partial(lambda s: forward_numbers(untrained(s), encode(SENTENCES["story"])), scheme)
        cases[f"trained/{scheme}/offset5"] = functools.partial(
            lambda s: forward_numbers(trained(s), encode(SENTENCES["story"]), offset=5), scheme)
        if scheme != "learned":  # its table stops at 128 rows
            cases[f"trained/{scheme}/long"] = functools.partial(lambda s: forward_numbers(trained(s), list(story_ids()[:LONG])), scheme)
    cases["trained/rope/long_yarn4"] = lambda: forward_numbers(trained("rope"), list(story_ids()[:LONG]), rope_scaling=yarn4())
    cases["trained/rope/offset5_yarn4"] = lambda: forward_numbers(trained("rope"), encode(SENTENCES["story"]), offset=5,
                                                                  rope_scaling=yarn4())
    return cases


def shuffle_numbers(model) -> dict:
    result = _analysis("shuffle_experiment", "shuffle")(model, encode(SENTENCES["story"]), seed=0)
    return {"shuffled": list(result.shuffled), "attention_change": result.attention_change,
            "logits_change": result.logits_change, "distribution_change": result.distribution_change,
            "weights_before": [total(result.weights_before), *floats(result.weights_before[:, :3])],
            "weights_after": [total(result.weights_after), *floats(result.weights_after[:, -3:])],
            "top_before": floats(result.top_before["probability"]), "top_after": floats(result.top_after["probability"]),
            "top_tokens": [*result.top_before["token"], *result.top_after["token"]], "order_blind": result.order_blind}


def attention_map_numbers(model) -> dict:
    attention_maps = _analysis("attention_maps", "attention")
    ids = encode(SENTENCES["story"])
    return {f"layer{layer}_{k}": v for layer in (0, 3)
            for k, v in attention_numbers(attention_maps(model, ids, layer=layer)).items()}


def queries_keys_numbers() -> dict:
    queries_and_keys = _analysis("queries_and_keys", "attention")
    numbers = {}
    for rotate in (False, True):
        q, k = queries_and_keys(trained("rope"), encode(SENTENCES["story"]), layer=1, rotate=rotate)
        numbers[f"rotate{rotate}"] = [total(q), abs_total(q), total(k), abs_total(k), float(q[1, -1, 5]), float(k[2, 7, 3]),
                                      total(q @ k.transpose(-2, -1))]
    return numbers


def alibi_effect_numbers(model) -> dict:
    effect = _analysis("alibi_effect", "attention")(model, encode(SENTENCES["story"]), layer=0)
    return {"slopes": floats(effect.slopes), "bias": total(effect.bias),
            **{f"with_{k}": v for k, v in attention_numbers(effect.with_bias).items()},
            **{f"without_{k}": v for k, v in attention_numbers(effect.without_bias).items()}}


def length_numbers(model) -> dict:
    length_losses = _analysis("length_losses", "lengths")
    token_losses = _analysis("token_losses", "lengths")
    loss_along_text = _analysis("loss_along_text", "lengths")
    table = length_losses(model, torch.tensor(story_ids()[:STREAM]), lengths=(64, 128, 256))
    losses = token_losses(model, torch.tensor(story_ids()[:129]))
    curve = loss_along_text(model, list(story_ids()[:LONG]), window=32)
    return {"by_length": [[length, entry["loss"], entry.get("windows"), entry.get("tokens"), entry.get("note")]
                          for length, entry in table.items()],
            "token_losses": [total(losses), float(losses[0]), float(losses[-1]), int(losses.isnan().sum())],
            "curve": [total(curve.losses), total(curve.rolling), len(curve.losses), curve.wall, float(curve.rolling[-1])]}


def similarity_numbers(scheme: str) -> dict:
    position_rows = _analysis("position_rows", "similarity")
    cosine_similarity_map = _analysis("cosine_similarity_map", "similarity")
    pca = _analysis("pca", "similarity")
    nearest_positions = _analysis("nearest_positions", "similarity")
    nearest_tokens = _analysis("nearest_tokens", "similarity")
    model = trained(scheme)
    numbers = {}
    rows = position_rows(model, 128)
    if rows is not None:
        full = cosine_similarity_map(rows)
        projection = pca(rows)
        near = nearest_positions(rows, 10, k=5)
        numbers.update({"rows": [total(rows), abs_total(rows)], "map": [total(full), abs_total(full), float(full[3, 40])],
                        "pca": [*floats(projection.explained), abs_total(projection.coordinates)],
                        "nearest_positions": [*near["position"].tolist(), *floats(near["cosine"])]})
    near = nearest_tokens(model, 3290, k=5)
    numbers["nearest_tokens"] = [*near["id"].tolist(), *floats(near["cosine"])]
    return numbers


def embedding_numbers(model) -> dict:
    embedding_view = _analysis("embedding_view", "embeddings")
    repeated_tokens = _analysis("repeated_tokens", "embeddings")
    view = embedding_view(model, encode(SENTENCES["story"]))
    numbers = {"token_rows": [total(view.token_rows), abs_total(view.token_rows)],
               "position_rows": None if view.position_rows is None else [total(view.position_rows), abs_total(view.position_rows)],
               "summed_rows": [total(view.summed_rows), abs_total(view.summed_rows)]}
    numbers["repeated"] = [[r.token, *r.positions, r.token_rows_max_difference, r.summed_cosine] for r in repeated_tokens(view)]
    return numbers


def stretch_numbers(model, ids: list[int], **options) -> dict:
    profile = _analysis("attention_profile", "stretch")(model, ids, **options)
    return {f"layer{layer}": [total(rows["max_logit"]), total(rows["entropy"]), float(rows["max_logit"].iloc[-1]),
                              float(rows["entropy"].iloc[-1])]
            for layer, rows in profile.groupby("layer")}


def offset_change_numbers() -> dict:
    offset_change = _analysis("offset_change", "stretch")
    return {scheme: offset_change(trained(scheme), encode(SENTENCES["story"]), offset=5) for scheme in SCHEMES}


def chunk_loss_numbers() -> dict:
    chunks = _analysis("chunks", "stretch")
    chunk_losses = _analysis("chunk_losses", "stretch")
    texts = chunks(torch.tensor(story_ids()), count=2, length=256)
    return {name: [[length, entry["loss"], entry.get("tokens")] for length, entry in
                   chunk_losses(trained(scheme), texts, lengths=(128, 256), rope_scaling=scaling).items()]
            for name, scheme, scaling in (("rope", "rope", None), ("rope_yarn4", "rope", yarn4()), ("alibi", "alibi", None))}


def probe_numbers(model) -> dict:
    probe_text = _analysis("probe_text", "probes")
    position_probes = _analysis("position_probes", "probes")
    frame = position_probes(model, probe_text({"story": list(story_ids())}, model=model))
    return {"r2": floats(frame["r2"]), "mae": floats(frame["mae"]), "penalty": floats(frame["penalty"])}


def analysis_cases() -> dict[str, Callable[[], dict]]:
    cases = {}
    for scheme in SCHEMES:
        cases[f"analysis/shuffle/{scheme}"] = functools.partial(lambda s: shuffle_numbers(trained(s)), scheme)
        cases[f"analysis/attention_maps/{scheme}"] = functools.partial(lambda s: attention_map_numbers(trained(s)), scheme)
        cases[f"analysis/length_losses/{scheme}"] = functools.partial(lambda s: length_numbers(trained(s)), scheme)
        cases[f"analysis/similarity/{scheme}"] = functools.partial(similarity_numbers, scheme)
        cases[f"analysis/embedding_view/{scheme}"] = functools.partial(lambda s: embedding_numbers(trained(s)), scheme)
    cases["analysis/shuffle/untrained_none"] = lambda: shuffle_numbers(untrained("none"))
    cases["analysis/embedding_view/untrained_learned"] = lambda: embedding_numbers(untrained("learned"))
    cases["analysis/queries_and_keys/rope"] = queries_keys_numbers
    cases["analysis/alibi_effect/alibi"] = lambda: alibi_effect_numbers(trained("alibi"))
    cases["analysis/alibi_effect/rope"] = lambda: alibi_effect_numbers(trained("rope"))
    cases["analysis/stretch_profile/rope_yarn4"] = lambda: stretch_numbers(trained("rope"), list(story_ids()[:LONG]),
                                                                           rope_scaling=yarn4())
    cases["analysis/stretch_profile/rope"] = lambda: stretch_numbers(trained("rope"), list(story_ids()[:LONG]))
    cases["analysis/stretch_profile/alibi"] = lambda: stretch_numbers(trained("alibi"), list(story_ids()[:LONG]))
    cases["analysis/stretch_profile/learned"] = lambda: stretch_numbers(trained("learned"), list(story_ids()[:128]))
    cases["analysis/offset_change"] = offset_change_numbers
    cases["analysis/chunk_losses"] = chunk_loss_numbers
    cases["analysis/probes/none"] = lambda: probe_numbers(trained("none"))
    cases["analysis/probes/learned"] = lambda: probe_numbers(trained("learned"))
    return cases


CASES = {**model_cases(), **analysis_cases()}


# ---------------------------------------------------------------- comparison


def compute(name: str) -> dict:
    with one_thread():
        return json.loads(json.dumps(CASES[name]()))  # as the JSON holds it: tuples become lists, inf stays inf


def processor() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), for the record: numbers are compared across
    processors of one kind, so it is written down, not checked."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def recorded_on() -> dict:
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": 1,
            "processor": processor()}


# How far a number may move. Float32 kernels sum in an order of their own, one per vector unit (AVX-512,
# AVX2, SSE; MKL and oneDNN pick theirs by processor): measured, with the JSON recorded on an AVX-512
# EPYC, the same numbers on this machine's AVX-512 path, under ATEN_CPU_CAPABILITY=avx2 and under
# MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 ATEN_CPU_CAPABILITY=default differ by at most
# 1.1e-6 absolute where a value is near zero and by at most 1.7e-7 of its scale where it is large.
# So: ATOL absolute plus RTOL of the number's scale, the largest magnitude among the numbers it was pinned
# beside (a list of cells, a sum and its absolute sum): six times the worst drift measured, and a
# thousandth of what a changed formula moves (test_a_changed_formula_fails).
ATOL = 1e-5
RTOL = 1e-6
ROUNDING = 1e-4  # losses the analysis rounds to 4 decimals: a drift can tip the last digit
ROUNDED = re.compile(r"(by_length|analysis/chunk_losses\.\w+)\[\d+\]\[1\]$")
EXACT = re.compile(r"\.(slopes|penalty)\[\d+\]$")  # ALiBi's powers of two, the probes' grid: exact by construction


def _scale(expected: float, siblings) -> float:
    magnitudes = [abs(v) for v in siblings if isinstance(v, float) and math.isfinite(v)]
    return max([abs(expected), *magnitudes]) if math.isfinite(expected) else 0.0


def mismatches(expected, actual, path: str = "", siblings=()) -> list[str]:
    """Every place where actual differs from expected by more than ATOL + RTOL * its scale (NaN equals
    NaN, infinities must match); integers, strings, booleans and EXACT numbers must be equal."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if sorted(expected) != sorted(actual):
            return [f"{path or '.'}: keys {sorted(expected)} pinned, {sorted(actual)} now"]
        found = []
        for key in expected:
            paired = expected.get(key.replace("_sum", "_abs_sum")) if key.endswith("_sum") else None
            found += mismatches(expected[key], actual[key], f"{path}.{key}", () if paired is None else (paired,))
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(expected)} values pinned, {len(actual)} now: {expected!r} -> {actual!r}"]
        return [m for i, (e, a) in enumerate(zip(expected, actual)) for m in mismatches(e, a, f"{path}[{i}]", expected)]
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        if EXACT.search(path):
            allowed = 0.0
        else:
            allowed = ATOL + RTOL * _scale(expected, siblings) + (ROUNDING if ROUNDED.search(path) else 0.0)
        same = (math.isnan(expected) and math.isnan(actual)) or expected == actual or abs(actual - expected) <= allowed
        return [] if same else [f"{path}: pinned {expected!r}, now {actual!r} (allowed {allowed:.2g})"]
    return [] if expected == actual and type(expected) is type(actual) else [f"{path}: pinned {expected!r}, now {actual!r}"]


@pytest.fixture(scope="module")
def pinned() -> dict:
    values = json.loads(PINNED.read_text(encoding="utf-8"))
    here, there = torch.__version__, values["_recorded"]["torch"]
    if here != there:  # another build may change an algorithm, not only an order of summation
        pytest.skip(f"the pinned numbers were recorded with torch {there}; this is {here}")
    return values


def test_every_case_is_pinned(pinned):
    assert sorted(CASES) == sorted(k for k in pinned if not k.startswith("_"))


@pytest.mark.parametrize("name", list(CASES))
def test_pinned(pinned, name):
    assert name in pinned, f"{name} has no pinned numbers: write them from the reference commit (module docstring)"
    wrong = mismatches(pinned[name], compute(name), name)
    assert not wrong, f"{name}: {len(wrong)} numbers moved:\n" + "\n".join(wrong[:40])


def _nudged(model, ulps: int):
    """A copy of `model` with every weight moved `ulps` float32 steps up: what another order of summation
    does to a result, applied to the weights themselves."""
    copy = copy_module.deepcopy(model)
    with torch.no_grad():
        for p in copy.parameters():
            for _ in range(ulps):
                p.copy_(torch.nextafter(p, torch.full_like(p, math.inf)))
    return copy


def test_a_last_bits_change_passes(pinned):
    """Weights one float32 step off (every one of them) give numbers the comparison accepts."""
    with one_thread():
        numbers = json.loads(json.dumps(forward_numbers(_nudged(trained("rope"), 1), encode(SENTENCES["story"]))))
    assert numbers != pinned["trained/rope/story"], "the nudge changed nothing: it tests nothing"
    assert not mismatches(pinned["trained/rope/story"], numbers, "trained/rope/story")


def test_a_changed_formula_fails(pinned):
    """RoPE's base 5% off, or ALiBi's bias a thousandth steeper: both caught, in many numbers."""
    rope = trained("rope")
    rebased = type(rope)(dataclasses.replace(rope.config, rope_base=10500.0)).eval()
    rebased.load_state_dict(rope.state_dict())
    with one_thread():
        numbers = json.loads(json.dumps(forward_numbers(rebased, encode(SENTENCES["story"]))))
    assert len(mismatches(pinned["trained/rope/story"], numbers, "trained/rope/story")) > 10
    assert mismatches([1.0, 2.0], [1.0, 2.0 + 1e-4]), "a change of 5e-5 of the scale is caught"
    assert not mismatches([1.0, 2.0], [1.0, 2.0 + 2e-6]), "a change of 1e-6 of the scale is not"
    assert mismatches({"slopes": [0.25]}, {"slopes": [0.25 + 2**-30]}), "exact numbers are exact"
    assert mismatches({"argmax": [3]}, {"argmax": [3.0]}), "an integer stays an integer"


def write_reference() -> None:
    import lpos

    root = Path(lpos.__file__).resolve().parent.parent
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "lpos"], capture_output=True, text=True).stdout
    values = {"_recorded": {**recorded_on(), "commit": commit, "lpos_clean": not dirty.strip(), "lpos": str(root)}}
    for name in CASES:
        values[name] = compute(name)
    PINNED.write_text(json.dumps(values, indent=1, allow_nan=True) + "\n", encoding="utf-8")
    print(f"wrote {len(CASES)} cases from lpos at {root} ({commit}) to {PINNED}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_pinned_numbers.py --write   (from a worktree of the reference commit)")
    write_reference()
