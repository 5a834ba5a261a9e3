"""What the Lab page says about its runs, computed from the runs' summaries only (lpos.lab.summary: scheme,
task, window, steps, seconds, stopped, accuracy_by_length with None where the scheme cannot read that far).

    run_sentence(summary)    "rope: 99% at 32 tokens (its window), 41% at 128."
    compare_sentence(runs)   which run of a task holds up best at four times its window, and which cannot read it
    twins_sentence(...)      a scheme whose model at this size computes exactly what another's does (lpos.lab.twins)
"""
from __future__ import annotations

from lpos.analysis.counts import listed


def percent(value: float) -> str:
    """A share as the page prints it: whole percents, one decimal near the ends (99.5%, not 100%)."""
    shown = f"{value:.0%}"
    return f"{value:.1%}" if shown in ("0%", "100%") and 0 < value < 1 else shown


def accuracies(summary: dict) -> dict[int, float | None]:
    return {int(k): v for k, v in summary["accuracy_by_length"].items()}


def run_label(summary: dict) -> str:
    """How the chart's legend and the sentences name a run: scheme, window, and the seed or size when not the default."""
    extra = ([f"seed {summary['seed']}"] if summary.get("seed") else []) + \
            ([summary["preset"]] if summary.get("preset", "tiny") != "tiny" else [])
    return f"{summary['scheme']} · {summary['window']}" + "".join(f" · {e}" for e in extra)


def run_sentence(summary: dict) -> str:
    """The run's accuracy at its window and at the farthest length it was tested, or where it stops reading."""
    found, window = accuracies(summary), summary["window"]
    longest = max(found)
    said = f"{summary['scheme']}: {percent(found[window])} at {window} tokens (its window)"
    unread = [length for length, value in found.items() if value is None]
    if unread:
        said += (f"; it cannot read {min(unread)} tokens or more: its table of positions ends at row {window - 1}, "
                 "so there is no number to give")
    else:
        said += f", {percent(found[longest])} at {longest}"
    stopped = f" It {summary['stopped']}." if summary.get("stopped") else ""
    return f"{said}.{stopped}"


def compare_sentence(runs: list[dict]) -> str:
    """Across a task's runs: which holds up best at the farthest length all of them were tested at, and which
    cannot read that far ("" for fewer than two runs)."""
    if len(runs) < 2:
        return ""
    farthest = min(max(accuracies(r)) for r in runs)
    read = [(accuracies(r).get(farthest), r) for r in runs]
    measured = sorted(((v, r) for v, r in read if v is not None), key=lambda item: -item[0])
    unread = [run_label(r) for v, r in read if v is None]
    said = ""
    if measured:
        best, worst = measured[0], measured[-1]
        said = f"At {farthest} tokens {run_label(best[1])} holds up best ({percent(best[0])})"
        said += f" and {run_label(worst[1])} worst ({percent(worst[0])})." if len(measured) > 1 else "."
    if unread:
        said += f" {listed(unread)} cannot read {farthest} tokens at all."
    return said.strip()



def twins_sentence(scheme: str, preset: str, layers: int, same: list[str] | tuple[str, ...], apart: list[str]) -> str:
    """Says that a `scheme` run at the `preset` size (`layers` layers) gives the numbers of a run of each scheme in
    `same`, and which sizes (`apart`) tell them apart."""
    return (f"At the {preset} size ({layers} layers), the {scheme} model computes exactly what the {listed(same, 'or')} "
            f"model of the same seed computes: their runs give the same numbers."
            + (f" The {listed(apart, 'or')} size tells them apart." if apart else ""))
