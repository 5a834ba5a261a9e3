"""A class following the Lesson in lockstep, over Streamlit's own protocol (protocol_load.py's sessions):

    python load/protocol_load.py --classroom 30 --seconds 600 --json classroom.json

Every student opens the teacher's link (the Lesson, step 1, the default sentence, the shipped learned
model). Then, for each step: the teacher says "everybody open step N" and all 30 pick it in the step
box within one second (a rerun of the step's fragment, as the browser sends it); then each types a
sentence of their own in the sidebar (a full rerun). Every action is timed from the BackMsg to
`script_finished` and checked: no exception, the step's heading, the session's own tokens where the
step draws them, no other session's marker, the step and sentence in the query string. The run stops
at --seconds, whatever step it has reached. The summary has p50/p95 per step and action.
"""
from __future__ import annotations

import asyncio
import random
import urllib.parse

from load_test import VARIANTS, Report, markers
from protocol_load import HOME, SIDEBAR_WIDGETS, TIMEOUT_S, Run, Session
from websockets.asyncio.client import connect

from lpos.lesson import STEPS
from lpos.ui.selection import DEFAULT_TEXT

LESSON = "Lesson: the story of positions"
SHOWS_TOKENS = {1, 3, 7}  # steps whose figure labels the sentence's tokens
SPREAD_S = 1.0  # "within a second"


class Student(Session):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.typed = DEFAULT_TEXT  # the teacher's link, until the student types
        self.fragment = ""  # the step box's fragment

    def sentence(self) -> str:
        return self.typed

    def remember(self, run: Run) -> None:
        super().remember(run)
        if "Step" in run.main:  # the step box, held as the frontend holds it (its value: the option's label)
            element, self.fragment = run.main["Step"]
            box = element.selectbox
            old = self.values.get("Step", ("", ""))
            value = box.raw_value if box.set_value else (old[1] if box.id == old[0] else box.options[box.default])
            self.values["Step"] = (box.id, value)
            self.options["Step"] = list(box.options)

    def check_step(self, run: Run, step: int, *, own: bool) -> None:
        self.check(run, page=LESSON, own=[f"␣{self.marker}"] if own else [],
                   query={"step": str(step), "text": self.sentence()})
        heading = f"{step}. {STEPS[step - 1].title}".encode()
        if heading not in run.blob:
            raise RuntimeError(f"step {step}'s heading is not on the page")

    async def open(self) -> None:
        """The teacher's link: connect, the first run (home), then the Lesson."""
        self.broken = True  # until it is on the Lesson with its widgets known
        self.ws = await connect(self.stream, subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"], origin=self.origin,
                                max_size=None, ping_interval=None, open_timeout=TIMEOUT_S)
        link = urllib.parse.urlencode({"text": DEFAULT_TEXT, "scheme": "learned", "model": "learned"})
        run = await self.rerun(query=link, page_hash="", widgets=[])
        missing = [label for label in SIDEBAR_WIDGETS if label not in self.values]
        if missing:
            raise RuntimeError(f"no sidebar widgets {missing}")
        self.check(run, page=HOME, query={"text": DEFAULT_TEXT})
        run = await self.rerun(query=self.query, page_hash=self.pages[LESSON], widgets=self.widget_states())
        self.check_step(run, 1, own=False)
        self.broken = False

    async def go(self, step: int) -> None:
        self.set_value("Step", self.options["Step"][step - 1])
        run = await self.rerun(query=self.query, page_hash=self.page_hash, widgets=self.widget_states(),
                               fragment=self.fragment)
        self.check_step(run, step, own=step in SHOWS_TOKENS and self.typed != DEFAULT_TEXT)

    async def type_own(self, step: int) -> None:
        self.typed = f"The {VARIANTS[step % len(VARIANTS)]} and the dog near marker {self.marker}"
        self.set_value("Sentence", self.typed)
        run = await self.rerun(query=self.query, page_hash=self.page_hash, widgets=self.widget_states())
        self.check_step(run, step, own=step in SHOWS_TOKENS)


async def within_a_second(student: Student, action: str, work) -> None:
    """Start `work()` at a random moment of the next SPREAD_S seconds; only the work is timed."""
    await asyncio.sleep(random.uniform(0, SPREAD_S))
    await student.timed(action, work())


async def drive(url: str, sessions: int, seconds: float, report: Report) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    numbers = markers(sessions)
    students = [Student(i, numbers[i], numbers, url, report) for i in range(sessions)]
    await asyncio.gather(*[s.timed("open the link", s.open()) for s in students])
    for step in range(1, len(STEPS) + 1):
        if loop.time() > deadline:
            report.errors.append(f"out of time before step {step}")
            break
        if step > 1:
            await asyncio.gather(*[within_a_second(s, f"step {step:>2}: everybody opens it", lambda s=s: s.go(step))
                                   for s in students])
        await asyncio.gather(*[within_a_second(s, f"step {step:>2}: each types a sentence", lambda s=s: s.type_own(step))
                               for s in students])
    await asyncio.gather(*[s.close() for s in students])
