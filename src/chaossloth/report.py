"""Reports: the staged terminal output, the hazard wording, the JSON report, the Mermaid diagram.

Hazard classification (from the diagnosis of the minimal failing schedule)
-------------------------------------------------------------------------

The engine (engine/diagnose.c) reports AVIO findings: a local pair p, c of accesses by one task to
one resource with a remote access r by another task between them, where the interleaving
p-r-c is not equivalent to any serial order of the three (Lu et al., ASPLOS 2006). The hazard
named to the user is, in this order of precedence:

==================  ===================================================================
``deadlock``        the execution ended with tasks waiting on each other (wait-for cycle)
``livelock``        the execution never ended within the step budget, though the
                    default order terminates
``cancellation``    the failure is a ``CancelledError``/``TimeoutError``, or the failing
                    schedule needed a cancellation or timeout inside the window
``lost-update``     R-W-W: the task read, another task wrote, the task wrote a value
                    computed from its stale read (the other write is lost)
``check-then-act``  R-W-R: the task checked, another task changed it, the task read it
                    again (non-repeatable read); also R-W-W when the local read is the
                    test of an ``if``/``while``/``assert`` (the act was decided on a
                    stale check: double initialisation, cache stampede)
``dirty-read``      W-R-W: another task read an intermediate value between two writes
``order-violation`` W-W-R: the task wrote, another task overwrote it, the task read back
                    a value it did not write; also the engine's order-violation findings
``exception``       a task raised and no access pattern explains it
==================  ===================================================================
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from chaossloth.capture.importer import INSTRUMENTED_FILES
from chaossloth.errors import InputError

HAZARDS = (
    "lost-update",
    "check-then-act",
    "dirty-read",
    "order-violation",
    "deadlock",
    "lost-wakeup",
    "cancellation",
    "livelock",
    "exception",
)

PATTERN_HAZARD = {
    "R-W-W": "lost-update",
    "R-W-R": "check-then-act",
    "W-R-W": "dirty-read",
    "W-W-R": "order-violation",
}

HAZARD_TITLE = {
    "lost-update": "lost update",
    "check-then-act": "check-then-act race",
    "dirty-read": "dirty read",
    "order-violation": "order violation",
    "deadlock": "deadlock",
    "lost-wakeup": "lost wake-up",
    "cancellation": "cancellation race",
    "livelock": "livelock",
    "exception": "exception",
}

_CONDITION = re.compile(r"^\s*(if|elif|while|assert)\b")

# ------------------------------------------------------------------ stages

_TITLE_WIDTH = 52


@dataclass
class StageTime:
    """A stage that ran: its name, its wall time, and, when it re-ran another stage, which one
    (``reran``) and why (``note``)."""

    name: str
    seconds: float
    reran: str | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "seconds": round(self.seconds, 6)}
        if self.reran is not None:
            d["reran"] = self.reran
        if self.note is not None:
            d["note"] = self.note
        return d


class StagePrinter:
    """Prints "[i/n] Title ..... 0.41s" as each stage ends, then its detail lines.  `stages`:
    the (name, title) of every stage, in order."""

    def __init__(self, out: TextIO | None, stages: Sequence[tuple[str, str]]) -> None:
        self.out = out
        self.stages = list(stages)
        self.times: list[StageTime] = []
        self._details: list[str] = []
        self._rerun: tuple[str, str] | None = None

    def say(self, line: str) -> None:
        self._details.append(line)

    def rerun(self, stage: str, note: str) -> None:
        """The running stage runs `stage` again, for the reason `note` (said in the output
        and kept in the stage's JSON entry)."""
        self._rerun = (stage, note)
        index = self._index(stage)
        self.say(f"re-running stage {index + 1} ({stage}): {note}")

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        index = self._index(name)
        self._details = []
        self._rerun = None
        t0 = time.perf_counter()
        try:
            yield
        except BaseException:
            self._details = []
            self._emit(index, "stopped")
            raise
        secs = time.perf_counter() - t0
        reran, note = self._rerun if self._rerun is not None else (None, None)
        self.times.append(StageTime(name, secs, reran, note))
        self._emit(index, f"{secs:.2f}s")

    def skipped(self, name: str, why: str) -> None:
        index = self._index(name)
        self._details = []
        self._emit(index, why)

    def _index(self, name: str) -> int:
        return [n for n, _ in self.stages].index(name)

    def _emit(self, index: int, tail: str) -> None:
        if self.out is None:
            return
        title = self.stages[index][1]
        dots = "." * max(3, _TITLE_WIDTH - len(title))
        self.out.write(f"[{index + 1}/{len(self.stages)}] {title} {dots} {tail}\n")
        for line in self._details:
            self.out.write(f"      {line}\n")
        self.out.flush()


# ------------------------------------------------------------------ findings


@dataclass
class Site:
    file: str
    line: int
    text: str = ""

    def where(self) -> str:
        return f"{relative_path(self.file)}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


def relative_path(path: str) -> str:
    """`path` relative to the current directory, as every path in a report is written."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive
        return path


@dataclass
class Finding:
    """One explanation of the failure, worded for a person."""

    pattern: str  # "R-W-W", ... "deadlock", "order", "cancellation", "livelock", "exception"
    hazard: str
    task: str = ""
    other_task: str = ""
    resource: str = ""
    local: Site | None = None  # p
    await_site: Site | None = None  # the await that let the other task in
    remote: Site | None = None  # r
    second: Site | None = None  # c
    cycle: list[dict[str, str]] = field(default_factory=list)
    text: str = ""
    #: the lines the finding names as its cause, each with its role ("first", "other",
    #: "second" for an access pattern; "early"/"late" for an order violation; "first-part",
    #: "cancelled-at", "cancel"; "waits" for each task of a deadlock; "waits"/"signal" for a
    #: lost wake-up; "raised" where a task or callback raised before a deadlock): what a fix
    #: has to look at
    lines: list[tuple[str, Site]] = field(default_factory=list)
    #: the finding explains the failure by a reordering that makes it pass (stage 5's
    #: reversal test), not only by the shape of the failing trace
    causal: bool = False

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "pattern": self.pattern,
            "hazard": self.hazard,
            "task": self.task,
            "other_task": self.other_task,
            "resource": self.resource,
            "local_access": self.local.to_json() if self.local else None,
            "await": self.await_site.to_json() if self.await_site else None,
            "remote_access": self.remote.to_json() if self.remote else None,
            "second_local_access": self.second.to_json() if self.second else None,
            "text": self.text,
            "lines": [dict(s.to_json(), role=role) for role, s in self.lines],
            "causal": self.causal,
        }
        if self.cycle:
            d["cycle"] = self.cycle
        return d


#: the engine's hazard names (cs_hazard_name) -> AVIO codes (cs_hazard_pattern)
ENGINE_NAMES = {
    "lost_update": "R-W-W",
    "stale_read": "R-W-R",
    "dirty_read": "W-R-W",
    "overwritten_read": "W-W-R",
    "order_violation": "order",
}


def is_condition(text: str) -> bool:
    """The line is the test of an if/elif/while/assert: a check."""
    return bool(_CONDITION.match(text))


def hazard_of_pattern(pattern: str, local: Site | None) -> str:
    """The hazard of one AVIO pattern (see the module docstring for the mapping)."""
    pattern = ENGINE_NAMES.get(pattern, pattern)
    p = pattern.upper().replace("_", "-")
    if p == "R-W-W" and local is not None and _CONDITION.match(local.text or ""):
        return "check-then-act"
    if p in PATTERN_HAZARD:
        return PATTERN_HAZARD[p]
    low = pattern.lower()
    if low.startswith("order"):
        return "order-violation"
    if low.startswith("deadlock"):
        return "deadlock"
    if low.startswith("cancel"):
        return "cancellation"
    return "exception"


def word_finding(f: Finding) -> str:
    """A sentence or two a person can act on, with source lines."""
    if f.hazard == "deadlock":
        if f.cycle:
            links = "; ".join(
                f"{c.get('task', '?')} waits"
                + (f" at {c['at']}" if c.get("at") else "")
                + f" for {c.get('resource', '?')}"
                + (f" held by {c['held_by']}" if c.get("held_by") else "")
                for c in f.cycle
            )
            return f"deadlock: {links}. No task can proceed."
        return "deadlock: tasks wait for each other and none can proceed."
    if f.local is None or f.remote is None:
        return f.text or HAZARD_TITLE.get(f.hazard, f.hazard)
    res = f.resource or "shared state"
    me, other = f.task or "one task", f.other_task or "another task"
    aw = f" ({f.await_site.text} at {f.await_site.where()})" if f.await_site else ""
    p, r = f.local, f.remote
    c = f.second or f.local
    pat = f.pattern.upper()
    if f.hazard == "check-then-act" and pat == "R-W-W":
        return (
            f"check-then-act on {res}: {me} checks it at {p.where()} `{p.text}`, then awaits{aw};"
            f" {other} changes it at {r.where()} `{r.text}`; {me} acts on its stale check at"
            f" {c.where()} `{c.text}`."
        )
    if f.hazard == "lost-update":
        return (
            f"lost update on {res}: {me} reads it at {p.where()} `{p.text}`, then awaits{aw};"
            f" {other} writes it at {r.where()} `{r.text}`; {me} then writes a value computed"
            f" from its stale read at {c.where()} `{c.text}`, and {other}'s update is lost."
        )
    if f.hazard == "check-then-act":
        return (
            f"check-then-act on {res}: {me} checks it at {p.where()} `{p.text}`, then awaits{aw};"
            f" {other} changes it at {r.where()} `{r.text}`; {me} reads it again at"
            f" {c.where()} `{c.text}` and no longer sees what it checked."
        )
    if f.hazard == "dirty-read":
        return (
            f"dirty read of {res}: {me} writes an intermediate value at {p.where()} `{p.text}`"
            f" and awaits{aw}; {other} reads it at {r.where()} `{r.text}` before {me} finishes"
            f" at {c.where()} `{c.text}`."
        )
    if f.hazard == "order-violation":
        return (
            f"order violation on {res}: {me} writes it at {p.where()} `{p.text}` and awaits{aw};"
            f" {other} overwrites it at {r.where()} `{r.text}`; {me} reads back at"
            f" {c.where()} `{c.text}` a value it did not write."
        )
    return f.text or f"{HAZARD_TITLE.get(f.hazard, f.hazard)} on {res}"


# ------------------------------------------------------------------ JSON


def write_text(path: str, text: str) -> None:
    """Writes a file the user asked for (see :func:`write_output`); an unwritable path is an
    InputError."""
    try:
        write_output(path, text)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the file ({exc.strerror or exc})") from None


def write_json(report: dict[str, Any], path: str) -> None:
    """Writes the JSON report to `path` (see :func:`write_output`), or to stdout for "-"; an
    unwritable path raises OSError, a protected one InputError."""
    text = json.dumps(report, indent=2, default=_json_default) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    write_output(path, text)


def write_report_file(path: str, text: str) -> str:
    """Writes a report (--sarif, --html) to `path` with :func:`write_output`'s rules, or to
    stdout for "-" (as --json); returns the file written ("-" for stdout)."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return path
    return write_output(path, text)


def check_output_path(path: str | os.PathLike[str]) -> str:
    """The file an output path writes: a symlink followed to its target.  Refuses (InputError)
    a path that is the program under test or any instrumented module (the user's files are
    never written, README) and a directory."""
    target = os.path.realpath(path)
    for f in list(INSTRUMENTED_FILES):
        if os.path.realpath(f) == target:
            raise InputError(
                f"{path}: refusing to write over {f}, a file of the program under test"
            )
    if os.path.isdir(target):
        raise InputError(f"{path}: is a directory, not a file to write")
    return target


def write_output(path: str | os.PathLike[str], text: str) -> str:
    """Writes an output file the user asked for (--json, --schedule-out, --mermaid, --diff);
    returns the file written.  A regular file (or a new one) is replaced atomically: a
    temporary file beside it, then a rename, so a reader never sees it half-written.  A symlink
    is followed and its target written; an existing special file (a FIFO, a device such as
    /dev/null) is written in place, never replaced.  The program's own files are refused
    (:func:`check_output_path`).  OSError when the file cannot be written."""
    target = check_output_path(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(target, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    # keep the permissions of the file it replaces
    replace_file(target, text, mode=stat.S_IMODE(st.st_mode) if st is not None else None)
    return target


def write_own_file(path: str | os.PathLike[str], data: str | bytes) -> str:
    """Writes a file whose path ChaosSloth chose (the default schedule file, the backup of a
    patched file, under ``.chaossloth/``): never through a symlink it did not create.  Its
    directory is made if missing and refused (OSError ELOOP) when it is a symlink; the file
    itself is replaced by a rename (:func:`replace_file`), so a symlink planted at its path is
    replaced, its target untouched.  Returns the path written."""
    target = os.path.abspath(path)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    if os.path.islink(parent):
        raise OSError(errno.ELOOP, "its directory is a symbolic link ChaosSloth did not create")
    replace_file(target, data)
    return os.fspath(path)


def replace_file(
    target: str | os.PathLike[str],
    text: str | bytes,
    *,
    mode: int | None = None,
    prefix: str = "",
) -> None:
    """Writes `text` to a temporary file in `target`'s directory (named `prefix` + a random
    part + ``.tmp``; default prefix: the target's name and a dot), then renames it over
    `target`: a reader sees the old file or the new one, never half of one, and a symlink at
    `target` is replaced, not followed.  `mode`: the new file's permissions (default 0666
    minus the umask, as a new file gets)."""
    parent = os.path.dirname(os.fspath(target))
    fd, tmp = tempfile.mkstemp(
        prefix=prefix or os.path.basename(target) + ".", suffix=".tmp", dir=parent or None
    )
    try:
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as fb:
                fb.write(text)
        else:
            # a lone surrogate of the program's that escaped printable() is written escaped
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(text)
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _json_default(x: Any) -> Any:
    if hasattr(x, "to_json"):
        return x.to_json()
    return repr(x)


# ------------------------------------------------------------------ Mermaid


@dataclass
class DiagramStep:
    """One step of the failing schedule, as the diagram shows it."""

    actor: str  # participant name of the task (or callback) that ran
    accesses: list[tuple[str, str, str]]  # (resource participant, "read"/"write", label)
    await_text: str = ""  # where the task suspended at the end of the step
    is_task: bool = True


def _mermaid_id(name: str, used: dict[str, str]) -> str:
    if name in used:
        return used[name]
    base = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or "p"
    ident = base
    k = 2
    while ident in used.values():
        ident = f"{base}_{k}"
        k += 1
    used[name] = ident
    return ident


def _mermaid_text(s: str) -> str:
    # Mermaid message text ends at a newline; ';' and '#' start comments/entities
    return s.replace("\n", " ").replace(";", ",").replace("#", "").strip()


def mermaid(steps: list[DiagramStep], *, title: str = "", highlight: Finding | None = None) -> str:
    """A Mermaid sequence diagram of a failing schedule: tasks and resources as participants."""
    used: dict[str, str] = {}
    lines = ["sequenceDiagram"]
    if title:
        lines.append(f"    title {_mermaid_text(title)}")
    tasks: list[str] = []
    resources: list[str] = []
    for s in steps:
        if s.is_task and s.actor not in tasks and (s.accesses or s.await_text):
            tasks.append(s.actor)
        for res, _, _ in s.accesses:
            if res not in resources:
                resources.append(res)
    for t in tasks:
        lines.append(f"    participant {_mermaid_id(t, used)} as {_mermaid_text(t)}")
    for r in resources:
        lines.append(f"    participant {_mermaid_id('res:' + r, used)} as {_mermaid_text(r)}")
    for s in steps:
        if s.actor not in tasks:
            continue
        a = _mermaid_id(s.actor, used)
        for res, kind, label in s.accesses:
            rid = _mermaid_id("res:" + res, used)
            arrow = "->>" if kind == "write" else "-->>"
            lines.append(f"    {a}{arrow}{rid}: {_mermaid_text(f'{kind} {label}'.strip())}")
        if s.await_text:
            text = s.await_text if s.await_text.startswith("await") else "await " + s.await_text
            lines.append(f"    Note over {a}: {_mermaid_text(text)}")
    if highlight is not None and highlight.text and tasks:
        span = _mermaid_id(tasks[0], used)
        if len(tasks) > 1:
            span += "," + _mermaid_id(tasks[-1], used)
        lines.append(f"    Note over {span}: {_mermaid_text(HAZARD_TITLE[highlight.hazard])}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ failure database


def database_line(db: dict[str, Any] | None) -> str | None:
    """Stage 3's line on the failure database's saved schedules (``Result.database``): how many
    were replayed first, failed again, were dropped; None when there was nothing to replay."""
    if db is None or not (db["replayed"] or db["dropped"]):
        return None
    parts = [f"replayed {db['replayed']} saved schedule(s) first"]
    if db["reproduced"]:
        parts.append(f"{db['reproduced']} failed again")
    if db["dropped"]:
        parts.append(f"dropped {len(db['dropped'])}")
    return f"failure database {db['dir']}: " + ", ".join(parts)


# ------------------------------------------------------------------ instrumentation scope


def timeline_lines(timeline: Sequence[dict[str, Any]], limit: int = 40) -> list[str]:
    """The failing schedule as text, one line per step that touches shared state or suspends
    at an await of the user's code (``>>`` marks the steps with the top finding's lines); runs of
    other steps (asyncio's callbacks, steps of unshared state) are folded into one line.  Beyond
    `limit` lines only the marked steps and their neighbours are kept; the fold says how many
    steps it hides, so the numbering always adds up to the schedule's length."""
    shown = [i for i, st in enumerate(timeline) if st["accesses"] or st["await"]]
    if len(shown) > limit:
        marked = {i for i in shown if any(a["highlight"] for a in timeline[i]["accesses"])}
        pos = {i: k for k, i in enumerate(shown)}
        near = (pos[i] + d for i in marked for d in (-1, 0, 1))
        keep = {shown[k] for k in near if 0 <= k < len(shown)} or set(shown[:limit])
        shown = sorted(keep)[:limit]
    out: list[str] = []
    last = 0  # steps before index `last` are printed or folded
    for i in shown:
        if i > last:
            out.append(_fold(timeline, last, i))
        out.extend(_step_line(timeline[i]).split("\n"))
        last = i + 1
    if last < len(timeline):
        out.append(_fold(timeline, last, len(timeline)))
    return out


def _fold(timeline: Sequence[dict[str, Any]], start: int, end: int) -> str:
    n = end - start
    which = f"step {start + 1}" if n == 1 else f"steps {start + 1}-{end}"
    quiet = not any(st["accesses"] or st["await"] for st in timeline[start:end])
    why = "without shared accesses" if quiet else "not shown (away from the finding's lines)"
    return f"   {which}: {n} step{'s' if n > 1 else ''} {why}"


def _step_line(st: dict[str, Any]) -> str:
    """A step: its number and task, then one indented line per source line it touched (the
    kinds of access on it: ``read``, ``write``, ``read+write``, ``acquire``) and its await."""
    by_line: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for a in st["accesses"]:
        by_line.setdefault((a["file"], a["line"]), []).append(a)
    mark = ">>" if any(a["highlight"] for a in st["accesses"]) else "  "
    out = [f"{mark} {st['step']:>3}. {st['task']}"]
    for (file, line), accs in by_line.items():
        kinds = "+".join(dict.fromkeys(a["kind"] for a in accs))
        what = ", ".join(dict.fromkeys(a["resource"] for a in accs))
        out.append(f"         {kinds} {what} at {relative_path(file)}:{line} `{accs[0]['text']}`")
    aw = st["await"]
    if aw is not None:
        out.append(f"         awaits at {relative_path(aw['file'])}:{aw['line']} `{aw['text']}`")
    return "\n".join(out)


def instrumented_line(modules: Sequence[str]) -> str:
    """The report's line naming the modules that ran instrumented."""
    if not modules:
        return "instrumented: no module"
    return f"instrumented: {len(modules)} module(s): {', '.join(modules)}"


def uninstrumented_line(modules: Sequence[str]) -> str:
    """What the report says when the failing schedule runs through code that was not
    instrumented (its accesses were not seen, so no hazard is guessed from them)."""
    names = [m for m in modules if not m.endswith(".py")]
    files = [m for m in modules if m.endswith(".py")]
    parts = []
    if names:
        which = "module" if len(names) == 1 else "modules"
        flags = " ".join(f"--instrument {n}" for n in names)
        parts.append(
            f"the failure passes through uninstrumented {which} {', '.join(names)}: add {flags}"
        )
    if files:
        parts.append(f"the failure passes through uninstrumented code in {', '.join(files)}")
    return "; ".join(parts)


def instrumentation_json(
    instrumented: Sequence[str], uninstrumented: Sequence[str]
) -> dict[str, Any]:
    """The JSON report's fields about the instrumented scope."""
    return {"instrumented": list(instrumented), "uninstrumented": list(uninstrumented)}
