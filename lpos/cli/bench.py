"""`python -m lpos bench`: speed of training and evaluation, and the app in headless Chromium."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def sections() -> dict:
    """The sections a flag runs alone, by the flag's name (--plotly-react: plotly_react): (measure, report)."""
    from lpos.bench import cloud, floors, lab, plotly_react, slow_paths

    return {"slow_paths": (slow_paths.slow_paths_side, slow_paths.report), "cloud": (cloud.cloud_side, cloud.report),
            "plotly_react": (plotly_react.plotly_react_side, plotly_react.report),
            "floors": (floors.floors_side, floors.report), "lab": (lab.lab_side, lab.report)}


def add_commands(commands) -> None:
    bench = commands.add_parser("bench", help="speed of training and evaluation; the app measured in headless Chromium")
    bench.add_argument("--runs", type=int, default=5, help="repetitions of each browser measurement")
    bench.add_argument("--quick", action="store_true", help="a short smoke version: one run, fewer steps, one scheme's models in the walk")
    bench.add_argument("--model-only", action="store_true", help="skip the browser (no Playwright or Chromium needed)")
    bench.add_argument("--first-visit-only", action="store_true",
                       help="only the first-visit sections: a fresh server per page, and the seed-size model")
    bench.add_argument("--slow-paths", action="store_true",
                       help="only the slow paths a learner hits, each beside its goal (docs/PERFORMANCE.md)")
    bench.add_argument("--cloud", action="store_true",
                       help="only the app's own image (deploy/) in a container limited like Community Cloud's smallest "
                            "app (--cpus 1 --memory 690m): first page, each page's first visit, a new sentence per page, "
                            "peak memory, OOM kill (needs root for Docker); with --memory-walk, the walk with every shipped "
                            "model and an upload in a container of its own too")
    bench.add_argument("--plotly-react", action="store_true",
                       help="only every page's new sentence and own control, charts updated in place against "
                            "st.plotly_chart (LPOS_PLOTLY_REACT=1 and 0, one server each)")
    bench.add_argument("--floors", action="store_true",
                       help="only bare pages of the app's shapes (lines of text, charts updated in place) that compute "
                            "nothing: a new sentence on each against the bare page")
    bench.add_argument("--memory-walk", action="store_true",
                       help="only the seed-size model (45M) from a shared folder: every page on one server, peak RSS")
    bench.add_argument("--tiny-model", action="store_true",
                       help="with --memory-walk: a 2-layer model instead (a smoke test of the walk)")
    bench.add_argument("--lab", action="store_true",
                       help="only the lab: time to 95%% per scheme on copy, a new sentence with a run training, "
                            "memory while four runs queue")
    bench.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    bench.add_argument("--out", help="also write the results as JSON to this file")
    bench.set_defaults(run=run_bench)


def run_bench(args) -> int:
    from lpos import bench

    if not args.model_only:
        try:
            bench.check_browser()
        except RuntimeError as e:
            raise ValueError(f"{e} (or pass --model-only)") from None
    if args.first_visit_only and args.model_only:
        raise ValueError("--first-visit-only needs the browser: drop --model-only")
    if args.tiny_model and not args.memory_walk:
        raise ValueError("--tiny-model is the memory walk's smoke test: add --memory-walk")
    progress = lambda message: print(message, file=sys.stderr)  # noqa: E731
    for section, (measure, report) in sections().items():
        if getattr(args, section):
            walk = {"walk": True} if section == "cloud" and args.memory_walk else {}  # the walk in its own container
            measured = measure(runs=args.runs, progress=progress, **walk)
            results = {"machine": bench.machine(), "runs": args.runs, section: measured}
            return emit(results, args, lambda: "\n".join(report(measured)))
    if args.memory_walk:
        from lpos.bench.first_visit import memory_walk, report

        results = {"machine": bench.machine(), "first_visit": memory_walk(tiny=args.tiny_model, progress=progress)}
        return emit(results, args, lambda: "\n".join(report(results["first_visit"])))
    results = bench.run(runs=args.runs, quick=args.quick, browser=not args.model_only,
                        first_visit_only=args.first_visit_only, progress=progress)
    return emit(results, args, lambda: bench.table(results))


def emit(results: dict, args, text) -> int:
    """Write the results to --out when asked, and print them as JSON (--json) or as `text()`."""
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2) if args.json else text())
    return 0
