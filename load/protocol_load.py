"""Many users at once, without browsers: Streamlit's own client protocol over real websockets
against `streamlit run app.py` on a local port, so the numbers measure the server alone.

    python load/protocol_load.py --sessions 20 --seconds 60

Each session connects to /_stcore/stream as Streamlit 1.67's frontend does (subprotocols
"streamlit" plus an XSRF placeholder, protobuf BackMsg/ForwardMsg frames, its ForwardMsg cache)
and loops, like load/load_test.py, until the time is up: type a new sentence (the text
area's widget state), switch the position scheme (the selectbox's state: the option's label),
visit another page (its page_script_hash), come back. Every action is timed from sending the
BackMsg to `script_finished` and checked: no exception element, the page and query string the
action asked for, and on the Embeddings page the session's own tokens ("␣731") and, anywhere,
no other session's marker. No uploads: those go over HTTP, not this protocol. Prints the same
summary as load_test.py (and --json writes it); exits 1 on any error or leak.

    python load/protocol_load.py --classroom 30 --seconds 600

drives a class instead: 30 sessions follow the Lesson in lockstep (load/classroom.py).
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_test import OTHER_PAGES, VARIANTS, Report, main, markers  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.Element_pb2 import Element  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402
from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from lpos.pages import default_page  # noqa: E402
from lpos.positions import SCHEMES  # noqa: E402

TIMEOUT_S = 120
HOME = default_page().title
SIDEBAR_WIDGETS = ("Sentence", "Position scheme", "Model")  # labels; ids are read from each run


def sent(text: str, blob: bytes) -> bool:
    """Whether `blob` (a run's messages) holds `text` as a chart would send it: as it is (an st.plotly_chart
    figure's JSON keeps it so), and JSON-escaped (a chart updated in place: the figure is a string in its
    component's JSON data, where "␣" is "\\u2423")."""
    return any(form.encode() in blob for form in (text, json.dumps(text)[1:-1]))


@dataclass
class Run:
    """What one script run sent back: its elements, every byte of it, and where it ended."""
    elements: list[Element] = field(default_factory=list)
    sidebar: dict[str, Element] = field(default_factory=dict)  # label -> text area / selectbox
    blob: bytes = b""
    query: str | None = None  # the last page_info_changed
    pages: dict[str, str] = field(default_factory=dict)  # page name -> page_script_hash
    page_hash: str | None = None  # the page navigation says is current
    main: dict[str, tuple[Element, str]] = field(default_factory=dict)  # label -> main-area selectbox, its fragment
    uploader: Element | None = None  # the sidebar's file box (load/lecture_hall.py uploads into it)


class Session:
    def __init__(self, index: int, marker: int, all_markers: list[int], url: str, report: Report):
        self.index, self.marker, self.report = index, marker, report
        self.stream = url.replace("http://", "ws://") + "/_stcore/stream"
        self.origin = url
        self.foreign = [m for m in all_markers if m != marker]
        self.step, self.ws, self.broken = 0, None, False
        self.values: dict[str, tuple[str, str]] = {}  # widget label -> (id, value), as the frontend holds them
        self.options: dict[str, list[str]] = {}  # selectbox label -> its options' labels
        self.query, self.pages, self.page_hash = "", {}, ""
        self.cache: dict[str, list] = {}  # ForwardMsg hash -> [bytes, script run last used], as the frontend keeps
        self.runs, self.max_age = 0, 2
        self.session_id = ""  # the server's id for this session (new_session): an upload's URL names it

    def sentence(self) -> str:
        variant = VARIANTS[self.step % len(VARIANTS)]
        return f"The {variant} and the {variant} near marker {self.marker}"

    def widget_states(self) -> list[WidgetState]:
        """Every sidebar widget's current value (a selectbox's is its option's label): what the frontend sends."""
        return [WidgetState(id=wid, string_value=value) for wid, value in self.values.values()]

    def set_value(self, label: str, value: str) -> None:
        """The user's change, held as the frontend's widget manager holds it."""
        self.values[label] = (self.values[label][0], value)

    async def rerun(self, *, query: str, page_hash: str, widgets: list[WidgetState], fragment: str = "",
                    page_name: str = "") -> Run:
        """A rerun as the frontend asks for one; with `fragment`, of that fragment only; with `page_name`
        (and no hash), the page of a URL's path, as a browser opening a link asks for it."""
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string, state.page_script_hash, state.fragment_id = query, page_hash, fragment
        state.page_name = page_name
        state.widget_states.widgets.extend(widgets)
        state.cached_message_hashes.extend(self.cache)
        state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
        state.context_info.url = f"{self.origin}/?{query}"
        try:
            await self.ws.send(msg.SerializeToString())
            return await asyncio.wait_for(self.receive(), TIMEOUT_S)
        except BaseException:
            self.broken = True  # stopped mid-run, the stream is out of step: this session stops
            raise

    async def receive(self) -> Run:
        """ForwardMsgs until the script finishes (a st.rerun inside finishes early and starts again)."""
        run, chunks = Run(), []
        while True:
            data = await self.ws.recv()
            msg = ForwardMsg.FromString(data)
            kind = msg.WhichOneof("type")
            if kind == "ref_hash":  # the server trusts our cache for this delta
                if msg.ref_hash not in self.cache:
                    raise RuntimeError(f"cached ForwardMsg miss [hash={msg.ref_hash}]")
                self.cache[msg.ref_hash][1] = self.runs
                data, metadata = self.cache[msg.ref_hash][0], msg.metadata
                msg = ForwardMsg.FromString(data)
                msg.metadata.CopyFrom(metadata)  # where it goes this time
                kind = msg.WhichOneof("type")
            elif msg.metadata.cacheable:
                self.cache[msg.hash] = [data, self.runs]
            chunks.append(data)
            if kind == "new_session":
                self.max_age = msg.new_session.config.max_cached_message_age or self.max_age
                self.session_id = msg.new_session.initialize.session_id or self.session_id
            elif kind == "navigation":
                run.pages = {page.page_name: page.page_script_hash for page in msg.navigation.app_pages}
                run.page_hash = msg.navigation.page_script_hash
            elif kind == "page_info_changed":
                run.query = msg.page_info_changed.query_string
            elif kind == "page_not_found":
                raise RuntimeError(f"page not found: {msg.page_not_found.page_name!r}")
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                run.elements.append(element)
                if msg.metadata.delta_path[:1] == [1] and element.WhichOneof("type") in ("text_area", "selectbox"):
                    run.sidebar[getattr(element, element.WhichOneof("type")).label] = element
                elif msg.metadata.delta_path[:1] == [1] and element.WhichOneof("type") == "file_uploader":
                    run.uploader = element
                elif element.WhichOneof("type") == "selectbox":
                    run.main[element.selectbox.label] = (element, msg.delta.fragment_id)
            elif kind == "script_finished":
                if msg.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    raise RuntimeError("the script did not compile")
                if msg.script_finished in (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY):
                    break
        self.runs += 1  # the frontend's cache ages entries by script runs
        self.cache = {h: entry for h, entry in self.cache.items() if self.runs - entry[1] <= self.max_age}
        run.blob = b"".join(chunks)
        self.remember(run)
        return run

    def remember(self, run: Run) -> None:
        """Take in what the server set, as the frontend's widget manager and router do."""
        for label, element in run.sidebar.items():
            widget = getattr(element, element.WhichOneof("type"))
            old_id = self.values.get(label, ("", ""))[0]
            if widget.set_value:
                value = widget.value if element.WhichOneof("type") == "text_area" else widget.raw_value
            elif widget.id != old_id:
                value = widget.default if element.WhichOneof("type") == "text_area" else widget.options[widget.default]
            else:
                value = self.values[label][1]
            self.values[label] = (widget.id, value)
            if element.WhichOneof("type") == "selectbox":
                self.options[label] = list(widget.options)
        self.pages = run.pages or self.pages
        self.page_hash = run.page_hash or self.page_hash
        self.query = run.query if run.query is not None else self.query

    def check(self, run: Run, *, page: str, own: list[str] = (), query: dict[str, str] | None = None) -> None:
        """The run drew the page asked for, without an exception, with these tokens and no one else's."""
        for other in self.foreign:
            if sent(f"␣{other}", run.blob) or sent(f"marker {other}", run.blob):
                self.report.leaks.append(f"session {self.index} was sent marker {other}")
        for element in run.elements:
            if element.WhichOneof("type") == "exception":
                raise RuntimeError(f"{element.exception.type}: {element.exception.message[:300]}")
        if self.page_hash != self.pages.get(page):
            raise RuntimeError(f"on page {self.page_hash}, not {page!r}")
        missing = [token for token in own if not sent(token, run.blob)]
        if missing:
            raise RuntimeError(f"the page does not show {missing}")
        shown = dict(urllib.parse.parse_qsl(self.query))
        for key, value in (query or {}).items():
            if shown.get(key) != value:
                raise RuntimeError(f"the query string has {key}={shown.get(key)!r}, not {value!r}")
        if self.values["Sentence"][1] != self.sentence():
            raise RuntimeError(f"the sentence box holds {self.values['Sentence'][1][:80]!r}")

    async def timed(self, action: str, coroutine) -> None:
        if self.broken:
            coroutine.close()
            return
        start = time.perf_counter()
        try:
            await coroutine
            self.report.time(action, time.perf_counter() - start)
        except Exception as e:  # every failure is counted and described; the session goes on if it can
            stopped = "; session stopped" if self.broken else ""
            self.report.errors.append(f"session {self.index}, {action}: {type(e).__name__}: {str(e)[:300]}{stopped}")

    async def open(self) -> None:
        self.broken = True  # until it is connected and its widgets are known
        self.ws = await connect(self.stream, subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], origin=self.origin,
                                max_size=None, ping_interval=None, open_timeout=TIMEOUT_S)
        run = await self.rerun(query=urllib.parse.urlencode({"text": self.sentence()}), page_hash="", widgets=[])
        missing = [label for label in SIDEBAR_WIDGETS if label not in self.values]
        if missing:
            raise RuntimeError(f"no sidebar widgets {missing}")
        self.broken = False
        self.check(run, page=HOME, own=[f"␣{self.marker}"], query={"text": self.sentence()})

    async def type_sentence(self) -> None:
        self.step += 1
        variant = VARIANTS[self.step % len(VARIANTS)]
        self.set_value("Sentence", self.sentence())
        run = await self.rerun(query=self.query, page_hash=self.page_hash, widgets=self.widget_states())
        self.check(run, page=HOME, own=[f"␣{self.marker}", f"␣{variant}"], query={"text": self.sentence()})

    async def switch_scheme(self, scheme: str) -> None:
        assert scheme in self.options["Position scheme"], self.options["Position scheme"]  # the box shows bare names
        self.set_value("Position scheme", scheme)
        run = await self.rerun(query=self.query, page_hash=self.page_hash, widgets=self.widget_states())
        self.check(run, page=HOME, own=[f"␣{self.marker}"], query={"scheme": scheme})

    async def visit(self, page: str, own: list[str] = ()) -> None:
        run = await self.rerun(query="", page_hash=self.pages[page], widgets=self.widget_states())
        self.check(run, page=page, own=own, query={"text": self.sentence()})

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def run(self, deadline: float) -> None:
        turn = self.index
        while time.time() < deadline and not self.broken:
            turn += 1
            await self.timed("type", self.type_sentence())
            await self.timed("scheme", self.switch_scheme(SCHEMES[turn % len(SCHEMES)]))
            await self.timed("page", self.visit(OTHER_PAGES[turn % len(OTHER_PAGES)][0]))
            await self.timed("page", self.visit(HOME, own=[f"␣{self.marker}"]))


async def drive(url: str, sessions: int, seconds: float, report: Report) -> None:
    numbers = markers(sessions)
    users = [Session(i, numbers[i], numbers, url, report) for i in range(sessions)]
    await asyncio.gather(*[user.timed("open", user.open()) for user in users])  # all open before the clock
    deadline = time.time() + seconds
    await asyncio.gather(*[user.run(deadline) for user in users])
    await asyncio.gather(*[user.close() for user in users])


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if "--classroom" in arguments:  # `--classroom 30`: the Lesson in lockstep (load/classroom.py)
        from classroom import drive as classroom

        arguments[arguments.index("--classroom")] = "--sessions"
        sys.exit(main(arguments, drive=classroom, description="30 students follow the Lesson in lockstep"))
    sys.exit(main(drive=drive, description=__doc__.splitlines()[0]))
