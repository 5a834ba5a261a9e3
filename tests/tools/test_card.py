"""The model card (`lpos.card`, `python -m lpos card`), built from small stand-in checkpoints: every model
present is named, every goal line states a number and met/missed, nothing is said about a model that is not
there, and the models are found by what their scheme is, not by their names (the files here are named
`tiny-<scheme>`, so a card that looked a model up by a scheme's name would miss it)."""
from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest
import torch

from lpos.card import NUMBER_WORDS, model_card
from lpos.cli import main
from lpos.positions import SCHEMES
from lpos.tokenizer import END_OF_TEXT
from lpos.train import TrainArgs, train, window_positions

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("the cat dog bird girl boy tree sun moon ran jumped saw liked found a big small red happy little and then "
         "she he they went home to park with ball friend played sang").split()
RANDOM_ROWS = 1024


def stories(count: int = 60, words: int = 200) -> str:
    rng = random.Random(0)
    return f"\n{END_OF_TEXT}\n".join(" ".join(rng.choice(WORDS) for _ in range(words)) + "." for _ in range(count))


def tiny_args(folder: Path, corpus: Path, name: str, **changes) -> TrainArgs:
    values = dict(data=(str(corpus),), out=str(folder / f"{name}.pt"), steps=2, batch_size=4, warmup=1, n_layer=1,
                  n_head=2, n_embd=16, block_size=16, save_every=100, eval_lengths=(8, 16, 512), threads=1)
    return TrainArgs(**{**values, **changes})


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """One tiny model per scheme (tiny-<scheme>), a short-window variant and a randomized table."""
    base = tmp_path_factory.mktemp("card")
    corpus = base / "tinystories_cards.txt"  # a tinystories* name: its held-out stories are the headline loss
    corpus.write_text(stories() + "\n", encoding="utf-8")
    folder = base / "checkpoints"
    runs = {f"tiny-{scheme}": dict(scheme=scheme) for scheme in SCHEMES}
    runs["tiny-learned-8"] = dict(scheme="learned", max_length=8)
    runs["tiny-learned-rand"] = dict(scheme="learned", random_positions=RANDOM_ROWS)
    with torch.random.fork_rng(devices=[]):
        for name, changes in runs.items():
            train(tiny_args(folder, corpus, name, **changes), progress=False)
    return folder


@pytest.fixture(scope="module")
def card(folder) -> str:
    return model_card(folder=folder)


def section(text: str, title: str, *, paragraphs: int | None = None) -> list[str]:
    """The lines under a Markdown heading, up to the next heading (or after its first `paragraphs` paragraphs)."""
    lines = text.splitlines()
    start = lines.index(title) + 2  # the heading and the blank line under it
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    blanks = [i for i in range(start, end) if not lines[i]]
    return lines[start: blanks[paragraphs - 1] if paragraphs and len(blanks) >= paragraphs else end]


def test_the_card_names_every_model_present(folder, card):
    names = sorted(p.stem for p in folder.glob("*.pt"))
    assert len(names) == len(SCHEMES) + 2
    for name in names:
        assert card.count(f"| {name} |") >= 3, name  # architecture, results and loss-by-length tables
        assert f"--out checkpoints/{name}.pt" in card
    assert f"\n\n{NUMBER_WORDS[len(SCHEMES)]} small GPTs, one per position scheme ({', '.join(f'tiny-{s}' for s in SCHEMES)})" in card
    assert "## tiny-learned-8: the learned table's second limit" in card
    assert "## tiny-learned-rand: a table read at random positions" in card


def test_every_goal_line_has_a_number_and_a_verdict(card):
    goals = [line for line in section(card, "### Goals, measured", paragraphs=1) if line.startswith("- ")]
    assert len(goals) >= 10
    for line in goals:
        assert re.search(r"\d", line) and re.search(r"\*\*(met|missed)", line), line


def test_goals_find_the_models_by_their_scheme(card):
    goals = "\n".join(section(card, "### Goals, measured", paragraphs=1))
    assert "Without `tiny-none` (the model that gets no position signal at all)" in goals
    assert re.search(r"- ALiBi degrades least from 16 to 512 tokens .* the least is \*\*tiny-[\w-]+\*\* \([+-]\d\.\d{3} nats\)",
                     goals)
    for label, name in (("T5 bias", "tiny-t5"), ("FIRE", "tiny-fire")):
        assert re.search(rf"- {label} \(`{name}`\) within 0.1 nats of RoPE \(`tiny-rope`\) at 16 tokens, held out: "
                         r"\d\.\d{3} against \d\.\d{3}", goals)
    assert re.search(r"- `tiny-learned-rand` at 512 tokens within 0.3 nats of itself at 16", goals)
    assert re.search(r"- `tiny-learned-rand` at 16 tokens within 0.15 nats of `tiny-learned`", goals)
    assert "Learned table (`tiny-learned`), the 10 nearest positions" in goals  # not the variants' tables
    assert re.search(r"- Every file under 8 MB on disk .*\*\*met\*\* \(largest: `tiny-[\w-]+\.pt`, [\d,]+ bytes", goals)


def test_the_randomized_table_section_is_measured(folder, card):
    lines = "\n".join(section(card, "## tiny-learned-rand: a table read at random positions"))
    meta = torch.load(folder / "tiny-learned-rand.pt", weights_only=True)["meta"]
    args = TrainArgs(**{k: tuple(v) if isinstance(v, list) else v for k, v in meta["train_args"].items()})
    read = torch.cat([window_positions(step, args).flatten() for step in range(args.steps)]).unique()
    assert f"{len(read):,} of the {RANDOM_ROWS:,} rows were read in training" in lines
    assert "rebuilt from the training seed, matching the stored step-0 snapshot, at the rows it holds" in lines
    # a row no window read gets no gradient (Adam's moments stay 0) and only shortens: exactly the rows read turn
    assert f"- {len(read):,} of the 1,024 rows measured turned away from their step-0 direction" in lines
    assert re.search(r"\| tiny-learned \| [\d.]+ \| [\d.]+ \| n/a: the table has 16 rows \|", lines)
    assert re.search(r"\| tiny-learned-rand \| [\d.]+ \| [\d.]+ \| [\d.]+ \|", lines)  # it reads 512 tokens


def test_the_schemes_each_get_their_own_paragraph(card):
    from lpos.positions import REGISTRY

    paragraphs = "\n".join(section(card, "## The position schemes"))
    for scheme in REGISTRY.values():
        assert f"**{scheme.label}**" in paragraphs and scheme.explanation in paragraphs
        if scheme.paper:
            assert f"[\"{scheme.paper.title}\"]({scheme.paper.url})" in paragraphs


def test_nothing_is_said_about_a_model_that_is_not_there(folder, tmp_path):
    kept = ["tiny-learned", "tiny-rope", "tiny-alibi", "tiny-none"]
    for name in kept:
        shutil.copy(folder / f"{name}.pt", tmp_path / f"{name}.pt")
    card = model_card(folder=tmp_path)
    for gone in sorted(p.stem for p in folder.glob("*.pt") if p.stem not in kept):
        assert not re.search(rf"\b{re.escape(gone)}(?![\w-])", card), gone
    assert "T5 bias" not in card and "FIRE" not in card and "random positions" not in card
    assert card.count("small GPTs, one per position scheme (tiny-learned, tiny-rope, tiny-alibi, tiny-none)") == 1
    assert "Four small GPTs" in card


def test_the_card_command_describes_another_folder(folder, tmp_path, capsys):
    out = tmp_path / "README.md"
    assert main(["card", "--checkpoints", str(folder), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == model_card(folder=folder) and f"wrote {out}" in capsys.readouterr().out


def test_the_card_compares_no_scheme_name():
    names = "|".join(re.escape(name) for name in SCHEMES)
    quoted = re.compile(rf"""["']({names})["']""")
    for path in (ROOT / "lpos" / "card.py", ROOT / "lpos" / "card_sections.py"):
        found = [f"{path.name}:{i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1)
                 if quoted.search(line)]
        assert not found, found
