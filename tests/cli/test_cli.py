"""`python -m lpos inspect|shuffle|convert`: the numbers it prints, its JSON, which model it used
(the shipped trained one by default, --untrained, or any layout lpos reads), and one-line errors."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lpos import checkpoints
from lpos.cli import main, parser
from lpos.model import untrained_model
from lpos.positions import SCHEMES
from lpos.tokenizer import encode

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "The dog bit the man"
TOKENS = ["The", "␣dog", "␣bit", "␣the", "␣man"]
IDS = [464, 3290, 1643, 262, 582]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lpos", *args], cwd=ROOT, capture_output=True, text=True, timeout=180)


def inspect_json(capsys, *args: str, err: list | None = None) -> list[dict]:
    assert main(["inspect", SENTENCE, "--json", *args]) == 0
    captured = capsys.readouterr()
    if err is not None:
        err.append(captured.err)
    return json.loads(captured.out)


def test_inspect_prints_tokens_ids_and_norms():
    done = run_cli("inspect", SENTENCE, "--untrained")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "model: untrained learned (random init, as the app's)\n"
    lines = done.stdout.splitlines()
    assert lines[0] == "scheme learned, 5 tokens"
    assert lines[1].split() == ["position", "token", "id", "token_norm", "position_norm", "sum_norm"]
    app = untrained_model("learned")  # the app's untrained model: the CLI shows its numbers
    table, wpe = app.transformer.wte.weight.detach(), app.transformer.wpe.weight.detach()
    for t, (line, token, token_id) in enumerate(zip(lines[2:], TOKENS, IDS)):
        position, shown_token, shown_id, token_norm, position_norm, sum_norm = line.split()
        assert (int(position), shown_token, int(shown_id)) == (t, token, token_id)
        assert float(token_norm) == pytest.approx(float(table[token_id].norm()), abs=1e-4)
        assert float(position_norm) == pytest.approx(float(wpe[t].norm()), abs=1e-4)
        assert float(sum_norm) == pytest.approx(float((table[token_id] + wpe[t]).norm()), abs=1e-4)
    assert len(lines) == 7


def test_inspect_json_sinusoidal(capsys):
    records = inspect_json(capsys, "--scheme", "sinusoidal", "--untrained")
    table = untrained_model("sinusoidal").transformer.wte.weight.detach()
    assert [r["token"] for r in records] == TOKENS and [r["id"] for r in records] == IDS
    for record in records:
        # each sin/cos pair has norm 1, so a table row has norm sqrt(C / 2) = 8, scaled by 0.02 sqrt(2)
        assert record["position_norm"] == pytest.approx(8.0 * 0.02 * math.sqrt(2), rel=1e-5)
        assert record["token_norm"] == pytest.approx(float(table[record["id"]].norm()), rel=1e-5)
    position_0 = 0.02 * math.sqrt(2) * torch.tensor([0.0, 1.0] * 64)  # sin 0, cos 0
    assert records[0]["sum_norm"] == pytest.approx(float((table[464] + position_0).norm()), rel=1e-5)


@pytest.mark.parametrize("scheme", [s for s in SCHEMES if s not in ("learned", "sinusoidal")])
def test_inspect_json_without_position_rows(capsys, scheme):
    records = inspect_json(capsys, "--scheme", scheme)
    assert [r["id"] for r in records] == IDS
    assert all(r["position_norm"] is None for r in records)
    assert all(r["sum_norm"] == pytest.approx(r["token_norm"]) for r in records)


def shuffle_change(capsys, scheme: str) -> tuple[float, float, str]:
    assert main(["shuffle", SENTENCE, "--scheme", scheme, "--untrained"]) == 0
    out = capsys.readouterr().out
    first = float(re.search(r"\(a\) last position, layer-1 attention output: max \|change\| = (\S+)", out).group(1))
    full = float(re.search(r"\(b\) last position, full-model logits: +max \|change\| = (\S+)", out).group(1))
    return first, full, out


def test_shuffle_none_is_order_blind_at_layer_one(capsys):
    first, full, out = shuffle_change(capsys, "none")
    assert first < 1e-6
    assert full > 1e-3  # the causal mask leaks order from layer 2 on
    assert "blind to the order of earlier tokens" in out
    assert "scheme:   none" in out and "original: 'The dog bit the man'" in out


# untrained, every other scheme already carries order into layer 1; cope (count tables at 0) and fire (a bias
# function near 0) do not yet, below
@pytest.mark.parametrize("scheme", ["learned", "sinusoidal", "rope", "alibi", "t5"])
def test_shuffle_other_schemes_change(capsys, scheme):
    first, _, out = shuffle_change(capsys, scheme)
    assert first > 1e-4
    assert "blind to the order" not in out


@pytest.mark.parametrize("scheme", ["cope", "fire"])
def test_shuffle_untrained_cope_and_fire_are_not_called_position_free(capsys, scheme):
    first, full, out = shuffle_change(capsys, scheme)
    assert first < 1e-5 and full > 1e-3  # untrained, they add (almost) nothing at layer 1 yet
    assert "With no positions" not in out, out  # they have positions: their tables are untrained


def test_shuffle_json(capsys):
    assert main(["shuffle", SENTENCE, "--scheme", "alibi", "--json", "--seed", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) == {"scheme", "original", "shuffled", "layer1_attention_output_max_abs_change",
                            "full_model_logits_max_abs_change"}
    assert summary["scheme"] == "alibi" and summary["original"] == SENTENCE
    assert summary["shuffled"] != SENTENCE and summary["shuffled"].endswith(" man")
    assert sorted(summary["shuffled"]) == sorted(SENTENCE)  # the same tokens, so the same characters
    assert summary["layer1_attention_output_max_abs_change"] > 1e-4


def assert_one_line_error(done: subprocess.CompletedProcess, *, contains: str) -> None:
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and contains in lines[0]
    assert "Traceback" not in done.stderr


def test_empty_text_exits_2_with_one_line():
    assert_one_line_error(run_cli("inspect", ""), contains="the text is empty")


def test_bad_checkpoint_path_exits_2_with_one_line(tmp_path):
    assert_one_line_error(run_cli("inspect", SENTENCE, "--checkpoint", str(tmp_path / "missing.pt")),
                          contains="missing.pt: no such file or folder")  # a path is called a missing file


def test_damaged_checkpoint_and_short_text_exit_2(tmp_path, capsys):
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(b"PK\x03\x04 this is not really a zip")
    assert main(["shuffle", SENTENCE, "--checkpoint", str(damaged)]) == 2
    assert capsys.readouterr().err.strip().startswith("error: damaged.pt is not a PyTorch checkpoint")
    assert main(["shuffle", "Hi"]) == 2
    assert "at least two tokens" in capsys.readouterr().err
    assert main(["inspect", "word" + " word" * 199]) == 2  # 200 tokens: past the learned table's 128 rows
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "128 rows" in err and "200 tokens" in err


def test_a_checkpoint_keeps_its_own_scheme(tmp_path, capsys, tiny_model):
    from lpos.checkpoints import save

    save(tiny_model("rope"), {}, tmp_path / "rope.pt")
    assert main(["inspect", SENTENCE, "--checkpoint", str(tmp_path / "rope.pt"), "--scheme", "learned"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("scheme rope, 5 tokens")
    used = f"model: {tmp_path / 'rope.pt'} (read as: lpos checkpoint)\n"
    assert captured.err == f"note: {tmp_path / 'rope.pt'} uses the 'rope' scheme\n" + used
    assert main(["inspect", SENTENCE, "--checkpoint", str(tmp_path / "rope.pt")]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("scheme rope, 5 tokens") and captured.err == used


@pytest.mark.parametrize("scheme", ["learned", "rope"])
def test_without_a_checkpoint_the_shipped_trained_model_is_used(capsys, scheme):
    if scheme not in checkpoints.available():
        pytest.skip(f"checkpoints/{scheme}.pt is not trained yet")
    err = []
    records = inspect_json(capsys, "--scheme", scheme, err=err)
    assert err == [f"model: {scheme} (trained, shipped; --untrained for the random one)\n"]
    trained = checkpoints.load(scheme)[0].transformer.wte.weight.detach()
    assert [r["token_norm"] for r in records] == pytest.approx([float(trained[i].norm()) for i in IDS], abs=1e-4)
    untrained = inspect_json(capsys, "--scheme", scheme, "--untrained")
    initial = untrained_model(scheme).transformer.wte.weight.detach()
    assert [r["token_norm"] for r in untrained] == pytest.approx([float(initial[i].norm()) for i in IDS], abs=1e-4)
    assert untrained != records


def layout_files(tmp_path):
    """One small model saved as the seed trainer does, as a bare state_dict and as GPT-2's
    pytorch_model.bin (GPT2Model keys, Conv1D weights): (path, needs --n-head) each, and the model."""
    from test_upload import seed_bytes

    data, model = seed_bytes(n_layer=2, n_head=4, n_embd=32, block_size=64)
    (tmp_path / "seed.pt").write_bytes(data)
    torch.save(model.state_dict(), tmp_path / "bare.pt")
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    torch.save({k.removeprefix("transformer."): (v.T if k.endswith(conv1d) else v).contiguous()
                for k, v in model.state_dict().items() if k != "lm_head.weight"}, tmp_path / "pytorch_model.bin")
    return [(tmp_path / "seed.pt", False), (tmp_path / "bare.pt", True), (tmp_path / "pytorch_model.bin", True)], model


def test_inspect_reads_every_layout(tmp_path, capsys):
    files, model = layout_files(tmp_path)
    rows = model.transformer.wte.weight.detach()[IDS]
    positions = model.transformer.wpe.weight.detach()[: len(IDS)]
    for path, needs_heads in files:
        err = []
        records = inspect_json(capsys, "--checkpoint", str(path), *(["--n-head", "4"] if needs_heads else []), err=err)
        assert [r["token_norm"] for r in records] == pytest.approx(rows.norm(dim=-1).tolist(), abs=1e-5), path.name
        assert [r["position_norm"] for r in records] == pytest.approx(positions.norm(dim=-1).tolist(), abs=1e-5)
        assert err[0].startswith(f"model: {path} (read as: ")


def test_a_file_without_its_head_count_asks_for_the_flag(tmp_path):
    files, _ = layout_files(tmp_path)
    assert_one_line_error(run_cli("inspect", SENTENCE, "--checkpoint", str(files[1][0])),
                          contains="bare.pt does not say how many attention heads it has: give n_head, one of 1, 2, 4, 8, "
                                   "16, 32 (the numbers that divide its width, 32); pass it as --n-head N")


def test_convert_writes_the_lpos_format(tmp_path):
    files, model = layout_files(tmp_path)
    done = run_cli("convert", str(files[0][0]), "--out", str(tmp_path / "out" / "seed-lpos.pt"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("read as: trainer dict (weights in 'model', config from a src.model.gpt.GPTConfig object); "
                        "blocks named ln1/ln2")
    assert lines[1].startswith("2 layers, 4 heads, width 32, 64 position rows, vocabulary 50,257, head tied")
    assert lines[-1].startswith(f"wrote {tmp_path / 'out' / 'seed-lpos.pt'} (lpos format, ")
    converted, meta = checkpoints.load(tmp_path / "out" / "seed-lpos.pt")
    assert torch.load(tmp_path / "out" / "seed-lpos.pt", weights_only=True)["format"] == "lpos"
    assert meta["converted_from"] == "seed.pt" and meta["iter_num"] == 20000
    # read back it is an lpos file, not the layout it came from
    assert checkpoints.describe(converted, meta)[0].startswith("read as: lpos checkpoint (converted from seed.pt, a trainer dict")
    ids = torch.tensor([IDS])
    with torch.no_grad():
        assert torch.equal(converted(ids)[0], model(ids)[0])
    assert_one_line_error(run_cli("convert", str(files[1][0]), "--out", str(tmp_path / "x.pt")), contains="--n-head N")
    assert_one_line_error(run_cli("convert", str(files[0][0]), "--out", str(tmp_path / "x.bin")), contains="must end in .pt")


def test_cli_inspect_prints_no_column_of_none_for_rope(capsys):
    from lpos.cli import main  # noqa: PLC0415

    assert main(["inspect", "--scheme", "rope", "The dog"]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "position_norm" not in out and "no position rows to measure: RoPE" in out
    assert main(["inspect", "--scheme", "learned", "The dog"]) == 0
    assert "position_norm" in capsys.readouterr().out


def test_without_a_command_every_command_is_listed_on_one_line(capsys):
    assert main([]) == 2
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line for line in lines if line.startswith("  ")}
    commands = next(a for a in parser()._actions if a.dest == "command").choices
    assert set(listed) == set(commands)
    assert all(len(line.split(maxsplit=1)) == 2 for line in listed.values())  # a name, then what it does


def test_eval_names_the_missing_corpus_files_and_where_they_were_looked_for(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LPOS_DATA_DIR", str(tmp_path / "nothing here"))
    assert main(["eval", "--checkpoint", "alibi", "--lengths", "8"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    _, meta = checkpoints.load("alibi")
    assert all(name in first for name in meta["data_files"])
    assert f"not found in {tmp_path / 'nothing here'} (set LPOS_DATA_DIR to the folder that holds them)" in first


def test_eval_scores_the_built_in_story_when_the_corpus_is_not_here():
    from lpos.cli.training import eval_streams  # noqa: PLC0415
    from lpos.corpus import story  # noqa: PLC0415

    for meta in ({}, {"data_files": ["no-such-corpus-file.txt"]}):
        streams, said = eval_streams(meta, None)
        assert list(streams) == ["the built-in story"] and streams["the built-in story"].tolist() == encode(story())
        assert "scoring the built-in story (story.txt" in said
    assert "trained on no-such-corpus-file.txt, not found in" in eval_streams({"data_files": ["no-such-corpus-file.txt"]}, None)[1]


def test_eval_scores_a_one_story_file_whole_and_names_a_missing_one(tmp_path):
    from lpos.cli.training import eval_streams  # noqa: PLC0415

    one = tmp_path / "one.txt"
    one.write_text("Once upon a time there was a dog. The dog bit the man.\n", encoding="utf-8")
    streams, said = eval_streams({}, [str(one)])
    assert list(streams) == ["all of one.txt"] and len(streams["all of one.txt"]) == len(encode(one.read_text().strip("\n")))
    assert "scoring the whole of" in said
    with pytest.raises(ValueError, match="missing.txt: no such file"):
        eval_streams({}, [str(tmp_path / "missing.txt")])


def test_card_keeps_the_measured_rebuild_line(tmp_path):
    from lpos.cli.training import keep_rebuild_line  # noqa: PLC0415

    old = tmp_path / "README.md"
    old.write_text("x\nMachine: a\n`checkpoints/rebuild.sh` ran the five ... took 69.5 minutes of wall time.\n")
    card, kept = keep_rebuild_line("# card\nMachine: b\n\n## Rebuild\n", old)
    assert kept and card.splitlines()[2].endswith("took 69.5 minutes of wall time.")
    fresh = "Machine: b\n`checkpoints/rebuild.sh` ran learned ... took 70.0 minutes\n"
    assert keep_rebuild_line(fresh, old) == (fresh, False)  # a new measurement replaces the old one
