"""The printed table: the benchmark's results as the text `python -m lpos bench` prints."""
from __future__ import annotations


def _ms(stat: dict) -> str:
    return f"{stat['median']:,.0f} [{stat['min']:,.0f}–{stat['max']:,.0f}]"


def _kb(n: float) -> str:
    return f"{n / 1024:,.0f} KB"


def table(results: dict) -> str:
    """The results as the text `python -m lpos bench` prints."""
    m = results["machine"]
    lines = [f"lpos bench — {m['cpu_cores']} CPU cores, Python {m['python']}, torch {m['torch']}; "
             f"{results['runs']} run(s), medians [min–max]", ""]
    model = results["model"]
    for entry in model["train"]:
        lines.append(f"training  {entry['scheme']:<11} {entry['tokens_per_s']:>9,.0f} tokens/s  "
                     f"({entry['steps']} steps of 16 x 128 tokens, softmax over {entry['vocab']:,} tokens)")
    speeds = ", ".join(f"length {length}: {speed:,.0f} tokens/s" for length, speed in model["eval"]["tokens_per_s"].items()
                       if speed is not None)
    lines.append(f"evaluation {model['eval']['scheme']:<10} {speeds}")
    app = results.get("app")
    if app is None:
        return "\n".join(lines)
    floor, goal = app["floor"], results["goal_ratio"]
    header = ["page", "first draw", "new sentence", "ratio", "switch scheme", "ratio", "server", "ws/change", "load ws+HTTP"]
    rows = [["bare page", "", _ms(floor["sentence_ms"]), "1.00", _ms(floor["scheme_ms"]), "1.00", "", "", ""]]
    for name, page in app["pages"].items():
        note = "" if max(page["sentence_ratio"], page["scheme_ratio"]) <= goal else "over goal"
        note += f" {page['errors']} error(s)!" if page["errors"] else ""
        rows.append([name, f"{page['first_draw_ms']:,.0f}", _ms(page["sentence_ms"]), f"{page['sentence_ratio']:.2f}",
                     _ms(page["scheme_ms"]), f"{page['scheme_ratio']:.2f}", f"{page['server_share']['median']:.0%}",
                     _kb(page["interaction_ws_bytes"]["median"]),
                     f"{_kb(page['load_ws_bytes'])} + {_kb(page['load_http_bytes'])}", note])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines += ["", f"Sidebar change -> page fully drawn, ms (goal: at most {goal}x the bare page)"]
    for row in [header, *rows]:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells + row[len(header):]).rstrip())
    lines.append("(server: share of the time until the script_finished message arrived; the rest is the browser drawing)")
    cold = app["cold_start"]
    lines += ["", f"cold start, command -> first page drawn: {_ms(cold['first_page_ms'])} ms; "
                  f"first page after a model switch: {_ms(cold['after_model_switch_ms'])} ms"]
    if app["similarity_1024"]:
        big = app["similarity_1024"]
        lines.append(f"similarity map {big['positions']} x {big['positions']} ({big['scheme']}): {_ms(big['ms'])} ms, "
                     f"{_kb(big['ws_bytes']['median'])} over the websocket")
    memory = app["memory"]
    verdict = "within" if memory["peak_rss_mb"] <= memory["limit_mb"] else "OVER"
    lines.append(f"server peak RSS {memory['peak_rss_mb']:,.0f} MB ({verdict} the {memory['limit_mb']} MB limit), "
                 f"end {memory['end_rss_mb']:,.0f} MB; models loaded: {', '.join(memory['models_loaded'])}; "
                 f"{memory['sessions_drawn']}/{memory['sessions_at_once']} sessions at once drawn")
    return "\n".join(lines)
