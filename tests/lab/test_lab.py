"""The lab's engine: its tasks write what they say, accuracy by length stops where a table stops, the CLI's JSON
and checkpoint, the text task's refusals, the sentences and the length chart computed from runs."""
from __future__ import annotations

import json
import os
import time

import psutil
import pytest
import torch

from lpos import checkpoints, lab
from lpos.analysis.lab import compare_sentence, run_sentence, twins_sentence
from lpos.cli import main
from lpos.figures.lab import lengths_figure
from lpos.lab.job import NICENESS
from lpos.lab.measure import accuracy_by_length, evaluation_lengths
from lpos.lab.runs import LocalRuns
from lpos.lab.tasks import BACK, LETTERS, PAD, SEPARATOR, TASKS
from lpos.lab.training import MEMORY_CHECK_STEPS, Caps, build_model, make_task, stop_reason
from lpos.resident import memory_mb


def decoded(task, ids) -> str:
    return "".join(task.characters[i] for i in ids)


@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_copy_and_reverse_samples_are_letters_separator_and_the_answer(name):
    task = TASKS[name]
    batch = task.batch(16, 32, torch.Generator().manual_seed(0))
    assert batch.x.shape == batch.y.shape == batch.scored.shape == (16, 32)
    for x, y, scored in zip(batch.x, batch.y, batch.scored):
        text = decoded(task, [int(x[0]), *y.tolist()]).rstrip(PAD)
        shown, answer = text.split(SEPARATOR)
        assert set(shown) <= set(LETTERS) and 1 <= len(shown) <= 15
        assert answer == (shown if name == "copy" else shown[::-1])
        assert decoded(task, y[scored].tolist()) == answer  # exactly the answer's letters are scored


def test_back_repeats_the_letter_k_places_back_and_count_counts():
    back = TASKS["back"].example()
    assert all(back[i] == back[i - BACK] for i in range(BACK, len(back)))
    count = TASKS["count"].example()
    for i in range(0, len(count) - 1, 2):
        assert int(count[i + 1]) == count[: i + 1 : 2].count(count[i]) % 10


def test_every_task_has_its_description_and_an_exact_length_sample():
    for task in TASKS.values():
        assert task.description and task.label
        batch = task.batch(4, 24, torch.Generator().manual_seed(1), exact=True)
        assert batch.scored.any(dim=1).all()


def test_accuracy_by_length_is_none_past_a_learned_table_only():
    for scheme, readable in (("learned", {8, 16}), ("rope", {8, 16, 24, 32, 48, 64})):
        args = lab.LabArgs(scheme=scheme, window=16)
        task = make_task(args)
        model, _ = build_model(args, task)
        found = accuracy_by_length(model, task, 16)
        assert list(found) == evaluation_lengths(16) == [8, 16, 24, 32, 48, 64]
        assert {k for k, v in found.items() if v is not None} == readable
        assert all(0 <= v <= 1 for v in found.values() if v is not None)


def test_cli_json_and_a_checkpoint_load_opens_with_its_characters(tmp_path, capsys):
    out = tmp_path / "run.pt"
    assert main(["lab", "--task", "copy", "--scheme", "rope", "--window", "16", "--steps", "3", "--out", str(out),
                 "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert {"scheme", "task", "window", "steps", "seconds", "accuracy_by_length"} <= set(found)
    assert (found["scheme"], found["task"], found["window"], found["steps"]) == ("rope", "copy", 16, 3)
    assert list(found["accuracy_by_length"]) == ["8", "16", "24", "32", "48", "64"]
    model, meta = checkpoints.load(out)
    assert meta["tokenizer"].encode("ab|ab") == [TASKS["copy"].characters.index(c) for c in "ab|ab"]
    assert model.config.position == "rope" and model.config.block_size == 16
    assert meta["timeline"]["steps"][0] == 0 and meta["timeline"]["steps"][-1] == 3
    assert meta["lab"]["accuracy_by_length"] == {int(k): v for k, v in found["accuracy_by_length"].items()}


def test_the_memory_cap_counts_what_the_run_takes_not_what_its_process_held_before():
    """A run in a process that already holds more than the cap (the CLI inside a test session, a notebook with
    models loaded) trains all its steps; one that takes more than the cap is stopped, saying so."""
    held = memory_mb()
    cap = int(held) // 2  # this process holds twice the cap before the run (torch and the tests' models)
    args = lab.LabArgs(task="copy", scheme="rope", window=16, steps=MEMORY_CHECK_STEPS + 5)
    _, meta = lab.train(args, caps=Caps(max_memory_mb=cap))
    assert (meta["lab"]["steps_done"], meta["lab"]["stopped"]) == (MEMORY_CHECK_STEPS + 5, None)
    said = stop_reason(0.0, 0, Caps(max_memory_mb=cap), None, held_before=memory_mb() - cap - 50)
    assert said is not None and said.startswith(f"stopped at the memory cap of {cap:,} MB (")
    assert said.endswith("MB taken by the run), after 1 step")


def test_text_refuses_what_it_cannot_read():
    with pytest.raises(lab.TextError, match="1 MB"):
        lab.read_text(b"a" * (2**20 + 1))
    with pytest.raises(lab.TextError, match="UTF-8"):
        lab.read_text(b"\xff\xfe" + "words ".encode("utf-16-le") * 300)
    with pytest.raises(lab.TextError, match="too short"):
        lab.read_text("A short line.")


def test_text_task_trains_over_its_own_tokens_only():
    args = lab.LabArgs(task="text", scheme="alibi", window=16)
    task = make_task(args)
    model, tokenizer = build_model(args, task)
    assert tokenizer.is_gpt2
    assert torch.equal(model.output_vocab, task.ids().unique())


def summary(scheme, values, window=32, stopped=None):
    return {"scheme": scheme, "task": "copy", "window": window, "preset": "tiny", "seed": 0, "steps": 800,
            "seconds": 30.0, "stopped": stopped, "accuracy_by_length": dict(zip([16, 32, 64, 128], values))}


def test_sentences_are_computed_from_the_runs():
    rope = summary("rope", [1.0, 0.99, 0.6, 0.41])
    learned = summary("learned", [1.0, 0.97, None, None], stopped="stopped by the learner after 500 steps")
    assert run_sentence(rope) == "rope: 99% at 32 tokens (its window), 41% at 128."
    said = run_sentence(learned)
    assert said.startswith("learned: 97% at 32 tokens (its window); it cannot read 64 tokens or more")
    assert said.endswith("It stopped by the learner after 500 steps.")
    assert compare_sentence([rope, learned]) == "At 128 tokens rope · 32 holds up best (41%). learned · 32 cannot read 128 tokens at all."
    assert compare_sentence([rope]) == ""


def test_length_chart_marks_what_a_run_cannot_read():
    fig = lengths_figure([summary("rope", [1.0, 0.99, 0.6, 0.41]), summary("learned", [1.0, 0.97, None, None])],
                         task="Copy")
    marks = [t for t in fig.data if t.marker.symbol == "x"]
    assert len(marks) == 1 and list(marks[0].x) == [64, 128] and "cannot read" in marks[0].hovertemplate


def test_twins_are_the_schemes_whose_model_computes_the_same_at_that_size():
    """rnope skips RoPE in every fourth layer: with the tiny size's 2 layers none is skipped, so its model is rope's
    (the same seeded weights, the same scores); the shipped size's 4 layers tell them apart."""
    assert lab.twins("rnope", "tiny", 32) == ("rope",) and lab.twins("rope", "tiny", 32) == ("rnope",)
    assert lab.twins("rnope", "shipped", 32) == ()
    assert lab.twins("learned", "tiny", 32) == () and lab.twins("alibi", "tiny", 16) == ()
    tiny = build_model(lab.LabArgs(scheme="rnope"), TASKS["copy"])[0]
    assert all(tiny.scheme.rotates_layer(layer) for layer in range(tiny.config.n_layer))
    shipped = build_model(lab.LabArgs(scheme="rnope", preset="shipped"), TASKS["copy"])[0]
    assert not shipped.scheme.rotates_layer(3)


def test_twins_sentence_names_the_size_that_tells_them_apart():
    assert twins_sentence("rnope", "tiny", 2, ("rope",), ["shipped"]) == (
        "At the tiny size (2 layers), the rnope model computes exactly what the rope model of the same seed computes: "
        "their runs give the same numbers. The shipped size tells them apart.")


def test_a_server_started_worker_trains_at_a_lower_priority_than_the_server():
    runs = LocalRuns(workers=1)
    run_id = runs.submit(lab.LabArgs(steps=5000))
    deadline = time.monotonic() + 120
    while not (runs.status(run_id).progress or runs.status(run_id).done) and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = [p for p in psutil.Process().children() if "lpos.lab.job" in " ".join(p.cmdline())]
    try:
        assert len(workers) == 1 and runs.status(run_id).state == "running"
        assert workers[0].nice() == min(19, os.nice(0) + NICENESS)
    finally:
        runs.stop(run_id)
    while not runs.status(run_id).done and time.monotonic() < deadline:
        time.sleep(0.1)
    assert runs.status(run_id).state in ("finished", "stopped")
