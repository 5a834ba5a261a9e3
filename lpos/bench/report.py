"""The printed table: the benchmark's results as the text `python -m lpos bench` prints."""
from __future__ import annotations

from lpos.bench.common import COLD_START_GOAL_MS, CONTROL_GOAL_RATIO, CPU_GOAL_MS, IDLE_LIMIT_MB


def _ms(stat: dict) -> str:
    return f"{stat['median']:,.0f} [{stat['min']:,.0f}–{stat['max']:,.0f}]"


def _kb(n: float) -> str:
    return f"{n / 1024:,.0f} KB"


def _cpu(stat: dict | None) -> str:
    return "" if not stat else f"{stat['median']:,.0f}"


def table(results: dict) -> str:
    """The results as the text `python -m lpos bench` prints."""
    from lpos.bench.first_visit import report as first_visits

    return "\n".join([_table(results), *first_visits(results.get("first_visit") or {})])


def _table(results: dict) -> str:
    m = results["machine"]
    lines = [f"lpos bench — {m['cpu_cores']} CPU cores, Python {m['python']}, torch {m['torch']}; "
             f"{results['runs']} run(s), medians [min–max]", ""]
    model = results.get("model")
    if model is None:  # --first-visit-only
        return "\n".join(lines)
    for entry in model["train"]:
        lines.append(f"training  {entry['scheme']:<11} {entry['tokens_per_s']:>9,.0f} tokens/s  "
                     f"({entry['steps']} steps of 16 x 128 tokens, softmax over {entry['vocab']:,} tokens)")
    speeds = ", ".join(f"length {length}: {speed:,.0f} tokens/s" for length, speed in model["eval"]["tokens_per_s"].items()
                       if speed is not None)
    lines.append(f"evaluation {model['eval']['scheme']:<10} {speeds}")
    if write := model.get("write"):
        done = write["seconds"]
        lines.append(f"writing   {len(write['models'])} models x {write['tokens']} tokens ({write['written']:,} written: a "
                     f"table stops at its last row), {write['threads']} torch thread(s): {done['median']:.2f} s "
                     f"[{done['min']:.2f}–{done['max']:.2f}] ({'within' if done['median'] <= write['goal_s'] else 'OVER'} "
                     f"the {write['goal_s']:g} s goal)")
    app = results.get("app")
    if app is None:
        return "\n".join(lines)
    floor, goal = app["floor"], results["goal_ratio"]
    header = ["page", "first draw", "new sentence", "ratio", "CPU/change", "switch scheme", "ratio", "server", "ws/change",
              "load ws+HTTP"]
    rows = [["bare page", "", _ms(floor["sentence_ms"]), "1.00", _cpu(floor.get("sentence_cpu_ms")),
             _ms(floor["scheme_ms"]), "1.00", "", "", ""]]
    for name, page in app["pages"].items():
        cpu = page.get("sentence_cpu_ms")
        over = max(page["sentence_ratio"], page["scheme_ratio"]) > goal or (cpu and cpu["median"] > CPU_GOAL_MS)
        note = "over goal" if over else ""
        note += f" {page['errors']} error(s)!" if page["errors"] else ""
        rows.append([name, f"{page['first_draw_ms']:,.0f}", _ms(page["sentence_ms"]), f"{page['sentence_ratio']:.2f}",
                     _cpu(cpu), _ms(page["scheme_ms"]), f"{page['scheme_ratio']:.2f}",
                     f"{page['server_share']['median']:.0%}", _kb(page["interaction_ws_bytes"]["median"]),
                     f"{_kb(page['load_ws_bytes'])} + {_kb(page['load_http_bytes'])}", note])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines += ["", f"Sidebar change -> page fully drawn, ms (goal: at most {goal}x the bare page)"]
    for row in [header, *rows]:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells + row[len(header):]).rstrip())
    lines.append("(server: share of the time until the script_finished message arrived; the rest is the browser drawing;"
                 f" CPU/change: the server's CPU ms per new sentence, goal at most {CPU_GOAL_MS})")
    if app.get("controls"):
        lines += ["", f"Page-local control -> drawn, ms (goal: at most {CONTROL_GOAL_RATIO}x the bare page's new sentence)"]
        for name, control in app["controls"].items():
            note = "" if control["ratio"] <= CONTROL_GOAL_RATIO else "  over goal"
            note += f" {control['errors']} error(s)!" if control["errors"] else ""
            lines.append(f"{name:<16} {control['control']:<40} {_ms(control['ms']):>18}  ratio {control['ratio']:.2f}  "
                         f"CPU {_cpu(control['cpu_ms'])} ms{note}")
    cold = app["cold_start"]
    verdict = "within" if cold["first_page_ms"]["median"] <= COLD_START_GOAL_MS else "OVER"
    lines += ["", f"cold start, command -> first page drawn: {_ms(cold['first_page_ms'])} ms ({verdict} the "
                  f"{COLD_START_GOAL_MS:,} ms goal); first page after a model switch: {_ms(cold['after_model_switch_ms'])} ms"]
    if app["similarity_1024"]:
        big = app["similarity_1024"]
        lines.append(f"similarity map {big['positions']} x {big['positions']} ({big['scheme']}): {_ms(big['ms'])} ms, "
                     f"{_kb(big['ws_bytes']['median'])} over the websocket")
    memory = app["memory"]
    verdict = "within" if memory["peak_rss_mb"] <= memory["limit_mb"] else "OVER"
    lines.append(f"server peak RSS {memory['peak_rss_mb']:,.0f} MB ({verdict} the {memory['limit_mb']} MB limit), "
                 f"end {memory['end_rss_mb']:,.0f} MB; models loaded: {', '.join(memory['models_loaded'])}; "
                 f"{memory['sessions_drawn']}/{memory['sessions_at_once']} sessions at once drawn")
    walk, idle = app.get("walk"), app.get("idle")
    if walk:
        verdict = "within" if walk["peak_rss_mb"] <= memory["limit_mb"] else "OVER"
        lines.append(f"one session walking {walk['pages']} pages x {walk['schemes']} schemes (+ the 1,024 map, 1,024 tokens "
                     f"scored): peak {walk['peak_rss_mb']:,.0f} MB ({verdict} {memory['limit_mb']} MB), "
                     f"end {walk['end_rss_mb']:,.0f} MB, {walk['seconds']:.0f} s")
    if idle:
        verdict = "within" if idle["rss_mb"] <= IDLE_LIMIT_MB else "OVER"
        lines.append(f"idle server, every shipped and untrained model loaded, {idle['settle_s']:.0f} s after the "
                     f"session left: {idle['rss_mb']:,.0f} MB ({verdict} {IDLE_LIMIT_MB} MB)")
    return "\n".join(lines)
