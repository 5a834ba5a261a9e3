"""A lecture hall through the proxy: the classroom (classroom.py) on several replicas behind HAProxy,
with one replica killed in the middle (deploy/hall.py starts them, all on 127.0.0.1):

    python load/lecture_hall.py --students 90 --replicas 3 --uploaders 9 --kill-step 5 --json hall.json

Every student opens the teacher's link through the proxy as a browser does (an HTTP request first:
HAProxy's sticky cookie LPOS_REPLICA and Streamlit's XSRF cookie, then the websocket with both), and
follows the Lesson in lockstep, each also typing a sentence of their own (classroom.py's checks: the
step's heading, the session's own tokens, no other session's marker, the URL). Every --uploaders'th
student uploads a small model through the proxy first, as Streamlit's frontend does: the upload URL
asked over the websocket, an HTTP PUT with the cookies and the XSRF header, a rerun with the box's
state; the model must load in that session. Before it, the same PUT sent with another replica's
cookie must be refused (400): the upload lands only on the replica serving the session.

The fault (--kill-step N): half a second into step N, one replica (app1) gets SIGKILL. Counted: the
seconds until HAProxy's health checks mark it DOWN, the actions that failed (its students'), and the
seconds until each of its students, opening their link again (the URL they last had), is back on the
same view (the same step and sentence) on another replica; then they redo the failed action and
go on in lockstep. Three new sessions opened after the replica is DOWN must land elsewhere. A failure
of a student on a living replica is an error. Each replica's peak RSS is sampled throughout.
Prints a summary (--json writes it); exits 1 on any error, leak, lost session or check that failed.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import random
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "deploy"), str(ROOT)]

import psutil  # noqa: E402
from classroom import LESSON, SPREAD_S, Student  # noqa: E402
from hall import Hall  # noqa: E402
from load_test import Report, markers, small_model_file, summary  # noqa: E402
from protocol_load import TIMEOUT_S  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402
from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from lpos.lesson import STEPS  # noqa: E402
from lpos.ui.selection import DEFAULT_TEXT  # noqa: E402

KILLED = "app1"
COOKIE = "LPOS_REPLICA"
XSRF = "_streamlit_xsrf"


REOPEN_WITHIN_S = 15.0  # a reopened link must work again within this; HAProxy marks a dead replica down in ~2 s


@dataclass
class Fault:
    killed_at: float | None = None  # time.perf_counter()
    down_after_s: float | None = None  # until HAProxy's stats said DOWN
    failed_actions: list[str] = field(default_factory=list)
    affected: set[int] = field(default_factory=set)  # students whose replica was killed
    recovered_after_s: dict[int, float] = field(default_factory=dict)  # student -> seconds from the kill
    new_sessions: list[str] = field(default_factory=list)  # replicas the sessions opened after DOWN got


class HallStudent(Student):
    def __init__(self, *args, hall_url: str, model: bytes | None, fault: Fault, uploaders: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.hall_url, self.model, self.fault = hall_url, model, fault
        self.cookies: dict[str, str] = {}
        self.upload_name = f"hall-{self.marker}.pt" if model is not None else None
        self.other_uploads = [name for name in uploaders if name != self.upload_name]
        self.uploaded: WidgetState | None = None  # the box's state, sent with every rerun as the frontend does
        self.uploader_id, self.first_replica = "", ""
        self.wrong_replica_status: int | None = None

    @property
    def replica(self) -> str:
        return self.cookies.get(COOKIE, "")

    def http(self, method: str, path: str, *, body: bytes = b"", headers: dict | None = None,
             cookies: dict | None = None) -> tuple[int, bytes]:
        """One HTTP request through the proxy with this browser's cookies; takes in what it sets."""
        jar = self.cookies if cookies is None else cookies
        host, port = urllib.parse.urlsplit(self.hall_url).netloc.split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
        try:
            connection.request(method, path, body=body, headers={
                **(headers or {}), "Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())})
            response = connection.getresponse()
            for header in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = header.partition("=")
                jar[name.strip()] = rest.split(";", 1)[0]
            return response.status, response.read()
        finally:
            connection.close()

    async def connect(self) -> None:
        """The page's HTTP requests (cookies), then the websocket with them, as a browser opens a link."""
        if self.ws is not None:
            await self.ws.close()
        for path in ("/", "/_stcore/health"):  # the page; the health probe sets the XSRF cookie
            status, _ = await asyncio.to_thread(self.http, "GET", path)
            if status != 200:
                raise RuntimeError(f"GET {path} through the proxy: {status}")
        self.ws = await connect(self.stream, subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], origin=self.origin,
                                max_size=None, ping_interval=None, open_timeout=TIMEOUT_S,
                                additional_headers={"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())})
        self.cache.clear()  # a new session: the server remembers none of our cached messages

    def widget_states(self) -> list[WidgetState]:
        return super().widget_states() + ([self.uploaded] if self.uploaded is not None else [])

    def remember(self, run) -> None:
        super().remember(run)
        if run.uploader is not None:
            self.uploader_id = run.uploader.file_uploader.id

    def check(self, run, **kwargs) -> None:
        super().check(run, **kwargs)
        for name in self.other_uploads:
            if name.encode() in run.blob:
                self.report.leaks.append(f"session {self.index} was sent the upload {name}")

    async def open(self) -> None:
        self.broken = True
        await self.connect()
        self.first_replica = self.replica
        link = urllib.parse.urlencode({"text": DEFAULT_TEXT, "scheme": "learned", "model": "learned"})
        run = await self.rerun(query=link, page_hash="", widgets=[])
        run = await self.rerun(query=self.query, page_hash=self.pages[LESSON], widgets=self.widget_states())
        self.check_step(run, 1, own=False)
        self.broken = False

    async def file_urls(self, name: str):
        """Ask the server over the websocket where to PUT a file, as the frontend does."""
        msg = BackMsg()
        request = msg.file_urls_request
        request.request_id, request.session_id = uuid.uuid4().hex, self.session_id
        request.file_names.append(name)
        await self.ws.send(msg.SerializeToString())
        while True:
            answer = ForwardMsg.FromString(await asyncio.wait_for(self.ws.recv(), TIMEOUT_S))
            if answer.WhichOneof("type") == "file_urls_response" and \
                    answer.file_urls_response.response_id == request.request_id:
                if answer.file_urls_response.error_msg:
                    raise RuntimeError(f"no upload URL: {answer.file_urls_response.error_msg}")
                return answer.file_urls_response.file_urls[0]

    def put(self, url: str, *, cookies: dict | None = None) -> int:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{self.upload_name}\"\r\n"
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + self.model + f"\r\n--{boundary}--\r\n".encode()
        jar = dict(self.cookies if cookies is None else cookies)
        status, _ = self.http("PUT", url, body=body, cookies=jar, headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}", "X-Xsrftoken": jar.get(XSRF, "")})
        return status

    async def upload(self) -> None:
        urls = await self.file_urls(self.upload_name)
        path = urllib.parse.urlsplit(urls.upload_url).path
        # the same PUT routed by another replica's cookie: that replica does not know this session
        elsewhere = {**self.cookies, COOKIE: next(f"app{i}" for i in range(1, 10) if f"app{i}" != self.replica)}
        self.wrong_replica_status = await asyncio.to_thread(self.put, path, cookies=elsewhere)
        if self.wrong_replica_status < 400:
            raise RuntimeError(f"another replica took the upload ({self.wrong_replica_status})")
        status = await asyncio.to_thread(self.put, path)
        if status != 204:
            raise RuntimeError(f"the upload through the proxy: {status}")
        state = WidgetState(id=self.uploader_id)
        info = state.file_uploader_state_value.uploaded_file_info.add()
        info.file_id, info.name, info.size = urls.file_id, self.upload_name, len(self.model)
        info.file_urls.CopyFrom(urls)
        self.uploaded = state
        run = await self.rerun(query=self.query, page_hash=self.page_hash, widgets=self.widget_states())
        if f"Loaded {self.upload_name}".encode() not in run.blob:
            raise RuntimeError("the uploaded model did not load in this session")
        self.check_step(run, 1, own=False)

    async def reopen(self) -> None:
        """Open the link again (the URL the student last had): a new session on a living replica,
        the same view. The model box is empty again (an upload lived in the killed process)."""
        self.broken, self.uploaded = True, None
        self.values, self.options = {}, {}  # a new tab holds no widget state: the server's defaults come back
        # As a person would: a reload that fails (a 502 while the proxy still routes to the replica that
        # just died, before its health checks mark it down) is tried again, each failure counted.
        deadline = time.perf_counter() + REOPEN_WITHIN_S
        while True:
            try:
                await self.connect()
                break
            except (RuntimeError, OSError) as error:
                if time.perf_counter() > deadline:
                    raise
                self.fault.failed_actions.append(f"session {self.index}, reopen the link: {error}")
                await asyncio.sleep(0.5)
        shown = dict(urllib.parse.parse_qsl(self.query))
        self.typed = shown.get("text", DEFAULT_TEXT)
        step = int(shown.get("step", "1"))
        run = await self.rerun(query=self.query, page_hash="", page_name="lesson", widgets=[])
        if self.replica == KILLED:
            raise RuntimeError("the proxy sent the reopened link to the killed replica")
        self.check_step(run, step, own=step in (1, 3, 7) and self.typed != DEFAULT_TEXT)
        self.broken = False

    async def attempt(self, action: str, work) -> None:
        """work() timed; a failure caused by the fault counts as a failed action, then the student
        reopens the link and does it again."""
        if self.broken:
            return
        await self.timed(action, work())
        if not self.broken or self.fault.killed_at is None or self.replica != KILLED:
            return
        mine = max(i for i, e in enumerate(self.report.errors) if e.startswith(f"session {self.index}, "))
        self.fault.failed_actions.append(self.report.errors.pop(mine))
        self.fault.affected.add(self.index)
        self.broken = False  # timed() skips a broken session; reopen() marks it broken until it is back
        await self.timed("reopen the link", self.reopen())
        if not self.broken:
            self.fault.recovered_after_s[self.index] = time.perf_counter() - self.fault.killed_at
            await self.timed(action, work())


class ReplicaMemory(threading.Thread):
    """Peak RSS of each replica's process tree, sampled every quarter second."""

    def __init__(self, pids: dict[str, int]):
        super().__init__(daemon=True)
        self.processes = {name: psutil.Process(pid) for name, pid in pids.items() if name != "haproxy"}
        self.peak = {name: 0 for name in self.processes}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for name, process in self.processes.items():
                try:
                    rss = sum(p.memory_info().rss for p in [process, *process.children(recursive=True)])
                    self.peak[name] = max(self.peak[name], rss)
                except psutil.Error:
                    pass
            self.done.wait(0.25)


async def watch_down(hall: Hall, fault: Fault) -> None:
    """Seconds from the kill until HAProxy's health checks mark the replica DOWN (at most 60 s)."""
    while time.perf_counter() - fault.killed_at < 60:
        if hall.status().get(KILLED, "").startswith("DOWN"):
            fault.down_after_s = time.perf_counter() - fault.killed_at
            return
        await asyncio.sleep(0.1)


async def kill_later(hall: Hall, fault: Fault, delay: float) -> None:
    await asyncio.sleep(delay)
    hall.kill(KILLED)
    fault.killed_at = time.perf_counter()
    await watch_down(hall, fault)


async def drive(hall: Hall, *, students: int, uploaders: int, steps: int, kill_step: int, seconds: float,
                report: Report, fault: Fault) -> list[HallStudent]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    numbers = markers(students + 3)
    with tempfile.TemporaryDirectory() as folder:
        model = small_model_file(Path(folder) / "small.pt")
    uploading = {i for i in range(students) if uploaders and i % max(1, students // uploaders) == 0}
    uploading = set(sorted(uploading)[:uploaders])
    names = [f"hall-{numbers[i]}.pt" for i in uploading]
    hall_students = [HallStudent(i, numbers[i], numbers[:students], hall.url, report, hall_url=hall.url,
                                 model=model if i in uploading else None, fault=fault, uploaders=names)
                     for i in range(students)]
    await asyncio.gather(*[s.timed("open the link", s.open()) for s in hall_students])
    await asyncio.gather(*[s.timed("upload a model", s.upload()) for s in hall_students if s.upload_name])

    async def spread(student: HallStudent, action: str, work) -> None:
        await asyncio.sleep(random.uniform(0, SPREAD_S))
        await student.attempt(action, work)

    killer = None
    for step in range(1, min(steps, len(STEPS)) + 1):
        if loop.time() > deadline:
            report.errors.append(f"out of time before step {step}")
            break
        if step == kill_step:
            killer = asyncio.create_task(kill_later(hall, fault, SPREAD_S / 2))
        if step > 1:
            await asyncio.gather(*[spread(s, f"step {step:>2}: everybody opens it", lambda s=s: s.go(step))
                                   for s in hall_students])
        await asyncio.gather(*[spread(s, f"step {step:>2}: each types a sentence", lambda s=s: s.type_own(step))
                               for s in hall_students])
    if killer is not None:
        await killer
        # sessions opened once the replica is DOWN: the proxy must send them elsewhere
        late = [HallStudent(students + i, numbers[students + i], numbers, hall.url, report, hall_url=hall.url,
                            model=None, fault=fault, uploaders=names) for i in range(3)]
        await asyncio.gather(*[s.timed("open the link (after the fault)", s.open()) for s in late])
        fault.new_sessions = [s.replica for s in late]
        hall_students += late
    await asyncio.gather(*[s.close() for s in hall_students])
    return hall_students


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=90)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--uploaders", type=int, default=9, help="how many students upload a model first")
    parser.add_argument("--steps", type=int, default=len(STEPS), help="the Lesson's first N steps")
    parser.add_argument("--kill-step", type=int, default=5, help="kill a replica during this step (0: no fault)")
    parser.add_argument("--seconds", type=float, default=900, help="the run stops at this time, whatever the step")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    if args.replicas < 2 and args.kill_step:
        parser.error("the fault needs at least 2 replicas")
    report, fault = Report(), Fault()
    with tempfile.TemporaryDirectory() as folder, Hall(replicas=args.replicas, port=0, folder=Path(folder)) as hall:
        secrets = {psutil.Process(pid).environ().get("STREAMLIT_SERVER_COOKIE_SECRET")
                   for name, pid in hall.pids.items() if name != "haproxy"}
        memory = ReplicaMemory(hall.pids)
        memory.start()
        start = time.time()
        try:
            people = asyncio.run(drive(hall, students=args.students, uploaders=args.uploaders, steps=args.steps,
                                       kill_step=args.kill_step, seconds=args.seconds, report=report, fault=fault))
        finally:
            memory.done.set()
            memory.join()
    result = summary(report, args.students, args.seconds, time.time() - start)
    result.pop("server_peak_rss_mb")  # one number per replica instead
    per_replica = {}
    for s in people[:args.students]:
        per_replica[s.first_replica] = per_replica.get(s.first_replica, 0) + 1
    lost = [s.index for s in people if s.broken]
    result.update({
        "replicas": args.replicas, "students_per_replica": dict(sorted(per_replica.items())),
        "replica_peak_rss_mb": {name: round(peak / 2**20) for name, peak in memory.peak.items()},
        "same_cookie_secret": len(secrets) == 1 and None not in secrets,
        "uploads": {"count": sum(1 for s in people if s.upload_name),
                    "refused_on_another_replica": [s.wrong_replica_status for s in people if s.upload_name]},
        "lost_sessions": lost,
    })
    if args.kill_step:
        result["fault"] = {
            "killed": KILLED, "students_on_it": per_replica.get(KILLED, 0),
            "down_after_s": round(fault.down_after_s, 2) if fault.down_after_s is not None else None,
            "failed_actions": len(fault.failed_actions), "affected_students": len(fault.affected),
            "recovered_students": len(fault.recovered_after_s),
            "recover_s_max": round(max(fault.recovered_after_s.values()), 2) if fault.recovered_after_s else None,
            "new_sessions_after_down": fault.new_sessions, "failed_action_messages": fault.failed_actions[:10]}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    problems = result["errors"] or result["leaks"] or lost or not result["same_cookie_secret"] or \
        any(status != 400 for status in result["uploads"]["refused_on_another_replica"])
    if args.kill_step:
        f = result["fault"]
        problems = problems or f["down_after_s"] is None or f["recovered_students"] != f["affected_students"] or \
            KILLED in f["new_sessions_after_down"]
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
