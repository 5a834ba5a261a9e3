

def test_a_configuration_never_changes_the_registrys_scheme():
    """for_config gives a configured copy: a real model's NoPE layers or share never leak into the next model."""
    from types import SimpleNamespace

    from lpos.positions import REGISTRY

    rnope, rope = REGISTRY["rnope"], REGISTRY["rope"]
    before = (rnope.nope_layers, rnope.nope_every, rope.rotated_share)
    assert rnope.for_config(SimpleNamespace(rope_share=None, nope_layers=(1, 3))).nope_layers == {1, 3}
    assert rope.for_config(SimpleNamespace(rope_share=0.25, nope_layers=())).rotated_share == 0.25
    assert (rnope.nope_layers, rnope.nope_every, rope.rotated_share) == before
