"""The Lab page's controls and views: the run form, a run's live view, and what the session's finished runs say.

A run trains in a worker process (lpos.lab.runs: the server's own, or `rq worker` processes through Redis),
never in the thread that serves the page. The session keeps only its runs' ids (`st.session_state["lab_runs"]`),
so a learner can open another page and come back: the live view asks the queue again. The live view is a
fragment that reruns itself twice a second, drawing the curves and the scheme's picture in place
(lpos.ui.plotly_react); when a run finishes, its model joins the session's models (the sidebar's Model box,
as an upload does: this tab's alone) and the whole page runs once more so the sidebar offers it.

A teacher's run goes to their live class (lpos.ui.live_class.show_lab_run); the followers' Lesson shows it with
`watch`: the same live view without the Stop button, then, once it ends, what it reached (drawn once, no timer).
"""
from __future__ import annotations

import hashlib

import streamlit as st

from lpos import lab
from lpos.analysis.lab import compare_sentence, run_label, run_sentence, twins_sentence
from lpos.checkpoints import ModelRef
from lpos.figures.lab import curves_figure, lengths_figure, picture_figure
from lpos.lab.runs import RunStatus, current_caps, lab_runs
from lpos.lab.tasks import TASKS, TEXT
from lpos.lab.text import BUILT_IN, MAX_TEXT_BYTES, TextError, TextTask, read_text
from lpos.positions import HINTS, SCHEMES
from lpos.ui import live_class
from lpos.ui.export import chart
from lpos.ui.upload import MAX_UPLOADS

LIVE_SECONDS = 0.5  # how often the live view asks the queue
WINDOWS = (16, 32, 64)
TEXT_SOURCES = (BUILT_IN, "text I paste", "a file I upload")
RUNS, FINISHED = "lab_runs", "lab_finished"  # session keys: every run id; finished runs' summaries and model keys
WATCHED = "lab_watched_done"  # session key: the teacher's runs this follower saw end


def task_label(name: str) -> str:
    return TASKS[name].label if name in TASKS else "Text"


def run_form() -> lab.LabArgs | None:
    """The run's settings and the Start button; the LabArgs when Start was pressed with a usable text, else None."""
    d = lab.LabArgs()
    left, right = st.columns(2)
    task = left.selectbox("Task", lab.TASK_NAMES, key="lab_task", format_func=task_label)
    scheme = right.selectbox("Position scheme", SCHEMES, index=SCHEMES.index(d.scheme), key="lab_scheme")
    right.caption(HINTS[scheme])
    left.caption(TASKS[task].description if task in TASKS else TextTask("").description.replace(BUILT_IN, "a text"))
    if task in TASKS:
        left.code(TASKS[task].example(), language=None)
    text, source = text_choice() if task == TEXT else (None, BUILT_IN)
    a, b, c, e = st.columns(4)
    window = a.select_slider("Training window", WINDOWS, value=d.window, key="lab_window",
                             help="The longest input it trains on; it is then tested from half to four times this.")
    preset = b.selectbox("Size", list(lab.PRESETS), key="lab_preset", format_func=lambda p: p,
                         help="; ".join(f"{p.name}: {p.description}" for p in lab.PRESETS.values()))
    steps = c.number_input("Steps", 10, current_caps().max_steps, d.steps, step=100, key="lab_steps")
    seed = e.number_input("Seed", 0, 10_000, d.seed, key="lab_seed")
    if same := lab.twins(scheme, preset, window):
        apart = [p for p in lab.PRESETS if p != preset and not set(same) & set(lab.twins(scheme, p, window))]
        st.info(twins_sentence(scheme, preset, lab.PRESETS[preset].n_layer, same, apart))
    if not st.button("Start training", type="primary", key="lab_start", icon=":material/play_arrow:"):
        return None
    if task == TEXT and text is None:
        return None
    return lab.LabArgs(task=task, scheme=scheme, window=window, preset=preset, steps=int(steps), seed=int(seed),
                       text=text, text_source=source)


def text_choice() -> tuple[str | None, str]:
    """The text task's text and what to call it: the built-in story, a pasted text or an uploaded file (None, with
    a message, when what was given cannot be used)."""
    source = st.radio("Text", TEXT_SOURCES, key="lab_text_source", horizontal=True)
    try:
        if source == TEXT_SOURCES[1]:
            pasted = st.text_area("Your text", key="lab_text_paste", height=120, max_chars=MAX_TEXT_BYTES)
            return (read_text(pasted, name="the pasted text"), "your pasted text") if pasted else (None, source)
        if source == TEXT_SOURCES[2]:
            file = st.file_uploader("A UTF-8 text file, up to 1 MB", type=["txt", "md"], key="lab_text_file")
            return (read_text(file.getvalue(), name=file.name), file.name) if file else (None, source)
    except TextError as e:
        st.error(f"{e}.", icon=":material/error:")
        return None, source
    return None, BUILT_IN


def start(args: lab.LabArgs) -> None:
    run_id = lab_runs().submit(args)
    st.session_state.setdefault(RUNS, []).append(run_id)
    live_class.show_lab_run(run_id)


def pending() -> list[str]:
    """The session's runs not yet finished and kept, newest first."""
    return [run_id for run_id in st.session_state.get(RUNS, [])[::-1] if run_id not in st.session_state.get(FINISHED, {})]


def stop_button(run: RunStatus) -> None:
    if st.button("Stop", key=f"lab_stop_{run.id}", icon=":material/stop:",
                 help="Stop after the current step; the model keeps what it learned so far."):
        lab_runs().stop(run.id)


def live_view(run_id: str, *, own: bool = True) -> None:
    """One run as it stands: its place in the queue, or its progress, curves and picture drawn in place. Once the
    session's own run has finished, it joins the session's models; a watched run that ended is marked so
    (`watch` then draws it once); either way the whole page runs again."""
    run = lab_runs().status(run_id)
    if not own and (run is None or run.done):
        st.session_state.setdefault(WATCHED, set()).add(run_id)
        st.rerun(scope="app")
    if not _said_gone(run):
        return
    _heading(run)
    if own and live_class.shows_lab_run(run_id):
        st.caption("Your live class watches this run train on their Lesson page.")
    if run.state == "queued":
        st.info(f"Waiting for a worker: place {run.place} in the queue." if run.place else "Waiting for a worker.",
                icon=":material/hourglass_top:")
        if own:
            stop_button(run)
    elif run.state == "running":
        progress = run.progress
        if progress is None:
            st.progress(0.0, text="Starting a worker process…")
        else:
            st.progress(progress["step"] / progress["steps"],
                        text=f"Step {progress['step']:,} of {progress['steps']:,} · {progress['seconds']:.0f} s")
        if own:
            stop_button(run)
        if progress is not None:
            draw_progress(progress, key=run_id)
    elif run.state == "finished" and run_id not in st.session_state.get(FINISHED, {}):
        keep(run)
        st.rerun(scope="app")  # the sidebar offers the new model
    else:
        _said_ended(run)


def _said_gone(run: RunStatus | None) -> bool:
    """False, with a warning, when the server no longer knows the run."""
    if run is None:
        st.warning("This run is no longer known to the server (it restarted, or the run is over an hour old).",
                   icon=":material/warning:")
    return run is not None


def _heading(run: RunStatus) -> None:
    args = run.args
    st.markdown(f"**{args['scheme']} on {task_label(args['task'])}**, window {args['window']}, {args['preset']}, "
                f"{args['steps']:,} steps, seed {args['seed']}")


def _said_ended(run: RunStatus) -> None:
    if run.state in ("failed", "stopped"):
        st.error(f"The run {run.message}." if run.state == "stopped" else f"The run failed: {run.message}",
                 icon=":material/error:")


def watch(run_id: str) -> None:
    """A follower's view of the teacher's run: live while it waits and trains, then how far it reads."""
    with st.container(border=True, key="lab_watch"):
        st.markdown("#### Your teacher's lab run")
        if run_id in st.session_state.get(WATCHED, set()):
            _watched_result(run_id)
        else:
            _watch_live(run_id)


@st.fragment(run_every=live_class.POLL_S)
def _watch_live(run_id: str) -> None:
    live_view(run_id, own=False)


def _watched_result(run_id: str) -> None:
    run = lab_runs().status(run_id)
    if not _said_gone(run):
        return
    _heading(run)
    if run.state != "finished":
        _said_ended(run)
        return
    summary = run.summary
    figure = lengths_figure([summary], task=task_label(summary["task"]), whose="your teacher's run")
    chart(figure, name="lab-lengths", key=f"lab_watched_{run_id}")
    st.markdown(run_sentence(summary))
    if run_id not in st.session_state.get(FINISHED, {}):
        st.button("Add it to my Model box", key=f"lab_keep_{run_id}", on_click=keep, args=(run,),
                  icon=":material/add:", help="Every page can then draw it (choosing it means exploring on your own).")
    else:
        st.caption("It is in your Model box.")


def draw_progress(progress: dict, *, key: str) -> None:
    left, right = st.columns([3, 2])
    with left:
        chart(curves_figure(progress["curve"], title="Training curves on the scored tokens"), name="lab-curves",
              key=f"lab_curves_{key}")
    if progress.get("picture") is not None:
        with right:
            chart(picture_figure(progress["picture"]), name="lab-picture", key=f"lab_picture_{key}")


@st.fragment(run_every=LIVE_SECONDS)
def live() -> None:
    """Every run of the session not yet kept, as it stands. The page calls it only while there is one, so the
    timer stops with the page's next full run."""
    for run_id in pending():
        with st.container(border=True):
            live_view(run_id)


def keep(run: RunStatus) -> None:
    """A finished run's model joins the session's models (the sidebar's Model box), named by scheme, task and
    window; the oldest of the session's models goes when there are more than the upload box keeps."""
    model, meta = lab.load_bytes(run.checkpoint, name=f"{lab.LabArgs(**run.args).name}.pt")
    digest = hashlib.sha256(run.checkpoint).hexdigest()
    key = str(ModelRef.upload(f"{lab.LabArgs(**run.args).name}.pt", digest))
    uploads = st.session_state.setdefault("uploads", {})
    uploads[key] = (model, meta)
    while len(uploads) > MAX_UPLOADS:
        uploads.pop(next(iter(uploads)))
    st.session_state.setdefault(FINISHED, {})[run.id] = {"summary": run.summary, "key": key,
                                                          "checkpoint": run.checkpoint}


def finished() -> list[dict]:
    return list(st.session_state.get(FINISHED, {}).values())


def results() -> None:
    """The session's finished runs: the length chart per task, the sentences, the last run's curves, downloads."""
    done = finished()
    if not done:
        return
    last = done[-1]
    task = last["summary"]["task"]
    same = [r["summary"] for r in done if r["summary"]["task"] == task]
    st.subheader(f"How far each run reads: {task_label(task)}")
    chart(lengths_figure(same, task=task_label(task)), name="lab-lengths", key="lab_lengths")
    for summary in same:
        st.markdown(f"- {run_sentence(summary)}")
    if sentence := compare_sentence(same):
        st.markdown(sentence)
    for run in done[::-1]:
        summary = run["summary"]
        with st.expander(f"{run_label(summary)} on {task_label(summary['task'])}: use it or download it"):
            left, right = st.columns(2)
            if run["key"] in st.session_state.get("uploads", {}):
                left.button("Show it on every page", key=f"lab_use_{run['key']}", on_click=use, args=(run["key"],),
                            help="Makes it the sidebar's model: every page then draws it.")
            else:
                left.caption("No longer in the Model box (it keeps the newest few); download it to upload it again.")
            name = f"{lab.LabArgs(scheme=summary['scheme'], task=summary['task'], window=summary['window']).name}.pt"
            right.download_button("Download the model (lpos checkpoint)", run["checkpoint"], file_name=name,
                                  key=f"lab_download_{run['key']}", icon=":material/download:",
                                  help="Opens with lpos.checkpoints.load, its tokenizer and training timeline inside.")


def use(key: str) -> None:
    model, _ = st.session_state["uploads"][key]
    st.session_state["model"], st.session_state["scheme"] = key, model.config.position
