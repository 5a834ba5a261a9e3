"""The training timeline: snapshots a shipped model kept while it trained, read back for drawing.

`lpos.snapshots` writes meta["timeline"] during training; this module turns it into numbers a
page can draw (cosine maps per step, the band by distance, nearest tokens of a probe word) and
into sentences a teacher can read out, computed from those numbers only. `timeline_views` gathers
what the page reads at every step, so a model's are computed once (precomputed for the shipped ones).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.analysis.counts import listed
from lpos.analysis.similarity import cosine_by_distance, cosine_similarity_map, mean_neighbour_distance
from lpos.tokenizer import GPT2, Tokenizer, visible

BAND_DISTANCES = (1, 16, 64)  # where the card and the page read the band


@dataclass(frozen=True)
class Timeline:
    steps: list[int]
    val_loss: list[float]  # on the first `eval_tokens` held-out TinyStories tokens
    eval_tokens: int
    position_kind: str  # "table": the learned rows; "block1": what block 1 writes per position
    position_rows: np.ndarray  # (S, T, C)
    probe_words: list[str]
    probe_ids: list[int]
    neighbours: np.ndarray  # (S, W, k) token ids
    neighbour_cos: np.ndarray  # (S, W, k)
    probe_tokens: list[str]  # the probe sentence, token by token
    attention: np.ndarray  # (S, nh, T, T) first layer on the probe sentence
    repeated_word: str
    repeated_cos: np.ndarray  # (S, n, n) cosine of the summed rows of the repeated word
    # a learned bias on the scores (t5, fire): the first layer's bias rows of a few queries (S, nh, Q, T)
    bias_queries: list[int] | None = None
    bias: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.steps)


def timeline_of(meta: dict, *, tokenizer: Tokenizer = GPT2) -> Timeline | None:
    """The model's timeline, or None when it has none (untrained, uploaded, older checkpoints)."""
    raw = meta.get("timeline") if isinstance(meta, dict) else None
    if not isinstance(raw, dict):
        return None
    array = lambda key: torch.as_tensor(raw[key]).float().numpy()  # noqa: E731
    return Timeline(
        steps=[int(s) for s in raw["steps"]], val_loss=[float(v) for v in raw["val_loss"]],
        eval_tokens=int(raw["eval_tokens"]), position_kind=str(raw["position_kind"]),
        position_rows=array("position_rows"), probe_words=list(raw["probe_words"]),
        probe_ids=[int(i) for i in raw["probe_ids"]], neighbours=torch.as_tensor(raw["neighbours"]).numpy(),
        neighbour_cos=array("neighbour_cos"),
        probe_tokens=[visible(t) for t in tokenizer.token_strings(tokenizer.encode_known(raw["probe_sentence"])[0])],
        attention=array("attention"), repeated_word=str(raw["repeated_word"]), repeated_cos=array("repeated_cos"),
        bias_queries=[int(q) for q in raw["bias_queries"]] if "bias" in raw else None,
        bias=array("bias") if "bias" in raw else None,
    )


def starting_rows(meta: dict, length: int) -> np.ndarray | None:
    """The learned table as this model's training started it (its step-0 snapshot), first `length`
    rows; None when the model kept no snapshots or has no learned table."""
    raw = meta.get("timeline") if isinstance(meta, dict) else None
    if not isinstance(raw, dict) or raw.get("position_kind") != "table" or raw.get("steps", [None])[0] != 0:
        return None
    return torch.as_tensor(raw["position_rows"][0][:length]).float().numpy()


def cosine_maps(timeline: Timeline) -> np.ndarray:
    """Position x position cosine map at every snapshot, (S, T, T)."""
    return np.stack([cosine_similarity_map(rows) for rows in timeline.position_rows])


def band_over_time(timeline: Timeline) -> pd.DataFrame:
    """Per snapshot: step, mean cosine at each distance, and how far the 10 nearest positions sit.
    Columns: step, distance, cosine (long form) plus neighbour_distance per step."""
    frames = []
    for step, rows in zip(timeline.steps, timeline.position_rows):
        band = cosine_by_distance(rows)[["distance", "cosine"]]
        frames.append(band.assign(step=step, neighbour_distance=mean_neighbour_distance(rows)))
    return pd.concat(frames, ignore_index=True)


def bands_at(band: pd.DataFrame, steps: list[int]) -> dict[str, pd.DataFrame]:
    """The rows of `band` (band_over_time) at each of `steps`, by "step N": the lines of one band figure."""
    return {f"step {step}": band[band.step == step] for step in steps}


def table_structure(rows: np.ndarray | torch.Tensor) -> dict:
    """The two figures the card reports for a position table: the mean distance of each row's
    10 nearest rows, and the mean cosine at BAND_DISTANCES."""
    band = cosine_by_distance(rows).set_index("distance")["cosine"]
    return {"neighbour_distance": round(mean_neighbour_distance(rows), 2),
            **{f"cosine_at_{d}": round(float(band[d]), 3) for d in BAND_DISTANCES if d in band.index}}


def band_cosines(structure: dict, distances: tuple[int, ...] = BAND_DISTANCES) -> str:
    """"0.93 at distance 1, 0.41 at distance 16": the mean cosines a `table_structure` holds at `distances`
    (those the table is long enough for)."""
    return ", ".join(f"{structure[f'cosine_at_{d}']:.2f} at distance {d}" for d in distances if f"cosine_at_{d}" in structure)


def neighbours_at(timeline: Timeline, word: str, index: int, *, tokenizer: Tokenizer = GPT2) -> pd.DataFrame:
    """The nearest tokens of probe `word` at snapshot `index`. Columns: rank, token, cosine."""
    w = timeline.probe_words.index(word)
    ids = timeline.neighbours[index, w].tolist()
    return pd.DataFrame({"rank": np.arange(1, len(ids) + 1), "token": [visible(t) for t in tokenizer.token_strings(ids)],
                         "cosine": timeline.neighbour_cos[index, w]})


def repeated_similarity(timeline: Timeline) -> pd.DataFrame:
    """Mean cosine between the summed rows of the repeated word's occurrences, per step."""
    n = timeline.repeated_cos.shape[-1]
    off = ~np.eye(n, dtype=bool)
    return pd.DataFrame({"step": timeline.steps,
                         "cosine": [float(m[off].mean()) if n > 1 else 1.0 for m in timeline.repeated_cos]})


def timeline_reading(timeline: Timeline) -> list[str]:
    """Sentences a teacher can narrate, from the snapshots' own numbers."""
    first, last = timeline.steps[0], timeline.steps[-1]
    lines = [loss_sentence(timeline)]
    if timeline.position_kind != "table":
        return lines + [first_block_reading(timeline)]
    band = band_over_time(timeline)
    far_distance = min(64, timeline.position_rows.shape[1] // 2)
    near = band[band.distance == 1].set_index("step")
    far = band[band.distance == far_distance].set_index("step")
    start, end = near.iloc[0], near.iloc[-1]
    lines.append(f"At step {first} the rows are random: neighbouring positions have cosine {start.cosine:.2f}, and "
                 f"a row's 10 most similar rows sit {start.neighbour_distance:.1f} positions away on average.")
    pulled = near[near.cosine >= 0.5]
    if len(pulled):
        step = int(pulled.index[0])
        lines.append(f"By step {step} nearby positions have pulled together: cosine {near.cosine[step]:.2f} at "
                     f"distance 1 against {far.cosine[step]:.2f} at distance {far_distance}.")
    lines.append(f"At step {last}: cosine {end.cosine:.2f} at distance 1 and {far.cosine.iloc[-1]:.2f} at distance "
                 f"{far_distance}; the 10 nearest rows sit {end.neighbour_distance:.1f} positions away.")
    return lines


def loss_sentence(timeline: Timeline) -> str:
    """The validation loss from the first snapshot to the last, and its lowest point where the run ends above it."""
    losses = [float(v) for v in timeline.val_loss]
    low = min(range(len(losses)), key=losses.__getitem__)
    first, last, on = timeline.steps[0], timeline.steps[-1], f"(on {timeline.eval_tokens:,} held-out tokens)"
    if f"{losses[low]:.2f}" == f"{losses[-1]:.2f}":
        return f"Validation loss falls from {losses[0]:.2f} at step {first} to {losses[-1]:.2f} at step {last} {on}."
    return (f"Validation loss falls from {losses[0]:.2f} at step {first} to its lowest, {losses[low]:.2f}, at step "
            f"{timeline.steps[low]}, and ends at {losses[-1]:.2f} at step {last} {on}.")


def first_block_reading(timeline: Timeline) -> str:
    """For a model without a learned table (the map is of what the first block adds at each position): the
    cosine of neighbouring positions over the run, against far-apart ones at the last step, and whether a band
    (called one here at cosine 0.5 or more at distance 1) has formed."""
    band = band_over_time(timeline)
    far_distance = min(64, timeline.position_rows.shape[1] // 2)
    near = band[band.distance == 1].set_index("step").cosine
    far = band[band.distance == far_distance].set_index("step").cosine
    first, last = timeline.steps[0], timeline.steps[-1]
    # rounded to what is printed (+ 0.0: a cosine of -0.001 reads 0.00, not -0.00)
    start, end, end_far, low, high = (round(float(v), 2) + 0.0 for v in (near.iloc[0], near.iloc[-1], far.iloc[-1],
                                                                          near.min(), near.max()))
    if end >= 0.5:
        verdict = ("A band (cosine 0.5 or more at distance 1): neighbouring positions get alike contributions"
                   + (f", already at step {first}, before any update." if start >= 0.5 else "."))
    elif end - end_far >= 0.05:
        verdict = ("No band (cosine 0.5 or more at distance 1), only a faint tilt: neighbouring positions get "
                   "slightly more alike contributions than far-apart ones.")
    else:
        verdict = "No band: neighbouring positions get contributions no more alike than far-apart ones, give or take 0.05."
    return (f"This scheme has no learned table of position rows, so the map is of what the first block adds at each position. "
            f"Neighbouring positions' cosine goes from {start:.2f} at step {first} to {end:.2f} at step {last} "
            f"(between {low:.2f} and {high:.2f} over the run), against {end_far:.2f} at distance "
            f"{far_distance} at the end. {verdict}")


def attention_sentence(timeline: Timeline, index: int) -> str:
    """What the first layer's heads do with the probe sentence's last token at snapshot `index`, against
    an even spread over its past (ALiBi's bias tilts them from step 0: it is not learned)."""
    weights = timeline.attention[index][:, -1, :].astype(np.float64)  # (nh, T) the last query's weights
    T = weights.shape[-1]
    back = (weights * (T - 1 - np.arange(T))).sum(-1)  # (nh,) mean distance looked back
    even_back, even_weight = (T - 1) / 2, 1 / T
    largest = weights.max(-1)  # (nh,)
    nearly_even = bool((np.abs(back - even_back) <= 0.1 * even_back).all() and (largest <= 2 * even_weight).all())
    listed = ", ".join(f"{b:.1f}" for b in back)
    verdict = ("every head spreads its weight nearly evenly over the past" if nearly_even else
               "the heads do not spread their weight evenly over the past")
    return (f"At step {timeline.steps[index]} {verdict}: the last token (with {T - 1} earlier tokens) looks back "
            f"{listed} tokens on average, head by head, against {even_back:.1f} for an even spread, and puts at most "
            f"{largest.max():.3f} on one key (even: {even_weight:.3f}).")


def bias_over_distance(timeline: Timeline, index: int) -> pd.DataFrame:
    """The first layer's learned bias at snapshot `index` against distance, for each head and kept query:
    columns head, query, distance (0 .. query), bias. Empty for a timeline without a learned bias."""
    if timeline.bias is None:
        return pd.DataFrame(columns=["head", "query", "distance", "bias"])
    parts = []
    for h, rows in enumerate(timeline.bias[index]):  # (Q, T)
        for query, row in zip(timeline.bias_queries, rows):
            keys = np.arange(query + 1)
            parts.append(pd.DataFrame({"head": h, "query": query, "distance": query - keys, "bias": row[keys]}))
    return pd.concat(parts, ignore_index=True).sort_values(["head", "query", "distance"], ignore_index=True)


def bias_reading(timeline: Timeline, index: int) -> str:
    """How far the learned bias has moved: its spread (largest minus smallest over distances, per head, at the
    last kept query) at step 0 and at this step, and how much it differs between the kept queries at one
    distance (zero for a bias of distance alone, such as T5's)."""
    def spread(i: int) -> np.ndarray:
        frame = bias_over_distance(timeline, i)
        last = frame[frame["query"] == timeline.bias_queries[-1]]
        return last.groupby("head")["bias"].agg(lambda b: b.max() - b.min()).to_numpy()

    frame = bias_over_distance(timeline, index)
    shared = min(timeline.bias_queries)
    at = frame[frame.distance == shared].groupby("head")["bias"].agg(lambda b: b.max() - b.min())
    first, now, step = spread(0), spread(index), timeline.steps[index]
    queries = listed([str(q) for q in timeline.bias_queries])
    differ = float(at.max())
    if len(timeline.bias_queries) == 1:
        where = ""
    elif differ == 0:
        where = f"At distance {shared}, the queries at positions {queries} get the same bias: it depends on the distance alone."
    elif differ < 0.01:
        where = (f"At distance {shared}, the queries at positions {queries} get biases that differ by less than 0.01 at "
                 f"step {step}: so far the bias barely depends on where the query sits.")
    else:
        where = (f"At distance {shared}, the queries at positions {queries} get biases that differ by up to {differ:.2f} "
                 f"at step {step}: the bias depends on where the query sits, not only on the distance.")
    then = f"{first.min():.3f} to {first.max():.3f} at step {timeline.steps[0]}"
    ranges = then if index == 0 else f"{then}, {now.min():.3f} to {now.max():.3f} at step {step}"
    return (f"Largest minus smallest bias over the distances, head by head (query at position "
            f"{timeline.bias_queries[-1]}): {ranges}. {where}").strip()


def evaluation_rows_sentence(model, T: int) -> str | None:
    """For a table read at sampled positions (a randomized table): which of its rows the timeline kept, the
    ones a T-token evaluation window reads. None when a window reads rows 0..T-1."""
    positions = model.scheme.input_positions(model.config, T, 0)
    if torch.equal(positions.cpu(), torch.arange(T)):
        return None
    shown = ", ".join(str(int(p)) for p in positions[:3])
    return (f"This model's table has {model.config.block_size:,} rows; a window of {T} tokens reads {T} of them at "
            f"positions drawn once from its seed, in increasing order ({shown}, …, {int(positions[-1])}). The map "
            f"and the band compare those {T} rows in reading order, so a distance counts tokens in the window, "
            f"not rows of the table.")


@dataclass(frozen=True)
class TimelineViews:
    """What the Training timeline page reads besides the snapshots, at every step at once: computed once
    per model, so moving the step computes nothing (lpos.precomputed stores the shipped models')."""
    band: pd.DataFrame  # band_over_time
    reading: list[str]  # timeline_reading
    repeated: pd.DataFrame  # repeated_similarity
    attention: list[str]  # attention_sentence, by snapshot
    bias: list[pd.DataFrame] | None = None  # bias_over_distance by snapshot, for a learned bias (t5, fire)
    bias_reading: list[str] | None = None  # bias_reading by snapshot, the same


def timeline_views(timeline: Timeline) -> TimelineViews:
    """The band, the readings and, by snapshot, the attention sentence and the learned bias of `timeline`."""
    snapshots = range(len(timeline))
    biased = timeline.bias is not None
    return TimelineViews(
        band=band_over_time(timeline), reading=timeline_reading(timeline), repeated=repeated_similarity(timeline),
        attention=[attention_sentence(timeline, i) for i in snapshots],
        bias=[bias_over_distance(timeline, i) for i in snapshots] if biased else None,
        bias_reading=[bias_reading(timeline, i) for i in snapshots] if biased else None)
