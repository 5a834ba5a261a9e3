"""The app where users run it: the project's own image (deploy/Dockerfile on deploy/base_image.sh's
base) in a container limited like Streamlit Community Cloud's smallest app (`docker run --cpus 1
--memory 690m`, published on 127.0.0.1 only), measured in headless Chromium
(`python -m lpos bench --cloud`).

- First page: `docker run` to the server answering its health check, and to the default page drawn
  when requested then (the page is requested once the host's network has settled as well:
  lpos.bench.docker.wait_addresses_settled; the time between is not counted).
- Each page's first visit: on that same container, after the first page, in the menu's order, each in
  a new browser session: what a visitor of an app that is already up meets (on Community Cloud one
  process serves every visitor), each page's own first cost. A fresh container per page would
  repeat the cold start the first page already measures (8 to 10 s from `docker run` to the page
  drawn, on a 2-core machine) for every page, with its removal about two and a half minutes more
  per bench; `--first-visit-only` measures a fresh server per page outside a container. A page's
  server CPU for its visit is compared with the bare page's first visit on its own server.
- A new sentence on every page: lpos.bench.measure.sentence_ratios (the median of `runs`, each page
  against the bare page measure.FLOOR_APP, measured before and after the pages). The bare page is
  served by a second container of the same image under the same limits, started before the app's
  and idle while the app is measured: the same CPU share, and its memory is not counted as the app's.
- Memory: the app container's cgroup read from the host every SAMPLE_S (lpos.bench.cgroup):
  the peak of what `docker stats` shows (usage less the inactive page cache, which the kernel takes
  back before it kills), and the kernel's high-water mark, all page cache included.
- OOM kill: `docker inspect`'s State.OOMKilled and the cgroup's oom_kill count. A container that
  dies ends the measurement: the report shows it as a miss, with what was measured before.

Images are reused by tag: the base at lpos-base:bookworm (deploy/base_image.sh's own tag), the app at
lpos:cloud-<digest of what it is built from>; both are kept for the next run, and an older
lpos:cloud-* image is removed when a new one is built. Containers are removed at the end, and the
engine stopped if the bench started it.
"""
from __future__ import annotations

import contextlib
import itertools
import secrets
import tempfile
import time
from pathlib import Path

from lpos.bench.browser import Tab, chromium, free_port, peak_memory
from lpos.bench.cgroup import Cgroup
from lpos.bench.common import COLD_START_GOAL_MS, CPU_GOAL_MS, GOAL_RATIO, MEMORY_LIMIT_MB
from lpos.bench.docker import Docker, healthy, run, source_digest, wait_for
from lpos.bench.first_visit import COLD_EXTRA_CPU_S, first_visit, seed_size_model, walk_with_upload
from lpos.bench.measure import FLOOR_APP, sentence_ratios
from lpos.pages import url_paths

CPUS = 1
LIMITS = ("--cpus", str(CPUS), "--memory", f"{MEMORY_LIMIT_MB}m")  # Community Cloud's smallest app
BASE = "lpos-base:bookworm"
APP_REPOSITORY, APP_TAG_PREFIX = "lpos", "cloud-"
SAMPLE_S = 0.1  # between two reads of the container's memory
START_TIMEOUT_S = 300  # a container's server answering its health check
PAGE_TIMEOUT_S = 300  # a first visit drawn


class Container:
    """A container of the app image under LIMITS, with what the bench's measures take from a
    lpos.bench.browser.Server: `url`, `started`, `cpu_s()` and `rss_mb()` (its memory as `docker
    stats` shows it). Started when constructed; `wait_ready()` waits for its health check."""

    def __init__(self, docker: Docker, suffix: str, *options: str, command: tuple[str, ...] = ()):
        self.docker, port = docker, free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.started = time.perf_counter()
        # no Docker health check: its Python, every 5 s inside the limits, is not the app's (Community Cloud runs none)
        self.name = docker.run_container(suffix, port, *LIMITS, "--no-healthcheck", *options, command=command)
        self.cgroup = Cgroup.of(int(docker.inspect(self.name, "{{.State.Pid}}")))
        self.cpu = self.memory = self.high_water = 0.0  # the last figures read (kept once the container is gone)

    def wait_ready(self) -> float:
        """Seconds from `docker run` to the server answering (RuntimeError if the container stopped)."""
        checks = itertools.count()  # the server asked every 0.05 s; whether the container runs, every second

        def answered() -> bool:
            if next(checks) % 20 == 19 and not self.running():
                raise RuntimeError(f"{self.name} stopped before its server answered")
            return healthy(self.url)

        wait_for(answered, timeout=START_TIMEOUT_S, what=f"{self.name} answering", every=0.05)
        return time.perf_counter() - self.started

    def running(self) -> bool:
        return self.docker.inspect(self.name, "{{.State.Running}}") == "true"

    def cpu_s(self) -> float:
        self.cpu = self.cgroup.cpu_s() or self.cpu
        return self.cpu

    def rss_mb(self) -> float:
        self.memory = self.cgroup.memory_mb() or 0.0
        return self.memory

    def high_water_mb(self) -> float:
        self.high_water = self.cgroup.high_water_mb() or self.high_water
        return self.high_water

    def outcome(self) -> dict:
        """Whether the kernel killed a process of it for memory, and whether it still runs."""
        state = self.docker.inspect(self.name, "{{.State.OOMKilled}} {{.State.Running}} {{.State.ExitCode}}").split()
        return {"oom_killed": state[0] == "true", "oom_kills": self.cgroup.oom_kills(), "running": state[1] == "true",
                "exit_code": int(state[2])}

    def log_tail(self) -> str:
        done = run(["docker", "logs", "--tail", "30", self.name], timeout=60, check=False)
        return (done.stdout + done.stderr)[-3000:]


def bare_first_visit(browser, floor: Container) -> dict:
    """The bare page's first visit on its fresh server: ms to drawn and the server CPU it cost."""
    tab = Tab(browser)
    cpu = floor.cpu_s()
    opened = tab.open(floor.url, timeout=PAGE_TIMEOUT_S)
    tab.close()
    return {"page_ms": opened["ms"], "server_cpu_s": floor.cpu_s() - cpu}


def measure_app(browser, app: Container, floor: Container, runs: int, results: dict, progress) -> None:
    """First page, each page's first visit, then a new sentence per page; into `results` as measured."""
    progress("the app's container: first page")
    results["first_page"] = {"server_ready_s": app.wait_ready()}
    visit = first_visit(browser, app, app.url, timeout=PAGE_TIMEOUT_S)
    results["first_page"] |= {"drawn_s": results["first_page"]["server_ready_s"] + visit["page_ms"] / 1000,
                              "server_cpu_s": visit["server_cpu_s"], "errors": visit["errors"]}
    paths, visits = url_paths(), results.setdefault("first_visits", {})
    for name, path in paths.items():
        if not path:  # the default page: the first page
            visits[name] = {**visit, "first_page": True}
            continue
        progress(f"first visit: {name}")
        cpu = app.cpu_s()
        visits[name] = first_visit(browser, app, f"{app.url}/{path}", timeout=PAGE_TIMEOUT_S)
        visits[name]["server_cpu_s"] -= cpu
    results["floor"], results["pages"] = sentence_ratios(browser, app, floor, paths, runs, progress=progress)


def measure(browser, docker: Docker, folder: Path, runs: int, progress) -> dict:
    """The bare page's container, then the app's, each removed at the end."""
    bare = folder / "floor"
    bare.mkdir(mode=0o755)
    (bare / "floor.py").write_text(FLOOR_APP)
    (bare / "floor.py").chmod(0o644)  # read by the image's own user
    results: dict = {"limits": {"cpus": CPUS, "memory_mb": MEMORY_LIMIT_MB}, "image": docker.app}
    progress("the bare page's container")
    floor = Container(docker, "floor", "-v", f"{bare}:/floor:ro",
                      command=("streamlit", "run", "/floor/floor.py", "--server.address=0.0.0.0", "--server.port=8501"))
    app = None
    try:
        floor.wait_ready()
        results["bare_first_visit"] = bare_first_visit(browser, floor)
        app = Container(docker, "app")
        during = ["the app's container: first page"]

        def step(message: str) -> None:
            during[0] = message
            progress(message)

        with peak_memory(app, every=SAMPLE_S, measures={"peak_mb": app.rss_mb, "high_water_mb": app.high_water_mb}) \
                as sampler:
            try:
                measure_app(browser, app, floor, runs, results, step)
            except Exception as error:
                if app.running():
                    raise
                said = str(error).partition("\n")[0][:300]  # Playwright's call log follows the first line
                results["died"] = {"during": during[0], "error": f"{type(error).__name__}: {said}",
                                   "log_tail": app.log_tail()}
            end_mb = app.rss_mb()
        results["memory"] = {"peak_mb": sampler["peak_mb"], "high_water_mb": sampler["high_water_mb"],
                             "end_mb": end_mb, "limit_mb": MEMORY_LIMIT_MB, "sampled_every_s": SAMPLE_S}
        results |= app.outcome()
    finally:
        for container in (app, floor):
            if container is not None:
                docker.remove(container.name)
    return results


def walk_in_container(browser, docker: Docker, folder: Path, progress) -> dict:
    """The memory walk's second half (lpos.bench.first_visit.walk_with_upload: every page with every shipped model,
    then the seed-size model uploaded and every page with it) in a fresh app container under LIMITS: its memory as
    docker stats counts it, and whether the kernel killed it."""
    progress("the memory walk's container: building the seed-size model (45M parameters, random weights)")
    upload = seed_size_model(folder)
    app, walked = Container(docker, "walk"), {}
    try:
        app.wait_ready()
        try:
            walk_with_upload(browser, app, upload, progress=progress, record=walked)
        except Exception as error:
            if app.running():
                raise
            said = str(error).partition("\n")[0][:300]
            walked["died"] = {"error": f"{type(error).__name__}: {said}", "log_tail": app.log_tail()}
        return walked | {"limit_mb": MEMORY_LIMIT_MB} | app.outcome()
    finally:
        docker.remove(app.name)


def prune_app_images(keep: str) -> list[str]:
    """Remove the lpos:cloud-* images other than `keep` (earlier builds of this bench); their tags."""
    tags = run(["docker", "images", APP_REPOSITORY, "--format", "{{.Repository}}:{{.Tag}}"], timeout=60).stdout.split()
    old = [tag for tag in tags if tag.startswith(f"{APP_REPOSITORY}:{APP_TAG_PREFIX}") and tag != keep]
    if old:
        run(["docker", "rmi", *old], timeout=300, check=False)
    return old


def cloud_side(*, runs: int = 5, progress=print, docker: Docker | None = None, browser=None, walk: bool = False) -> dict:
    """Every measurement, with the images built or reused by tag, in a Chromium of its own (or, given
    `docker` and `browser`, that engine and its images as they are, in that browser: the container
    tests' run); with `walk`, the memory walk in a container of its own after them (walk_in_container).
    Needs Playwright, Chromium, and root for Docker."""
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        own = docker is None
        if own:
            docker = Docker(folder=folder, name=f"lpos-bench-{secrets.token_hex(4)}", base=BASE,
                            app=f"{APP_REPOSITORY}:{APP_TAG_PREFIX}{source_digest()}", keep_images=True)
        results: dict = {"runs": runs}
        try:
            if own:
                progress(f"the Docker engine; the images {docker.base} and {docker.app} (built, or reused by tag)")
                docker.start()
                results["images"] = docker.build_images(reuse=True) | {"removed": prune_app_images(docker.app)}
            with (chromium() if browser is None else contextlib.nullcontext(browser)) as browser:
                results |= measure(browser, docker, folder, runs, progress)
                if walk:
                    results["walk"] = walk_in_container(browser, docker, folder, progress)
        finally:
            left = docker.cleanup() if own else []
        if left:
            results["left_behind"] = left
    results["seconds"] = time.perf_counter() - began
    return results


def _verdict(met: bool) -> str:
    return "within goal" if met else "MISS"


def walk_lines(walk: dict) -> list[str]:
    """The memory walk in its container: peak memory beside the limit, after each stage, and any kill."""
    killed = walk["oom_killed"] or bool(walk.get("oom_kills"))
    stages = [f"    after {stage}: {mb:,.0f} MB" for stage, mb in walk.get("rss_after_mb", {}).items()]
    if "died" in walk:
        return [f"  Memory walk: MISS, the container stopped (exit code {walk['exit_code']}, OOM kill "
                f"{str(killed).lower()}) after a peak of {walk.get('peak_rss_mb', 0):,.0f} MB: {walk['died']['error']}",
                *stages]
    return [f"  Memory walk in its own container: every page with each of the {len(walk['models'])} shipped models, then a "
            f"learner's upload ({walk['upload_mb']:,.0f} MB) on every page: peak {walk['peak_rss_mb']:,.0f} MB "
            f"(goal < {walk['limit_mb']} MB: {_verdict(walk['peak_rss_mb'] < walk['limit_mb'])}); OOM kill: "
            f"{'KILLED, MISS' if killed else 'none'}", *stages]


def report(results: dict) -> list[str]:
    """Lines for the bench table: each figure beside its goal; a dead container as a miss."""
    if not results:
        return []
    limits, lines = results["limits"], []
    images = results.get("images", {})
    built = ", ".join(f"{what} {images[key]:.0f} s" for key, what in (("base_build_s", "base built in"),
                                                                     ("app_build_s", "app built in")) if key in images)
    lines += [f"Where users run it: {results['image']} in a container limited like Community Cloud's smallest app "
              f"(--cpus {limits['cpus']} --memory {limits['memory_mb']}m), {results['runs']} run(s), medians"
              + (f"; {built}" if built else "; images reused by tag" if images else "")]
    first = results.get("first_page")
    if first and "drawn_s" in first:
        lines.append(f"  First page: docker run -> page drawn {first['drawn_s']:.1f} s, server answering after "
                     f"{first['server_ready_s']:.1f} s (goal ≤ {COLD_START_GOAL_MS / 1000:.1f} s: "
                     f"{_verdict(first['drawn_s'] * 1000 <= COLD_START_GOAL_MS)})"
                     + (f"  {first['errors']} error(s)!" if first["errors"] else ""))
    visits, bare = results.get("first_visits"), results.get("bare_first_visit")
    if visits:
        lines.append(f"  Each page's first visit on the running container, a new session each: server CPU beyond the "
                     f"bare page's {bare['server_cpu_s']:.2f} s (goal ≤ +{COLD_EXTRA_CPU_S:.1f} s)")
        for name, visit in visits.items():
            if visit.get("first_page"):
                lines.append(f"    {name:<16} the first page: drawn {visit['page_ms']:,.0f} ms after the request, "
                             f"{visit['server_cpu_s']:.1f} s CPU since docker run")
                continue
            extra = visit["server_cpu_s"] - bare["server_cpu_s"]
            lines.append(f"    {name:<16} first content {visit['first_content_ms']:>6,.0f} ms, page {visit['page_ms']:>6,.0f} ms, "
                         f"{extra:+.2f} s CPU ({_verdict(extra <= COLD_EXTRA_CPU_S)})"
                         + (f"  {visit['errors']} error(s)!" if visit["errors"] else ""))
    if results.get("pages"):
        floor = results["floor"]["sentence_ms"]["median"]
        lines.append(f"  A new sentence, page drawn, against the bare page's {floor:,.0f} ms in its own container under the "
                     f"same limits (goal ≤ {GOAL_RATIO}x; server CPU goal ≤ {CPU_GOAL_MS} ms):")
        for name, page in results["pages"].items():
            ratio, cpu = page["sentence_ratio"], page["sentence_cpu_ms"]["median"]
            lines.append(f"    {name:<16} {page['sentence_ms']['median']:>6,.0f} ms  {ratio:.2f}x ({_verdict(ratio <= GOAL_RATIO)})"
                         f"  CPU {cpu:,.0f} ms ({_verdict(cpu <= CPU_GOAL_MS)})"
                         + (f"  {page['errors']} error(s)!" if page["errors"] else ""))
    memory = results.get("memory")
    if memory:
        lines.append(f"  Peak memory {memory['peak_mb']:,.0f} MB (usage less inactive page cache, as docker stats counts "
                     f"it, sampled every {memory['sampled_every_s']} s; goal < {memory['limit_mb']} MB: "
                     f"{_verdict(memory['peak_mb'] < memory['limit_mb'])}); kernel high-water mark with page cache "
                     f"{memory['high_water_mb']:,.0f} MB; at the end {memory['end_mb']:,.0f} MB")
    if "oom_killed" in results:
        killed = results["oom_killed"] or bool(results.get("oom_kills"))
        lines.append(f"  OOM kill (goal: none): {'KILLED, MISS' if killed else 'none, within goal'} "
                     f"(docker: OOMKilled {str(results['oom_killed']).lower()}, cgroup oom_kill {results.get('oom_kills')})")
    died = results.get("died")
    if died:
        lines.append(f"  MISS: the container stopped during \"{died['during']}\" (exit code {results.get('exit_code')}): "
                     f"{died['error']}")
    walk = results.get("walk")
    if walk:
        lines += walk_lines(walk)
    lines.append(f"  ({results['seconds']:.0f} s in all)")
    return lines
