"""The runner: executes a scenario under a strategy, execution after execution, and judges each
execution with the oracles.

One execution = a fresh :class:`~chaossloth.loop.ControlledLoop` with the engine's explorer
attached, the recording future/task classes of ``capture.sync`` set on it, the access hooks
reset (the asyncio primitives' capture is installed once for the whole exploration phase, see
``_Driver.capturing``); the scenario runs as the root task
(actor ``main``); when it returns, the tasks it left behind are cancelled and run to completion,
as ``asyncio.run`` does.  The execution is then classified:

* ``failed``: the scenario raised; a task ended with an exception nobody retrieved (reported by
  the loop's exception handler or found when the execution ends); a task ended with an
  ``AssertionError`` (even if retrieved: assertions are the user's oracle); no step was enabled
  while the scenario still waited (deadlock); the step budget was spent (livelock); the extra
  oracle (serializability) rejected the scenario's return value;
* ``aborted``: the schedule diverged (the program is not deterministic under it: it never yields
  a bug report, and the exploration stops with :class:`~chaossloth.errors.NondeterminismError`),
  or DPOR found the rest of the execution redundant (sleep-set blocked);
* ``ok`` otherwise.

The exploration keeps only the first failure and the *minimal* failing schedule (fewest
deviations from the default order), so memory stays flat whatever the number of executions.
Step names and the actor table are built once per actor and shared by the executions' results;
under random, pct and pos the oracle's verdict of a schedule already judged is reused
(``_Driver._judge``: why that is sound).
The minimal schedule is re-run once at the end to record its full trace and await sites.
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import linecache
import math
import os
import re
import sys
import threading
import time
import traceback
import weakref
from array import array
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaossloth import _core, collector, compat, serial
from chaossloth import errors as _errors
from chaossloth.capture import escapes, importer, output, sites, sync
from chaossloth.config import DEFAULT_TIME_LIMIT, DEFAULTS, SENTINEL_MIN_EXECUTIONS, Config
from chaossloth.loop import ControlledLoop, close_suspended_asyncgens

ScenarioFactory = Callable[[], Coroutine[Any, Any, Any]]

OK = "ok"
FAILED = "failed"
ABORTED = "aborted"

_PKG_DIR = str(Path(__file__).resolve().parent)

# ------------------------------------------------------------------ results


#: the characters of a program's text that reach a terminal or a report escaped: the C0 and C1
#: controls but newline and tab (an escape sequence would rewrite the terminal), and lone
#: surrogates (no encoder writes them: the report would end half-written)
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` (an exception's message, a traceback, a task's name: the program's strings) with
    its controls and lone surrogates written as Python escapes (``\\x1b``, ``\\ud800``)."""
    if _UNPRINTABLE.search(text) is None:
        return text
    return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


@dataclass
class Failure:
    """Why an execution failed.  `kind` is one of: exception, unretrieved, assertion, deadlock,
    livelock, oracle.

    `details` holds what a kind knows beyond its message; for a deadlock, ``"blocked"``: one
    dict per task still waiting, ``{"actor": actor id or None, "name": asyncio task name,
    "task": creation-path name (when the actor is known), "site": "file:line" or None,
    "waits_for": what it waits for}`` (JSON-ready)."""

    kind: str
    type_name: str
    message: str
    traceback: str = ""
    task: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.message = printable(self.message)
        self.traceback = printable(self.traceback)
        if self.task is not None:
            self.task = printable(self.task)

    def summary(self) -> str:
        who = f" in {self.task}" if self.task else ""
        return f"{self.kind}{who}: {self.type_name}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "type": self.type_name,
            "message": self.message,
            "traceback": self.traceback,
            "task": self.task,
        }
        if self.details:
            d["details"] = self.details
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Failure:
        return cls(
            kind=str(d.get("kind", "exception")),
            type_name=str(d.get("type", "")),
            message=str(d.get("message", "")),
            traceback=str(d.get("traceback", "")),
            task=d.get("task"),
            details=dict(d.get("details") or {}),
        )


@dataclass(frozen=True)
class Step:
    """One step of a schedule: the actor id and a readable name (for people)."""

    actor: int
    name: str


@dataclass
class ExecutionResult:
    outcome: str
    failure: Failure | None = None
    steps: list[Step] = field(default_factory=list)
    #: actor table: paths[id] = (parent id | None, index); replays intern it in this order
    actor_paths: list[tuple[int | None, int]] = field(default_factory=list)
    trace: list[Any] | None = None
    #: per event: (file, line, text) of the await where the step's task suspended, or None
    await_sites: list[tuple[str, int, str] | None] | None = None
    value: Any = None
    deviations: int = 0
    index: int = 0
    strategy: str = "fifo"
    seed: int = 0
    divergence: dict[str, Any] | None = None
    #: timers still pending when the execution ended (never fired in it)
    timers_pending: int = 0
    #: an event a thread sent (call_soon_threadsafe) was delivered at an idle point although
    #: it could have come while other steps ran (loop.py, "External events")
    external_early: bool = False
    #: writes made by threads other than the loop's (ext/hooks.c note_thread): their
    #: interleavings with the loop's steps were not explored
    thread_accesses: int = 0
    #: a failing execution: what the program wrote to stdout and stderr in it (capture.output:
    #: the first KEEP characters) and how many more it wrote; None when not captured
    output: str | None = None
    output_more: int = 0
    #: a guided replay (``run_once(..., guided=True)``): its steps that did not run the actor at
    #: the schedule's cursor (engine/strategy_guided.c); 0 for every other execution
    guide_deviations: int = 0
    #: the engine's explorer that ran this execution, set by run_once(detailed=True) only: its
    #: current execution is this one, for the engine's analyses (``_core.diagnose``,
    #: ``happens_before``, ``actor_path``).  None for the executions of an exploration.
    explorer: Any = field(default=None, repr=False, compare=False)

    @property
    def failed(self) -> bool:
        return self.outcome == FAILED

    @property
    def schedule(self) -> list[int]:
        return [s.actor for s in self.steps]


@dataclass
class ExplorationResult:
    strategy: str
    seed: int
    executions: int = 0
    failing_executions: int = 0
    aborted: int = 0
    distinct_traces: int = 0
    sleep_blocked: int = 0
    complete: bool = False
    budget_hit: bool = False
    explore_seconds: float = 0.0
    max_depth: int = 0
    first_failure: ExecutionResult | None = None
    minimal_failure: ExecutionResult | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    #: why ``complete`` is False although no budget ran out, or None
    incomplete_reason: str | None = None
    #: an execution of a dependency-pruning strategy ended with relaxed timers never fired
    relaxed_timers_left: bool = False
    #: an execution placed a thread's event at an idle point only (ExecutionResult)
    external_early: bool = False
    #: an execution had writes by threads other than the loop's (ExecutionResult)
    thread_accesses: bool = False
    #: False when distinct_traces is a lower bound (--jobs: the largest worker's count)
    distinct_traces_exact: bool = True
    #: distinct_traces is an upper bound (dpor with --jobs: each process counts its own new
    #: traces, and a trace two processes ran counts twice)
    distinct_traces_upper_bound: bool = False

    @property
    def failed(self) -> bool:
        return self.minimal_failure is not None


@dataclass
class Progress:
    strategy: str
    executions: int
    failing: int
    distinct_traces: int
    elapsed: float
    max_executions: int | None
    time_limit: float | None


# ------------------------------------------------------------------ interrupts and the watchdog


class _Interrupts:
    """Who raised a KeyboardInterrupt seen by an execution: the user (SIGINT, through
    :func:`note_user_interrupt`, which the CLI's SIGINT handler calls), the watchdog (the
    execution ran past the time limit), or else the program itself (an outcome of the
    execution, never the tool's exit).  Written by the main thread, except `watchdog`."""

    user = False
    #: the watchdog interrupted the running execution (reset when an execution starts)
    watchdog = False
    #: an execution is running; `serial` counts executions, `started` is its monotonic start
    in_execution = False
    serial = 0
    started = 0.0
    #: seconds an execution may run before the watchdog interrupts it (None: never)
    limit: float | None = None
    #: the watchdog may end the process when an interrupted execution still does not return
    #: (the CLI sets it; a library caller such as the pytest plugin keeps its process)
    hard_stop = False
    #: the exploration the user's Ctrl-C stopped, until taken (take_interrupted_exploration)
    exploration: ExplorationResult | None = None
    #: the monotonic time the command's budget counts from (set_execution_limit), until the
    #: outermost run_budget takes it; None: a run counts from its own start
    origin: float | None = None
    #: the run's budget (run_budget): its seconds and the monotonic time they count from
    run_seconds: float | None = None
    run_origin = 0.0
    #: run_budget armed the watchdog (no command did); its origin is the command's
    run_armed = False
    run_from_command = False
    #: the time by which the executions running now must end, whatever their own limit (a
    #: stage's share of the run's budget: stage_deadline), its seconds and what it bounds
    deadline: float | None = None
    deadline_seconds = 0.0
    deadline_of = ""
    #: the running execution's loop, weakly (_Driver._new_loop): the watchdog reads its step
    #: counter to tell a step that never awaits from a long run of steps
    loop: weakref.ref[Any] | None = None
    #: what the watchdog saw when it interrupted (time_limit_message): the steps begun (None:
    #: no controlled loop), the seconds since that count last moved (a lower bound on how long
    #: the step in progress had run: sampled every WATCHDOG_PERIOD), the execution's seconds,
    #: and whether the stage's deadline came before the execution's own limit
    fired_steps: int | None = None
    fired_stuck = 0.0
    fired_elapsed = 0.0
    fired_by_deadline = False


def note_interrupted_exploration(result: ExplorationResult | None) -> None:
    """The user's Ctrl-C stopped the exploration `result`, set as the interrupt leaves it
    (_explore_one; parallel.explore for --jobs): its failures are the ones found so far, its
    counts only those of the phases that ended."""
    _Interrupts.exploration = result


def take_interrupted_exploration() -> ExplorationResult | None:
    """The exploration the user's Ctrl-C stopped (note_interrupted_exploration), or None when
    the interrupt stopped none; a second call returns None."""
    result, _Interrupts.exploration = _Interrupts.exploration, None
    return result


def note_user_interrupt() -> None:
    """The user pressed Ctrl-C: the KeyboardInterrupt that follows is the tool's to stop on."""
    _Interrupts.user = True


def user_interrupted() -> bool:
    """The user pressed Ctrl-C (see note_user_interrupt)."""
    return _Interrupts.user


def tool_interrupt(exc: BaseException) -> bool:
    """exc is the tool's to stop on (the user's Ctrl-C, or the watchdog's interrupt), not an
    exception of the program's: every other SystemExit or KeyboardInterrupt is an outcome of
    the run that raised it."""
    return isinstance(exc, KeyboardInterrupt) and (_Interrupts.user or _Interrupts.watchdog)


def time_limit_hit() -> bool:
    """The watchdog interrupted an execution for the time limit (since the last one began)."""
    return _Interrupts.watchdog


#: the watchdog interrupts an execution at its limit, with no grace (a budget holds to within
#: the watchdog's reaction: it wakes at the due time, and the interrupt lands at the next
#: bytecode); with hard_stop it ends the process when the execution has still not returned
#: max(WATCHDOG_MIN_GRACE, WATCHDOG_GRACE_SHARE * limit) later
WATCHDOG_MIN_GRACE = 1.0
WATCHDOG_GRACE_SHARE = 0.1
#: the longest the watchdog sleeps between two looks (seconds): also the resolution of its
#: samples of the running execution's step count
WATCHDOG_PERIOD = 0.1
#: the least time limit of one execution, and the least time capture gets from its own start:
#: a budget below it (the pytest plugin's share of a spent total, 0.05 s), or one the
#: interpreter's start-up used up on a loaded machine, still lets the program run in the
#: default order, which every later stage needs
MIN_EXECUTION_SECONDS = 1.0
#: the interrupted step "never awaits" when the step count had not moved for at least this
#: share of the execution's time; else the steps kept ending and the workload is long
STUCK_SHARE = 0.5
#: the CLI's budget counts from its process's start (the interpreter's start-up and imports
#: are part of the command's time) when that start is at most this many seconds earlier;
#: else (a process that ran other things before calling the command) from the call
PROCESS_START_SLACK = 5.0

_watchdog_thread: threading.Thread | None = None


def _process_start() -> float | None:
    """time.monotonic() at this process's start (Linux: /proc/self/stat's start time, in clock
    ticks since boot, against CLOCK_BOOTTIME), or None where that is not known."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        # the fields after the command's parenthesized name, from the 3rd: starttime is the 22nd
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        since = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    if not 0.0 <= since <= PROCESS_START_SLACK:
        return None
    return time.monotonic() - since


def set_execution_limit(seconds: float | None, *, hard_stop: bool = False) -> None:
    """The time limit for an execution that never ends (a step that loops without awaiting):
    the explorer checks its time limit between executions and the step budget bounds an
    execution's steps, but a single step that never returns is seen only by this watchdog
    thread.  An execution running longer than `seconds` (at least MIN_EXECUTION_SECONDS), or
    past the deadline of the stage running it (stage_deadline), is interrupted: the watchdog
    raises KeyboardInterrupt in the main thread (``_thread.interrupt_main``, the path SIGINT
    takes: it lands between two bytecodes of Python code, never inside the C loop's
    bookkeeping); the execution ends aborted and :func:`time_limit_hit` is true (an exploration
    stops as if its budget ran out; run_once raises InputError, time_limit_message's).  With
    `hard_stop` (the CLI, which owns its process), an execution that swallows the interrupt or
    never returns to Python ends the process after a grace (exit 2, one line), and the run's
    budget (run_budget) counts from the process's start.  None disables it."""
    global _watchdog_thread
    _Interrupts.limit = seconds
    _Interrupts.hard_stop = hard_stop
    _Interrupts.origin = None
    if seconds is not None:
        _Interrupts.origin = (_process_start() if hard_stop else None) or time.monotonic()
    if seconds is not None and _watchdog_thread is None:
        _watchdog_thread = threading.Thread(target=_watch, name="chaossloth-watchdog", daemon=True)
        _watchdog_thread.start()


@contextlib.contextmanager
def run_budget(seconds: float | None) -> Iterator[None]:
    """One run of the pipeline under the wall-time budget `seconds` (Config.time_budget();
    None: none).  It counts from the command's start (set_execution_limit's, taken by the
    outermost run: a run nested in it, stage 7's of the patched program, counts from its own
    start), else from now; the stages before the exploration end within it (stage_deadline).
    When nothing armed the watchdog (a library caller: the pytest plugin) and this is the main
    thread, the run's executions get `seconds` as their time limit, for the block only."""
    i = _Interrupts
    saved = (i.run_seconds, i.run_origin, i.run_armed, i.run_from_command)
    origin, _Interrupts.origin = _Interrupts.origin, None
    _Interrupts.run_from_command = origin is not None
    _Interrupts.run_seconds = seconds
    _Interrupts.run_origin = origin if origin is not None else time.monotonic()
    arm = (
        seconds is not None
        and _Interrupts.limit is None
        and threading.current_thread() is threading.main_thread()
    )
    if arm:
        set_execution_limit(seconds)
        _Interrupts.origin = None
        _Interrupts.run_armed = True
    try:
        yield
    finally:
        if arm:
            set_execution_limit(None)
        i.run_seconds, i.run_origin, i.run_armed, i.run_from_command = saved


def armed_by_run_budget() -> bool:
    """The running pipeline armed the watchdog itself (run_budget): a KeyboardInterrupt it
    sends is the run's to turn into an error, no command's handler is there to."""
    return _Interrupts.run_armed


def budget_deadline() -> tuple[float, float] | None:
    """(deadline, seconds) of the running pipeline's budget for the stages before the
    exploration (run_budget: its origin plus its seconds), or None without a budget."""
    seconds = _Interrupts.run_seconds
    if seconds is None:
        return None
    return _Interrupts.run_origin + seconds, seconds


def budget_origin_words() -> str:
    """Where the running pipeline's budget counts from, for messages: the command's start
    (set_execution_limit's), else the run's own (run_budget's)."""
    return "the command's start" if _Interrupts.run_from_command else "the run's start"


@contextlib.contextmanager
def stage_deadline(what: str, floor: float = 0.0) -> Iterator[tuple[float, float] | None]:
    """The executions of the block end by the run's budget_deadline(), but at least `floor`
    seconds from now (a stage that must run the program once: however long the start took),
    yielded as (deadline, the budget's seconds), or None without a budget: the watchdog
    interrupts an execution still running then, and time_limit_message names `what`
    ("capture (stage 1)") as what ran past it."""
    budget = budget_deadline()
    if budget is not None and floor > 0.0:
        budget = (max(budget[0], time.monotonic() + floor), budget[1])
    saved = (_Interrupts.deadline, _Interrupts.deadline_seconds, _Interrupts.deadline_of)
    if budget is not None:
        _Interrupts.deadline, _Interrupts.deadline_seconds = budget
        _Interrupts.deadline_of = what
    try:
        yield budget
    finally:
        _Interrupts.deadline, _Interrupts.deadline_seconds, _Interrupts.deadline_of = saved


def time_limit_message() -> str:
    """The one line of an execution the watchdog stopped: which budget it ran past (the
    execution's --time-limit, or the stage's share of the run's), and why it ran so long: a
    step that never awaits (the step count had stood still for most of the execution), or a
    long workload (its steps kept ending: the figure to raise is the time limit)."""
    i = _Interrupts
    if i.fired_by_deadline:
        head = (
            f"{i.deadline_of} ran past the time limit of {i.deadline_seconds:g}s, counted from "
            f"{budget_origin_words()},"
        )
        limit = i.deadline_seconds
    else:
        limit = max(i.limit or 0.0, MIN_EXECUTION_SECONDS)
        head = f"an execution of the program ran past the time limit of {limit:g}s"
    steps = i.fired_steps
    if steps is None:
        return (
            f"{head} and was stopped (a step that never awaits?); raise --time-limit if it "
            "needs longer"
        )
    if steps > 0 and i.fired_stuck >= STUCK_SHARE * i.fired_elapsed:
        return (
            f"{head} and was stopped: its step {steps} had run for {i.fired_stuck:.1f}s without "
            "awaiting (a loop that never awaits?); raise --time-limit if it needs longer"
        )
    return (
        f"{head} and was stopped at its step {steps:,}, its steps still awaiting one after "
        "another: the workload is long, not stuck; raise --time-limit for it to finish, or "
        "shrink it"
    )


class _Watched:
    """The context manager :func:`watched` returns (a class, not a generator: it runs around
    every execution).  Entering: the collector's isolation (collector.enter), the modules'
    reset, the module table, the watchdog's marks; leaving: the same undone in reverse."""

    __slots__ = ("table",)

    def __enter__(self) -> None:
        collector.enter()
        try:
            importer.reset_modules()
            self.table = _ModuleTable.active = _ModuleTable()
        except BaseException:
            collector.leave()
            raise
        _Interrupts.watchdog = False
        _Interrupts.loop = None
        _Interrupts.serial += 1
        _Interrupts.started = time.monotonic()
        _Interrupts.in_execution = True

    def __exit__(self, *exc: object) -> None:
        try:
            _Interrupts.in_execution = False
            _ModuleTable.active = None
            self.table.restore()
        finally:
            collector.leave()
        # the program's os._exit (or the like) decides nothing: this run of it is reported
        escapes.raise_if_called()


def watched() -> contextlib.AbstractContextManager[None]:
    """One run of the program, contained: it starts from the instrumented modules' initial
    state (importer.reset_modules), the watchdog's (set_execution_limit) time limit applies to
    it, and the sys.modules entries it replaced or removed are put back when it ends
    (_ModuleTable).  Every execution of the runner, and the stock-loop runs of stage 4.  The
    cycle collector starts each one in the same state and finalizes no earlier garbage in it
    (collector.enter/leave, what collector.isolated does)."""
    return _Watched()


def restart_watchdog() -> None:
    """In a forked process (parallel.py's workers): the watchdog thread did not survive the
    fork; start a new one if a time limit is set (the budget's origin stays the parent's)."""
    global _watchdog_thread
    _watchdog_thread = None
    origin = _Interrupts.origin
    set_execution_limit(_Interrupts.limit, hard_stop=_Interrupts.hard_stop)
    _Interrupts.origin = origin


def _loop_steps() -> int | None:
    """The running execution's step count (its loop's), or None (no controlled loop)."""
    ref = _Interrupts.loop
    loop = ref() if ref is not None else None
    if loop is None:
        return None
    try:
        return int(loop._cs_steps)
    except Exception:  # noqa: BLE001 - a loop being torn down: no sample
        return None


def _watch() -> None:
    fired_for, fired_at = -1, 0.0
    # the execution sampled, its last step count and when that count was first seen
    seen_for, seen_steps, moved_at = -1, 0, 0.0
    while True:
        limit = _Interrupts.limit
        if limit is None or not _Interrupts.in_execution:
            time.sleep(WATCHDOG_PERIOD)
            continue
        serial, started = _Interrupts.serial, _Interrupts.started
        deadline = _Interrupts.deadline
        if serial != _Interrupts.serial or not _Interrupts.in_execution:
            continue  # an execution began between the reads: its own values next time
        now = time.monotonic()
        if seen_for != serial:
            # a loop is attached with its count at 0: the first step began after `started`
            seen_for, seen_steps, moved_at = serial, 0, started
        steps = _loop_steps()
        if steps is not None and steps != seen_steps:
            seen_steps, moved_at = steps, now
        due = started + max(limit, MIN_EXECUTION_SECONDS)
        by_deadline = deadline is not None and deadline < due
        if by_deadline:
            due = deadline  # type: ignore[assignment]
        if fired_for != serial:
            if now >= due:
                fired_for, fired_at = serial, now
                _Interrupts.fired_steps = steps
                _Interrupts.fired_stuck = now - moved_at
                _Interrupts.fired_elapsed = now - started
                _Interrupts.fired_by_deadline = by_deadline
                _Interrupts.watchdog = True
                _thread.interrupt_main()
            time.sleep(max(0.001, min(WATCHDOG_PERIOD, due - time.monotonic())))
            continue
        grace = max(WATCHDOG_MIN_GRACE, WATCHDOG_GRACE_SHARE * limit)
        if now >= fired_at + grace and _Interrupts.hard_stop:
            # to the file descriptor: sys.stderr may be the program's captured output
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            message = (
                f"chaossloth: error: an execution of the program ran past the time limit of "
                f"{limit:g}s and did not stop when interrupted (a loop that never awaits, or "
                "one that catches KeyboardInterrupt)\n"
            )
            with contextlib.suppress(OSError):
                os.write(2, message.encode("utf-8", "backslashreplace"))
            os._exit(2)
        time.sleep(WATCHDOG_PERIOD)


# ------------------------------------------------------------------ shards


class _Shard:
    """This process's part of an exploration split across processes (parallel.py, ``--jobs``):
    its execution i is the whole exploration's execution ``i * count + index`` (the engine's
    sampling strategies draw that random stream: cs_config.shard_index).  `board` is shared by
    the shards: slot k holds the global index of shard k's first failing execution (or
    NO_FAILURE), slot count + k how many executions shard k has run.  A shard stops before an
    execution whose global index is above the smallest failing one: with stop_on_failure the
    failure with the smallest global index is then found whatever the timing, as one process
    would find it."""

    index = 0
    count = 1
    board: Any = None

    NO_FAILURE = 2**64 - 1

    @classmethod
    def global_index(cls, local: int) -> int:
        return local * cls.count + cls.index

    @classmethod
    def first_failure(cls) -> int:
        b = cls.board
        return min(b[k] for k in range(cls.count)) if b is not None else cls.NO_FAILURE


def set_shard(index: int, count: int, board: Any) -> None:
    """Makes this process shard `index` of `count` (parallel.py, in a worker process), `board`
    a memoryview of 2 * count unsigned 64-bit integers shared by the shards."""
    _Shard.index, _Shard.count, _Shard.board = index, count, board


# ------------------------------------------------------------------ forks


def _after_fork_in_child() -> None:
    """A process forked by the program during an execution ends at once: the tool's state (an
    exploration in progress, its output) must not run twice.  Forks are outside the model."""
    if _Interrupts.in_execution:
        os._exit(0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ------------------------------------------------------------------ the module table


class _ModuleTable:
    """The entries of ``sys.modules`` an execution replaced or removed are put back when it
    ends, so that what the program does to the interpreter's module table (``sys.modules["json"]
    = object()``) never reaches the tool's later stages nor the next execution.  Modules the
    execution imported stay (the import hook's instrumented ones among them)."""

    #: the table of the execution running now, or None
    active: _ModuleTable | None = None
    #: the last copy of ``sys.modules`` taken, and the table's version tag then: executions
    #: that find the table unchanged (most: only a first import changes it) share that copy,
    #: which nobody ever mutates
    _copy: dict[str, Any] | None = None
    _copy_version = -1
    _copy_of: dict[str, Any] | None = None

    __slots__ = ("saved", "table", "version")

    def __init__(self) -> None:
        mods = sys.modules
        version = _core.dict_version(mods)
        cls = _ModuleTable
        if cls._copy is None or version != cls._copy_version or mods is not cls._copy_of:
            cls._copy, cls._copy_version, cls._copy_of = dict(mods), version, mods
        self.saved: dict[str, Any] = cls._copy
        self.table = mods
        self.version = version

    @contextlib.contextmanager
    def tool_view(self) -> Iterator[None]:
        """The tool's own work inside an execution (formatting a failure: linecache and
        traceback import lazily) sees the saved table; the program's changes come back after."""
        mods = sys.modules
        changed = {n: mods.get(n, _ABSENT) for n, m in self.saved.items() if mods.get(n) is not m}
        for name in changed:
            mods[name] = self.saved[name]
        try:
            yield
        finally:
            for name, value in changed.items():
                if value is _ABSENT:
                    mods.pop(name, None)
                else:
                    mods[name] = value

    def restore(self) -> None:
        mods = sys.modules
        if mods is self.table and _core.dict_version(mods) == self.version:
            return  # no change of the table since the execution began (compat.c: dict versions)
        saved = self.saved
        # the common cases, checked in C: the table as it was (equal sizes: `==` compares the
        # same pairs as `<=` would, without making a tuple per entry), or modules added
        if (len(saved) == len(mods) and saved == mods) or saved.items() <= mods.items():
            return
        for name, mod in self.saved.items():
            if mods.get(name) is not mod:
                mods[name] = mod


# ------------------------------------------------------------------ the environment


def _alive(tasks: list[weakref.ref[Any]]) -> list[Any]:
    """The execution's tracked tasks still alive, in creation order.  They are tracked weakly:
    a finished task the program dropped is freed as on the stock loop; one that ended with an
    AssertionError is held by its loop (ext/loop.c, `asserted`) so that the assertion is
    reported even when the program swallowed it."""
    return [t for ref in tasks if (t := ref()) is not None]


def _task_actors(loop: Any) -> dict[int, int]:
    """id(task or future) -> its actor id, for the loop's running execution."""
    return {id(v): a for a, v in loop._cs_actors().items() if asyncio.isfuture(v)}


#: asyncio's C Future, a base of every tracked task (sync.RecordingTask): its methods, unbound,
#: observe a task without recording
_CFuture: type = sync._CFuture

_tracking_classes: dict[type, type] = {}


def _tracking_task_class(base: type) -> type:
    """A subclass of `base` (a sync.RecordingTask) whose tasks the runner tracks: RecordingTask
    appends a weak reference to every task to ``sync.tracker``, which run() sets to the
    execution's list.  The subclass adds nothing but its name, which task reprs show."""
    cls = _tracking_classes.get(base)
    if cls is None:
        cls = type(f"Tracked{base.__name__}", (base,), {})
        _tracking_classes[base] = cls
    return cls


class _Handler:
    """The loop's exception handler during one execution: records never-retrieved exceptions
    of futures and tasks, and exceptions that callbacks raised (asyncio hands both to the
    handler; a stock loop logs them); what the program hands it itself (a context without a
    handle or a future) is logged only; silent once the execution is over (tasks of aborted
    executions die later)."""

    def __init__(self) -> None:
        self.active = True
        self.unretrieved: list[tuple[Any, BaseException]] = []
        #: (the handle's callback, its exception), in the order they were raised
        self.callback_errors: list[tuple[Any, BaseException]] = []

    def __call__(self, loop: Any, context: dict[str, Any]) -> None:
        if not self.active:
            return
        exc = context.get("exception")
        fut = context.get("future") or context.get("task")
        if not isinstance(exc, BaseException) or isinstance(exc, asyncio.CancelledError):
            return
        if fut is None:
            # asyncio's own report of a callback that raised names its handle; a context the
            # program reports itself (aiojobs' failed job: loop.call_exception_handler) is a
            # log line on the stock loop, as it is here, not a failure
            handle = context.get("handle")
            if handle is not None:
                self.callback_errors.append((getattr(handle, "_callback", None), exc))
        else:
            self.unretrieved.append((fut, exc))


def _callback_name(callback: Any) -> str:
    return getattr(callback, "__qualname__", None) or type(callback).__name__


def _callback_error_failure(errors: list[tuple[Any, BaseException]]) -> Failure:
    """The failure of an execution in which a callback raised (the first one raised)."""
    callback, exc = errors[0]
    name = _callback_name(callback)
    fail = _failure_from_exc("exception", exc, f"callback {name}")
    # an AssertionError too: "assertion" is a task's failed assert, not a callback's raise
    fail.kind = "exception"
    fail.message = f"{fail.message} (raised in the callback {name}; asyncio logs it and goes on)"
    return fail


def _note_errors_before(
    failure: Failure, errors: list[tuple[str, BaseException]], what: str, key: str
) -> None:
    """A deadlock or livelock after callbacks raised, or tasks died with an exception nobody
    retrieved (`errors`: (name, exception)): the exception is likely why nothing completes what
    the tasks wait for, so the failure says who raised what where ("before it, <what>: ..."),
    lists the raise sites in details["raised_at"] and the sentences in details[key]."""
    where = []
    for name, exc in errors[:3]:
        frames = _user_frames(exc)
        at = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
        where.append(f"{name} raised {type(exc).__name__}: {exception_message(exc)}{at}")
        failure.details.setdefault("raised_at", []).extend(_raise_sites(exc))
    failure.message += f"\n  before it, {what}: " + "; ".join(where)
    if not failure.traceback:
        failure.traceback = _user_traceback(errors[0][1])
    failure.details[key] = where


def _raise_sites(exc: BaseException) -> list[str]:
    """ "path:line" where exc was raised in user or library code, then where each exception it
    was raised while handling was (a second error in an except branch hides the first: both
    explain the failure), up to three."""
    sites: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen and len(sites) < 3:
        seen.add(id(e))
        frames = _user_frames(e)
        if frames:
            sites.append(f"{frames[-1].filename}:{frames[-1].lineno}")
        e = e.__cause__ or e.__context__
    return sites


def _user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of exc's traceback that are not ChaosSloth's or asyncio's own."""
    asyncio_dir = os.path.dirname(asyncio.__file__)
    return [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(_PKG_DIR) and not f.filename.startswith(asyncio_dir)
    ]


def _user_traceback(exc: BaseException) -> str:
    """The traceback of exc without ChaosSloth's and asyncio's own frames."""
    kept = traceback.StackSummary.from_list(_user_frames(exc))
    text = "Traceback (most recent call last):\n" if kept else ""
    text += "".join(kept.format())
    text += "".join(traceback.format_exception_only(type(exc), exc))
    return text


def exception_message(exc: BaseException) -> str:
    """str(exc); for a bare ``assert`` (an AssertionError without a message), the failing
    source line of the user's code and where it is: "assert c.n == 2 (test_race.py:31)"."""
    msg = str(exc)
    if msg or not isinstance(exc, AssertionError):
        return msg
    frames = _user_frames(exc) or traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "assertion failed (no traceback to show which)"
    last = frames[-1]
    where = f"{os.path.basename(last.filename)}:{last.lineno}"
    line = (last.line or "").strip()
    return f"{line} ({where})" if line else f"assertion failed at {where}"


_ABSENT = object()


def _failure_from_exc(kind: str, exc: BaseException, task: str | None) -> Failure:
    if kind == "exception" and isinstance(exc, AssertionError):
        kind = "assertion"
    table = _ModuleTable.active
    with table.tool_view() if table is not None else contextlib.nullcontext():
        return Failure(
            kind=kind,
            type_name=type(exc).__name__,
            message=exception_message(exc),
            traceback=_user_traceback(exc),
            task=task,
        )


def _program_exit_failure(exc: BaseException, task: str | None) -> Failure:
    """A SystemExit or KeyboardInterrupt the program raised in an execution, as its failure
    ("the program called sys.exit(0)")."""
    fail = _failure_from_exc("exception", exc, task)
    if isinstance(exc, SystemExit):
        fail.message = f"the program called sys.exit({exc.code!r})"
    else:
        fail.message = f"the program raised {type(exc).__name__}" + (f": {exc}" if str(exc) else "")
    return fail


def failure_from_exception(exc: BaseException, task: str | None = None) -> Failure:
    """The Failure of an exception a workload raised (kind exception or assertion), with its
    message and its traceback in user code (for the stock-loop runs of stage 4, too)."""
    if isinstance(exc, (SystemExit, KeyboardInterrupt)):
        return _program_exit_failure(exc, task)
    return _failure_from_exc("exception", exc, task)


# ------------------------------------------------------------------ naming


class _Names:
    """Readable, schedule-independent names of actors from their creation paths."""

    def __init__(self, explorer: Any, root: str = "main") -> None:
        self.explorer = explorer
        self.root = root
        self.kinds: dict[int, str] = {}
        self.cache: dict[int, str] = {}
        self.descriptions: dict[int, str] = {}

    def path(self, actor: int) -> str:
        got = self.cache.get(actor)
        if got is not None:
            return got
        parent, index = self.explorer.actor_path(actor)
        if parent is None:
            text = self.root if index == 0 else f"{self.root}#{index}"
        else:
            text = f"{self.path(parent)}/{index}"
        self.cache[actor] = text
        return text

    def name(self, actor: int) -> str:
        kind = self.kinds.get(actor)
        p = self.path(actor)
        if kind is None:
            parent, _ = self.explorer.actor_path(actor)
            kind = "Task" if parent is None else "step"
        desc = self.descriptions.get(actor)
        return f"{kind} {p} ({desc})" if desc else f"{kind} {p}"

    def describe_from(self, loop: Any, actors: Iterable[int]) -> None:
        """Fetches readable descriptions (task coroutine / callback) of new actors."""
        if all(a in self.descriptions for a in actors):
            return
        for a, v in loop._cs_actors().items():
            if a in self.descriptions:
                continue
            if isinstance(v, str):
                # a callback's description, or what a task that is gone ran (the loop keeps
                # its coroutine's __qualname__)
                self.descriptions[a] = v
            elif self.kinds.get(a) == "Task" or asyncio.isfuture(v):
                # a task: its coroutine's name (its asyncio name "Task-N" counts tasks over
                # the whole process, so it differs between executions)
                coro = v.get_coro() if hasattr(v, "get_coro") else None
                qual = getattr(coro, "__qualname__", None)
                if qual:
                    self.descriptions[a] = str(qual)
            else:
                self.descriptions[a] = _describe_callback(v)


def _describe_callback(obj: Any) -> str:
    cb = getattr(obj, "_callback", obj)
    name = getattr(cb, "__qualname__", None) or getattr(cb, "__name__", None) or repr(cb)
    return str(name)


# ------------------------------------------------------------------ deviations


def deviations_from_trace(trace: Sequence[Any]) -> int:
    """How many steps did not run the earliest-ready pending step (FIFO inversions).

    Used when the loop does not report its choice indices: a step counts as a deviation when
    some step that ran later had been made runnable strictly earlier (by `scheduled_by`).
    """
    n = len(trace)
    ready_at = []
    for i, ev in enumerate(trace):
        by = ev.scheduled_by
        if by == _core.AFTER_ALL:
            by = i - 1
        ready_at.append(by)
    count = 0
    for i in range(n):
        for j in range(i + 1, n):
            if ready_at[j] < i and ready_at[j] < ready_at[i]:
                count += 1
                break
    return count


# ------------------------------------------------------------------ one execution


#: the engine's code of each outcome (Explorer.end)
_OUTCOME_CODES = {
    OK: _core.OUTCOME_OK,
    FAILED: _core.OUTCOME_FAILED,
    ABORTED: _core.OUTCOME_ABORTED,
}

#: the strategies whose executions may repeat a schedule, so that _Driver._judge reuses the
#: oracle's verdict of an earlier execution with the same schedule
CACHED_VERDICT_STRATEGIES = ("random", "pct", "pos")
#: the steps of the schedules whose verdict one exploration phase keeps (beyond it, verdicts
#: are not stored: the cache's memory stays bounded, a few MB)
VERDICT_CACHE_STEPS = 500_000


class _Driver:
    """Runs executions of one scenario against one explorer (step budget and timer mode from
    `config`, judged by `oracle` besides the built-in checks)."""

    def __init__(
        self,
        factory: ScenarioFactory,
        explorer: Any,
        config: Config,
        oracle: Callable[[Any], Any] | None,
    ) -> None:
        self.factory = factory
        self.explorer = explorer
        self.config = config
        self.oracle = oracle
        self.names = _Names(explorer)
        #: actor id -> its Step: a step's name depends only on the names' tables (kinds and
        #: descriptions), which change only in _learn_actors, which empties this cache then
        self._step_cache: dict[int, Step] = {}
        #: schedule -> the oracle's verdict, for the sampling strategies (see _judge); None:
        #: no cache
        self._verdicts: dict[tuple[int, ...], Failure | None] | None = (
            {} if oracle is not None and explorer.strategy in CACHED_VERDICT_STRATEGIES else None
        )
        self._verdict_steps = 0
        #: the explorer's actor table so far: interning only ever appends (an actor's path
        #: never changes), so each execution reads only the actors interned since the last
        self._paths: list[tuple[int | None, int]] = []
        #: whether a failing execution's serializability message is built: called with the
        #: execution's (deviations, steps) inside the execution (where the message must be
        #: built: serial.NotSerializable), True when the caller keeps that failure; None:
        #: always built (run_once, and explorations whose every result is handed out)
        self.keep_message: Callable[[int, int], bool] | None = None
        #: the loops' debug mode, asyncio's rule (dev mode, PYTHONASYNCIODEBUG) read once for
        #: the driver's executions rather than once per loop: every execution starts with the
        #: same value, whatever an earlier one did to os.environ
        self._debug = bool(asyncio.coroutines._is_debug_mode())

    # -- loop setup ------------------------------------------------------------------------

    def _new_loop(self) -> Any:
        loop = ControlledLoop(timers=self.config.timers, debug=self._debug)
        loop._cs_future_class = sync.RecordingFuture
        loop._cs_task_class = _tracking_task_class(sync.RecordingTask)
        loop._cs_namer = lambda actor: self._live_name(loop, actor)
        # weakly: the execution's garbage (the loop with it) is collected when it ends
        _Interrupts.loop = weakref.ref(loop)
        return loop

    def _live_name(self, loop: Any, actor: int) -> str:
        """The creation-path name of an actor of the running execution ("Task main/0
        (Worker.run)"), for the loop's messages (deadlock, divergence)."""
        self._learn_actors(loop, [actor])
        return self.names.name(actor)

    def _learn_actors(self, loop: Any, actors: Iterable[int]) -> None:
        """Tells the names what kind (task or callback) the loop's actors are, and what they
        run, so that names made mid-execution match the ones the report uses."""
        actors = list(actors)
        if all(a in self.names.kinds for a in actors):
            return
        self._step_cache.clear()
        self.names.kinds.update(loop._cs_actor_kinds)
        self.names.describe_from(loop, actors)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """The capture of asyncio's primitives (``sync.install``), installed once for every
        execution this driver runs inside the block, not once per execution: its ~70 class
        attribute sets cost more than a small execution.  Between two executions the wrappers
        stay installed; there they record nothing (no explorer attached), and the runner's
        own code between executions (oracle, callbacks) sees the primitives behave as usual
        (a wrapper calls the original and returns what it returns)."""
        with sync.installed():
            yield

    def _install(self) -> Callable[[], None]:
        """Clears the hooks' names for one execution; returns what clears them again."""
        if not sync.is_installed():  # pragma: no cover - run() is only called in capturing()
            raise RuntimeError("an execution runs with the asyncio capture installed")
        _core.hooks_reset()
        _core.hooks_thread_accesses()  # counted from this execution's start
        return _core.hooks_reset

    # -- one execution ---------------------------------------------------------------------

    def run(self, index: int, *, detailed: bool) -> ExecutionResult:
        """Runs one execution (explorer.begin() has returned True)."""
        tasks: list[weakref.ref[Any]] = []
        sync.tracker = tasks
        try:
            with watched(), output.captured() as out:
                try:
                    result = self._run(index, detailed, tasks)
                    if out is not None and result.failed:
                        result.output, result.output_more = out.text(), out.truncated
                    return result
                finally:
                    # released before watched() ends, so that the collection that ends the
                    # execution (collector.leave) finds its tasks, and through them its
                    # loop, unreachable: collected there, with the rest of the execution's
                    # garbage, not frozen into the next execution's start and left to the
                    # periodic full collection (whose cost grew with the executions between
                    # two of them)
                    sync.tracker = None
                    tasks.clear()
        finally:
            sync.tracker = None

    def _run(self, index: int, detailed: bool, tasks: list[weakref.ref[Any]]) -> ExecutionResult:
        ex = self.explorer
        loop = self._new_loop()
        handler = _Handler()
        loop.set_exception_handler(handler)
        main_task: Any = None
        value: Any = None
        failure: Failure | None = None
        aborted = False
        divergence: dict[str, Any] | None = None
        undo = self._install()
        old_loop = compat.get_set_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop._cs_attach(ex)
            coro = self.factory()
            try:
                main_task = loop.create_task(coro)
            except BaseException:
                coro.close()
                raise
            ballast = collector.settle()  # noqa: F841 - held until the execution ends
            try:
                value = loop.run_until_complete(main_task)
            except BaseException as exc:  # classified below
                failure, aborted, divergence = self._classify(exc, main_task, loop)
                if not aborted and failure is None:
                    raise
            if failure is None and not aborted:
                # asyncio.run: cancel what the scenario left behind, let it finish.
                try:
                    self._cancel_leftovers(loop, _alive(tasks))
                except BaseException as exc:
                    failure, aborted, divergence = self._classify(exc, None, loop)
                    if not aborted and failure is None:
                        raise
            if failure is None and not aborted:
                failure = self._scan_tasks(_alive(tasks), handler, loop)
            if failure is None and not aborted and handler.callback_errors:
                failure = _callback_error_failure(handler.callback_errors)
            elif failure is not None and failure.kind in ("deadlock", "livelock"):
                if handler.callback_errors:
                    _note_errors_before(
                        failure,
                        [(_callback_name(cb), exc) for cb, exc in handler.callback_errors],
                        "a callback raised (asyncio logged it and went on)",
                        "callback_errors",
                    )
                died = self._failed_tasks(_alive(tasks), handler, loop, assertions=False)
                if died:
                    _note_errors_before(
                        failure,
                        [(name, exc) for name, _kind, exc in died],
                        "a task ended with an exception nobody retrieved",
                        "task_errors",
                    )
        finally:
            try:
                loop._cs_detach()
            finally:
                handler.active = False
                close_suspended_asyncgens(loop)  # first: closing a task may free one
                self._close_leftovers(_alive(tasks))
                undo()
                asyncio.set_event_loop(old_loop)
        sched = ex.schedule()
        build: Callable[[], str] | None = None
        if failure is None and not aborted and self.oracle is not None:
            failure, build = self._judge(sched, value)
        outcome = ABORTED if aborted else (FAILED if failure is not None else OK)
        timers_pending = loop._cs_timer_count
        external_early = loop._cs_external_early
        thread_accesses = _core.hooks_thread_accesses()
        steps, paths, trace, sites, devs = self._record(loop, detailed, sched)
        if build is not None and failure is not None:
            # built here, still inside the execution (the verdict describes objects that the
            # next execution's reset may change), for a failure the caller keeps only:
            # _record reads the loop's tables and the names, nothing the program can see
            keep = self.keep_message
            if keep is None or keep(devs, len(steps)):
                failure.message = build()
        try:
            ex.end(_OUTCOME_CODES[outcome])
        except _core.DivergedError as exc:
            # replay: the program ended before the schedule was used up.
            outcome, failure, divergence = ABORTED, None, self._divergence(exc, loop)
        try:
            loop.close()
        except Exception:  # noqa: BLE001, S110 - the execution's result matters, not the close
            pass
        # the namer's closure holds the loop: without it, the loop is freed when its last
        # reference goes, no cycle left for the collector
        loop._cs_namer = None
        return ExecutionResult(
            outcome=outcome,
            failure=failure,
            steps=steps,
            actor_paths=paths,
            trace=trace,
            await_sites=sites,
            value=value if outcome != ABORTED else None,
            deviations=devs,
            index=index,
            strategy=ex.strategy,
            seed=ex.seed,
            divergence=divergence,
            timers_pending=timers_pending,
            external_early=external_early,
            thread_accesses=thread_accesses,
        )

    def _classify(
        self, exc: BaseException, main_task: Any, loop: Any
    ) -> tuple[Failure | None, bool, dict[str, Any] | None]:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            if _Interrupts.user:
                raise exc  # the user's Ctrl-C: the tool stops (exit 130)
            if _Interrupts.watchdog and isinstance(exc, KeyboardInterrupt):
                # the time limit interrupted a step: the execution says nothing
                return None, True, None
            # the program's own: an outcome of this execution, never the tool's exit
            who = self.names.name(0) if main_task is not None else None
            return _program_exit_failure(exc, who), False, None
        # ScheduleDivergedError is a NondeterminismError: test it first, for its details
        if isinstance(exc, (_errors.ScheduleDivergedError, _core.DivergedError)):
            return None, True, self._divergence(exc, loop)
        if isinstance(exc, _errors.NondeterminismError):
            return None, True, {"message": str(exc), "step": getattr(exc, "step", None)}
        if isinstance(exc, _core.BlockedError):
            return None, True, None
        if isinstance(exc, (_errors.StepBudgetExceeded, _core.BudgetError)):
            msg = str(exc) or f"no end after {self.config.max_steps} steps"
            return (
                Failure(
                    kind="livelock",
                    type_name="StepBudgetExceeded",
                    message=f"{msg} (livelock, or raise --max-steps)",
                ),
                False,
                None,
            )
        if isinstance(exc, _errors.DeadlockError):
            return (
                Failure(
                    kind="deadlock",
                    type_name="DeadlockError",
                    message=str(exc),
                    details={"blocked": self._blocked(exc, loop)},
                ),
                False,
                None,
            )
        if isinstance(exc, _core.EngineError):
            # An engine error is ChaosSloth's problem, never the program's: let it surface.
            return None, False, None
        who = self.names.name(0) if main_task is not None else None
        return _failure_from_exc("exception", exc, who), False, None

    def _blocked(self, exc: _errors.DeadlockError, loop: Any) -> list[dict[str, Any]]:
        """The deadlock's waiting tasks, with their actor ids (for the wait-for graph)."""
        actor_by_id = _task_actors(loop)
        out = []
        for k, (name, site, what) in enumerate(exc.blocked):
            task = exc.tasks[k] if k < len(exc.tasks) else None
            actor = actor_by_id.get(id(task)) if task is not None else None
            entry = {
                "actor": actor,
                "name": printable(name),
                "site": site,
                "waits_for": printable(what),
            }
            if actor is not None:
                try:
                    entry["task"] = self._live_name(loop, actor)
                except ValueError:  # an actor the table does not know: its asyncio name only
                    pass
            out.append(entry)
        return out

    def _divergence(self, exc: BaseException, loop: Any) -> dict[str, Any]:
        d = self.explorer.divergence() or {}
        info: dict[str, Any] = dict(d)
        if d.get("kind") == "changed":
            return self._changed(info, loop)
        info["message"] = str(exc)
        enabled = loop._cs_div_enabled
        if isinstance(enabled, (list, tuple)):
            info["enabled"] = list(enabled)
        for attr in ("step", "expected", "enabled", "enabled_names", "expected_name"):
            v = getattr(exc, attr, None)
            if v is not None and attr not in info:
                info[attr] = v
        exp = info.get("expected")
        en = info.get("enabled")
        listed = list(en) if isinstance(en, (list, tuple)) else []
        known = [a for a in [exp, *listed] if isinstance(a, int)]
        self._learn_actors(loop, known)
        if isinstance(exp, int):
            try:
                info["expected_name"] = self.names.name(exp)
            except ValueError:  # an actor id the table does not know: left unnamed
                pass
        if isinstance(en, (list, tuple)):
            names = []
            for a in en:
                try:
                    names.append(self.names.name(a) if isinstance(a, int) else str(a))
                except ValueError:
                    names.append(str(a))
            info["enabled_names"] = names
        return info

    def _changed(self, info: dict[str, Any], loop: Any) -> dict[str, Any]:
        """A DPOR replayed step that did not do what it did before (Explorer.divergence's
        kind "changed"): its actor named, the access that differs located."""
        actor = info.get("actor")
        if isinstance(actor, int):
            self._learn_actors(loop, [actor])
            try:
                info["actor_name"] = self.names.name(actor)
            except ValueError:  # an actor id the table does not know: left unnamed
                pass
        access = info.get("access")
        if isinstance(access, dict) and not access.get("missing") and access.get("site"):
            site = int(access["site"])
            info["access_text"] = f"{sites.resource_name(site)} at {sites.location(site)}"
        info["message"] = divergence_text(info)
        return info

    def _cancel_leftovers(self, loop: Any, tasks: list[Any]) -> None:
        # cancelled in creation order (`tasks`, the execution's tracked tasks; any other task
        # after them): all_tasks() iterates a WeakSet, whose order follows addresses, and the
        # order of the cancellations is the order their steps become ready
        if compat.registered_task_count() == len(tasks):
            # the live tracked tasks are all the registered ones, so asyncio's
            # registries hold them and nothing else: all_tasks() would find them, in any order
            done = _CFuture.done
            pending = [t for t in tasks if not done(t) and t._loop is loop]
        else:
            created = {id(t): i for i, t in enumerate(tasks)}
            pending = sorted(
                (t for t in asyncio.all_tasks(loop) if not t.done()),
                key=lambda t: created.get(id(t), len(created)),
            )
        if pending:
            for t in pending:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        # Then run every callback still ready (asyncio.run, too, runs the loop again after the
        # main task: shutdown_asyncgens).  Dropping them would make the outcome depend on
        # whether a callback ran before the main task's completion stopped the loop, an
        # ordering no explorer can see: a callback that never runs is no event, so DPOR has
        # nothing to reverse (gather's done-callback of a second failing child, which marks
        # its exception retrieved, was missed that way).  One iteration per pass, as stop()
        # before run_forever() does in asyncio.
        while loop._cs_ready_count:
            loop.stop()
            loop.run_forever()

    def _scan_tasks(self, tasks: list[Any], handler: _Handler, loop: Any) -> Failure | None:
        """Finds tasks that ended with an exception nobody retrieved, or with an assertion."""
        named = self._failed_tasks(tasks, handler, loop)
        if not named:
            return None
        name, kind, exc = named[0]
        fail = _failure_from_exc(kind, exc, name)
        if kind == "unretrieved":
            fail.message = f"{fail.message} (exception never retrieved)"
        return fail

    def _failed_tasks(
        self, tasks: list[Any], handler: _Handler, loop: Any, assertions: bool = True
    ) -> list[tuple[str, str, BaseException]]:
        """The tasks (and futures) that ended with an exception nobody retrieved, or (with
        `assertions`) with an AssertionError: (name, "unretrieved" or "assertion", exception),
        the scenario's own task first, then by name (deterministic whatever the order of
        completion).  Marks their exceptions retrieved."""
        found: list[tuple[Any, str, BaseException]] = []
        for fut, exc in handler.unretrieved:
            found.append((fut, "unretrieved", exc))
        # the tracked tasks are recording tasks and no step is open: their observations
        # would record nothing, so the C Future's own methods are called directly
        done, cancelled, exception = _CFuture.done, _CFuture.cancelled, _CFuture.exception
        for t in tasks:
            if not done(t) or cancelled(t):
                continue
            unretrieved = bool(getattr(t, "_log_traceback", False))
            exc = exception(t)  # marks it retrieved: no log when it dies
            if exc is None:
                continue
            if unretrieved:
                found.append((t, "unretrieved", exc))
            elif assertions and isinstance(exc, AssertionError):
                found.append((t, "assertion", exc))
        if not found:
            return []
        actor_by_id = _task_actors(loop)
        self._learn_actors(loop, loop._cs_actor_kinds)
        named = []
        for t, kind, exc in found:
            named.append((self._task_name(actor_by_id.get(id(t)), t), kind, exc))
        root = self.names.name(0)
        named.sort(key=lambda f: (f[0] != root, f[0]))
        return named

    def _task_name(self, actor: int | None, task: Any) -> str:
        if actor is not None:
            try:
                return self.names.name(actor)
            except ValueError:
                pass
        coro = getattr(task, "get_coro", lambda: None)()
        return f"Task {getattr(coro, '__qualname__', '?')}"

    def _close_leftovers(self, tasks: list[Any]) -> None:
        """Closes the coroutines of tasks an aborted execution left pending, now, while no
        explorer is attached: if the garbage collector closed them later, their `finally`
        blocks would run (and record accesses) in the middle of another execution."""
        done, cancelled, exception = _CFuture.done, _CFuture.cancelled, _CFuture.exception
        for t in tasks:
            try:
                if done(t):
                    if not cancelled(t) and getattr(t, "_log_traceback", False):
                        exception(t)
                    continue
                coro = t.get_coro()
                if coro is not None:
                    coro.close()
            except BaseException:  # noqa: BLE001, S110 - the user's `finally` blocks; the
                pass  # execution is over and judged already

    def _steps(self, sched: Sequence[int]) -> list[Step]:
        """The schedule's steps with their names (one Step object per actor, shared)."""
        cache = self._step_cache
        try:
            return [cache[a] for a in sched]
        except KeyError:
            pass
        name = self.names.name
        out = []
        for a in sched:
            st = cache.get(a)
            if st is None:
                st = cache[a] = Step(a, name(a))
            out.append(st)
        return out

    def _judge(
        self, sched: list[int], value: Any
    ) -> tuple[Failure | None, Callable[[], str] | None]:
        """The oracle's verdict on the execution's value; for the sampling strategies, the
        verdict of an earlier execution that ran the same schedule when there is one.  Returns
        (failure, build): when `build` is not None the failure's message is UNBUILT_MESSAGE,
        and build() returns it (_run calls it, inside the execution, for the failures that are
        kept).

        Why reusing a verdict is sound: the schedule is the whole order of the execution's
        steps under this explorer's actor table (not a summary of the captured accesses, as
        the trace fingerprint is), and the runner's premise is that a schedule determines the
        execution (a replay reproduces it; a program that does otherwise is nondeterministic,
        an input error stages 1 and 3 check).  So the same schedule returns the same value and
        the oracle, a function of that value, gives the same verdict, with the same message.
        Only the verdict is reused: every other check (exceptions, unretrieved ones, deadlock,
        the step budget) runs in every execution.  DPOR and exhaustive never repeat a schedule,
        and replay runs one, so only random, pct and pos ever hit (at K = 2 on the seed
        workload, 3,000 random executions run 40 distinct schedules).  A cached verdict whose
        message was not built gets it from the execution that first needs it: the oracle run
        again on that execution's value (the same value), the message stored with the verdict
        (built once)."""
        cache = self._verdicts
        oracle: Callable[[Any], Any] = self.oracle  # type: ignore[assignment]
        if cache is None:
            fail, verdict = _run_oracle(oracle, value, lazy=True)
            return fail, (verdict.__str__ if verdict is not None else None)
        key = tuple(sched)
        verdict = None
        if key in cache:
            known = cache[key]
        else:
            known, verdict = _run_oracle(oracle, value, lazy=True)
            if self._verdict_steps + len(key) <= VERDICT_CACHE_STEPS:
                cache[key] = known
                self._verdict_steps += len(key)
        if known is None:
            return None, None
        build: Callable[[], str] | None = None
        if known.message is UNBUILT_MESSAGE:
            stored = known

            def build() -> str:
                if verdict is not None:
                    message = str(verdict)
                else:  # a hit on a verdict stored unbuilt: judged again, this value
                    again, _ = _run_oracle(oracle, value)
                    message = again.message if again is not None else UNBUILT_MESSAGE
                stored.message = message
                return message

        # a copy with its own details (a caller may add to them); the constructor, not
        # dataclasses.replace, which looks the fields up on every call
        copy = Failure(
            known.kind,
            known.type_name,
            known.message,
            known.traceback,
            known.task,
            dict(known.details),
        )
        return copy, build

    def _record(
        self, loop: Any, detailed: bool, sched: list[int]
    ) -> tuple[list[Step], list[tuple[int | None, int]], list[Any] | None, Any, int]:
        ex = self.explorer
        actors = set(sched)
        if not actors <= self.names.kinds.keys():  # _learn_actors' own test, as one C call
            self._learn_actors(loop, actors)
        steps = self._steps(sched)
        n_actors = max(sched, default=-1) + 1
        known = self._paths
        a = len(known)
        while True:
            try:
                p = ex.actor_path(a)
            except ValueError:
                break
            known.append((p[0], p[1]))
            a += 1
        if len(known) < n_actors:  # pragma: no cover - actor_path covers every interned id
            raise RuntimeError("actor table shorter than the schedule")
        paths = list(known)
        # the loop records, per step, the index of its choice in the enabled list (0: the
        # default order's step); every other choice is a deviation
        choices = loop._cs_choices  # a list of ints: the non-zero ones counted in C
        devs = len(choices) - choices.count(0)
        if not detailed:
            return steps, paths, None, None, devs
        trace = ex.trace()
        return steps, paths, trace, _await_sites(loop, len(trace)), devs


def _await_sites(loop: Any, n: int) -> list[tuple[str, int, str] | None]:
    """Per event: (file, line, source text) of the await where its task suspended, or None."""
    out: list[tuple[str, int, str] | None] = [None] * n
    for i, s in enumerate(loop._cs_await_sites()[:n]):
        if s is not None:
            file, line = s
            out[i] = (file, line, site_text(file, line))
    return out


def site_text(file: str, line: int) -> str:
    return linecache.getline(file, line).strip()


#: the message of a serializability failure whose message was not built (an exploration's
#: failing execution that it does not keep: _Driver.keep_message)
UNBUILT_MESSAGE = "not serializable (the message is built for the failures an exploration keeps)"


def _run_oracle(
    oracle: Callable[[Any], Any], value: Any, *, lazy: bool = False
) -> tuple[Failure | None, Any]:
    """(the oracle's failure or None, unbuilt): with `lazy`, a serial.NotSerializable verdict
    gives a failure with UNBUILT_MESSAGE and the verdict as `unbuilt` (its message is built
    on demand: _Driver._run); else `unbuilt` is None."""
    try:
        verdict = oracle(value)
    except AssertionError as exc:
        return (
            Failure("oracle", "AssertionError", exception_message(exc), _user_traceback(exc)),
            None,
        )
    except _errors.InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the oracle broke on this value: a failure to report
        return Failure("oracle", type(exc).__name__, str(exc), _user_traceback(exc)), None
    if verdict is None or verdict is True:
        return None, None
    if verdict is False:
        return Failure("oracle", "OracleFailure", "the oracle rejected the final state"), None
    if lazy and isinstance(verdict, serial.NotSerializable):
        return Failure("oracle", "NotSerializable", UNBUILT_MESSAGE), verdict
    return Failure("oracle", "NotSerializable", str(verdict)), None


# ------------------------------------------------------------------ nondeterminism


def divergence_text(d: dict[str, Any], n_steps: int | None = None) -> str:
    """One sentence: at which step a schedule diverged and what differed."""
    if d.get("kind") == "changed":
        return _changed_text(d)
    if "expected" not in d and "expected_name" not in d and d.get("message"):
        return str(d["message"])
    step = d.get("step", "?")
    expected = d.get("expected")
    expected_name = d.get("expected_name") or (
        f"actor {expected}" if expected is not None else None
    )
    enabled = d.get("enabled_names") or d.get("enabled")
    of = f" of {n_steps}" if n_steps is not None else ""
    if expected is None and d.get("expected_name") is None:
        return (
            f"at step {step}{of} the program still had steps to run "
            f"({_enabled_text(enabled)}) but the schedule had ended"
        )
    if enabled == 0 or enabled == []:
        return (
            f"at step {step}{of} the program ended (nothing was enabled) but the schedule "
            f"still expected {expected_name} to run"
        )
    return (
        f"at step {step}{of} the schedule expects {expected_name} to run, but it is not "
        f"enabled ({_enabled_text(enabled)})"
    )


def _changed_text(d: dict[str, Any]) -> str:
    actor = d.get("actor_name") or f"actor {d.get('actor', '?')}"
    access = d.get("access")
    if d.get("access_text"):
        what = f"made an access it had not made then ({d['access_text']})"
    elif isinstance(access, dict) and access.get("missing"):
        what = "did not make an access it had made then"
    elif isinstance(access, dict):
        what = "made an access it had not made then"
    else:
        what = (
            "started other work (another coroutine or callback, or other arguments) or was "
            "made runnable by another step"
        )
    return (
        f"at step {d.get('step', '?')}, {actor} ran after the same steps as in an earlier "
        f"execution but {what}"
    )


def _enabled_text(enabled: Any) -> str:
    if isinstance(enabled, int):
        return f"{enabled} other step(s) were enabled"
    if enabled:
        return "enabled were: " + ", ".join(map(str, enabled))
    return "nothing was enabled"


NONDETERMINISM_HINT = (
    "The program does not behave the same under the same schedule: it depends on something "
    "ChaosSloth does not control (wall-clock time, unseeded random, I/O, threads, or the "
    "set/dict order of hashed strings)."
)


def _nondeterminism(result: ExecutionResult, what: str) -> BaseException:
    d = result.divergence or {}
    msg = f"{what} diverged: {divergence_text(d).rstrip('.')}. {NONDETERMINISM_HINT}"
    err: _errors.NondeterminismError
    if "expected" in d or "enabled" in d:  # a prescribed step was not enabled (or missing)
        enabled = d.get("enabled")
        err = _errors.ScheduleDivergedError(
            msg,
            step=d.get("step"),
            expected=d.get("expected"),
            enabled=list(enabled) if isinstance(enabled, (list, tuple)) else None,
        )
    else:  # the program did something uncontrolled (another thread's callback, ...)
        err = _errors.NondeterminismError(msg)
    err.divergence = d  # type: ignore[attr-defined]
    err.result = result  # type: ignore[attr-defined]
    return err


# ------------------------------------------------------------------ public API


def run_once(
    factory: ScenarioFactory,
    *,
    schedule: Sequence[int] | None = None,
    actor_paths: Sequence[tuple[int | None, int]] | None = None,
    strategy: str = "fifo",
    oracle: Callable[[Any], Any] | None = None,
    detailed: bool = True,
    raise_on_divergence: bool = True,
    guided: bool = False,
    config: Config | None = None,
    **options: Any,
) -> ExecutionResult:
    """Runs one execution.  With `schedule`, replays it (strategy "replay"); `actor_paths`
    (the recorded actor table) makes its actor ids mean the same creation paths here.
    `strategy` is the engine strategy that picks this one execution's steps (default fifo:
    stock asyncio's order).  `config` (default: :data:`config.DEFAULTS`) with `options` (its
    field names: ``max_steps=``, ``timers=``, ``seed=``) gives the step budget, timer mode and
    seed.

    With `guided` (it needs `schedule`), the schedule is a guide, not a prescription (strategy
    "guided", engine/strategy_guided.c): each step runs the actor of the schedule's earliest
    unused entry that is enabled, or the default order's step when none is, so the execution
    never diverges.  It replays a program's failing schedule on the program changed (locks
    added).  ``result.guide_deviations`` counts the steps that did not run the actor at the
    schedule's cursor (0: the schedule was followed as is).

    With `detailed`, the result carries the full trace, the await sites and the explorer that
    ran it (``result.explorer``, whose current execution is this one).

    A diverged replay raises ScheduleDivergedError (a NondeterminismError) naming the step (or,
    with raise_on_divergence=False, returns the aborted result)."""
    cfg = (config or DEFAULTS).replace(**options)
    if guided and schedule is None:
        raise ValueError("run_once(guided=True) needs a schedule to be guided by")
    if schedule is not None:
        strategy = "guided" if guided else "replay"
        ex = _core.Explorer(strategy, replay=list(schedule), max_steps=cfg.max_steps)
    else:
        ex = _core.Explorer(strategy, seed=cfg.seed, max_executions=1, max_steps=cfg.max_steps)
    if actor_paths:
        _intern_table(ex, actor_paths)
    driver = _Driver(factory, ex, cfg, oracle)
    if not ex.begin():  # pragma: no cover - a fresh explorer always has one execution
        raise RuntimeError("the engine refused to start an execution")
    try:
        with driver.capturing():
            result = driver.run(0, detailed=detailed)
    except KeyboardInterrupt:
        # the watchdog's, landing after the program's last step (in the runner's own code
        # around it): the execution ran past its limit all the same
        if _Interrupts.user or not _Interrupts.watchdog:
            raise
        raise _errors.InputError(time_limit_message()) from None
    if _Interrupts.watchdog:
        raise _errors.InputError(time_limit_message())
    result.guide_deviations = int(ex.stats()["guide_deviations"])
    if detailed:
        result.explorer = ex
    if result.outcome == ABORTED and result.divergence is not None and raise_on_divergence:
        what = "execution" if schedule is None else "guided replay" if guided else "replay"
        raise _nondeterminism(result, what)
    return result


def _intern_table(ex: Any, paths: Iterable[tuple[int | None, int]]) -> None:
    for want, (parent, index) in enumerate(paths):
        got = ex.intern(parent, index)
        if got != want:
            raise ValueError(f"actor table is inconsistent at actor {want}")


def _better(a: ExecutionResult, b: ExecutionResult | None) -> bool:
    """a is a better (more minimal) failing schedule than b."""
    if b is None:
        return True
    return (a.deviations, len(a.steps)) < (b.deviations, len(b.steps))


#: strategies whose `complete` rests on the captured dependency relation
PRUNING_STRATEGIES = ("dpor",)

EXTERNAL_EARLY_REASON = (
    "an event from another thread (call_soon_threadsafe) was delivered when the loop was "
    "idle, while it could also have come during the steps that ran as its thread lived; "
    "those other arrival points were not explored"
)

THREAD_ACCESS_REASON = (
    "a thread other than the loop's wrote state (instrumented code run by a thread the "
    "program started); the interleavings of that thread with the loop's steps were not "
    "explored"
)

RELAXED_PENDING_REASON = (
    "relaxed timers were still pending when an execution ended; DPOR cannot prove that "
    "firing them earlier changes nothing (strict timers, or the exhaustive strategy, can)"
)


def _explore_one(
    factory: ScenarioFactory,
    cfg: Config,
    strategy: str,
    max_executions: int | None,
    time_limit: float | None,
    *,
    oracle: Callable[[Any], Any] | None,
    progress: Callable[[Progress], None] | None,
    result: ExplorationResult,
    count_traces: bool,
    on_execution: Callable[[ExecutionResult], None] | None,
    schedule_log: ScheduleLog | None,
) -> None:
    """One phase of an exploration: `strategy` within the phase's budget."""
    ex = _core.Explorer(
        strategy,
        seed=cfg.seed,
        max_executions=max_executions or 0,
        max_steps=cfg.max_steps,
        time_limit=time_limit or 0.0,
        count_traces=count_traces,
        shard_index=_Shard.index,
        shard_count=_Shard.count,
    )
    driver = _Driver(factory, ex, cfg, oracle)
    started = time.monotonic()
    index = result.executions
    shared = None
    if cfg.jobs > 1 and strategy == "dpor" and _Shard.board is None:
        from chaossloth import share  # imported here: only --jobs needs it

        if share.supported():
            shared = share.Share(cfg.jobs, max_executions, schedule_log)
    try:
        try:
            with driver.capturing():
                try:
                    _explore_loop(
                        ex,
                        driver,
                        cfg,
                        strategy,
                        max_executions,
                        time_limit,
                        index,
                        started,
                        progress=progress,
                        result=result,
                        on_execution=on_execution,
                        schedule_log=schedule_log if strategy == "dpor" else None,
                        shared=shared,
                    )
                except BaseException as exc:
                    if shared is not None and shared.taker_of is not None:
                        shared.finish_taker(ex, [], bool(_Interrupts.watchdog), exc)
                    raise
                if shared is not None and shared.taker_of is not None:
                    # a process that took a branch: its part goes to its giver, and it ends
                    ends = (result.first_failure, result.minimal_failure)
                    kept = [r for r in ends if r is not None]
                    shared.finish_taker(
                        ex, [_failure_record(r) for r in kept], bool(_Interrupts.watchdog), None
                    )
        except KeyboardInterrupt:
            if _Interrupts.user or not _Interrupts.watchdog:
                note_interrupted_exploration(result)
                raise
            # the watchdog's interrupt landed just after the execution it was meant for
        if shared is not None:
            # this process's part is over: the takers still running stop at their next
            # execution (their parts are then incomplete) and report
            shared.stop()
            shared.wait_all(ex)
        _merge_stats(result, ex, strategy)
        if shared is not None:
            _merge_shared(result, shared, factory, cfg, oracle)
    finally:
        if shared is not None:
            shared.close()
    if _Interrupts.watchdog:
        result.budget_hit = True  # the time limit stopped an execution that did not end


def _merge_shared(
    result: ExplorationResult,
    shared: Any,
    factory: ScenarioFactory,
    cfg: Config,
    oracle: Callable[[Any], Any] | None,
) -> None:
    """Adds what the processes that took part of a dpor exploration found (share.py): their
    counts, whether their parts are complete, and their failures, each replayed here (light)
    from its schedule and actor table; the better of them and this process's is kept."""
    counts = shared.counts
    phase = result.phases[-1]
    for key, name in (
        ("executions", "executions"),
        ("failing", "failing_executions"),
        ("aborted", "aborted"),
        ("sleep_blocked", "sleep_blocked"),
        ("distinct_traces", "distinct_traces"),
    ):
        setattr(result, name, getattr(result, name) + counts[key])
        phase[key] = phase.get(key, 0) + counts[key]
    result.max_depth = max(result.max_depth, shared.max_depth)
    phase["max_depth"] = max(phase.get("max_depth", 0), shared.max_depth)
    phase["complete"] = bool(phase.get("complete")) and shared.complete
    phase["budget_hit"] = bool(phase.get("budget_hit")) or shared.budget_hit
    phase["traces_estimated"] = bool(phase.get("traces_estimated")) or shared.traces_estimated
    phase["processes_forked"] = shared.gave
    result.budget_hit = result.budget_hit or shared.budget_hit
    if shared.gave:
        result.distinct_traces_upper_bound = True
    best = min(shared.failures, key=lambda f: (f["deviations"], f["steps"]), default=None)
    if best is None:
        return
    mine = result.minimal_failure
    if mine is not None and (mine.deviations, len(mine.steps)) <= (
        best["deviations"],
        best["steps"],
    ):
        return
    replayed = run_once(
        factory,
        schedule=best["schedule"],
        actor_paths=[tuple(p) for p in best["actor_paths"]],
        oracle=oracle,
        config=cfg,
    )
    if not replayed.failed:
        raise _errors.NondeterminismError(
            "a failing schedule found by another --jobs process passes when replayed"
        )
    replayed.strategy = "dpor"
    replayed.deviations = best["deviations"]
    result.minimal_failure = replayed
    if result.first_failure is None:
        result.first_failure = replayed


def _failure_record(r: ExecutionResult) -> dict[str, Any]:
    """A failing execution as a taker sends it (share.py): enough to replay it."""
    return {
        "schedule": r.schedule,
        "actor_paths": list(r.actor_paths),
        "deviations": r.deviations,
        "steps": len(r.steps),
    }


def _explore_loop(
    ex: Any,
    driver: _Driver,
    cfg: Config,
    strategy: str,
    max_executions: int | None,
    time_limit: float | None,
    index: int,
    started: float,
    *,
    progress: Callable[[Progress], None] | None,
    result: ExplorationResult,
    on_execution: Callable[[ExecutionResult], None] | None,
    schedule_log: ScheduleLog | None,
    shared: Any,
) -> None:
    """_explore_one's executions, until the explorer, a failure (stop_on_failure) or the
    watchdog stops them.  With `shared` (share.py), a process forked here to take a branch of
    the tree returns from here too, into _explore_one, which ends it."""
    last_progress = 0.0
    board = _Shard.board
    if on_execution is None:
        # only the first and the minimal failure are kept (below): the other failing
        # executions' serializability messages are never read, so they are not built
        def keep(devs: int, n_steps: int) -> bool:
            best = result.minimal_failure
            return (
                result.first_failure is None
                or best is None
                or (devs, n_steps) < (best.deviations, len(best.steps))
            )

        driver.keep_message = keep

    def became_taker() -> None:
        # a fork that took a branch: its failures are its own part's
        restart_watchdog()
        result.first_failure = result.minimal_failure = None

    def goes_on() -> bool:
        if _Interrupts.user:
            # the user's Ctrl-C whose KeyboardInterrupt the interpreter swallowed: raised in a
            # weakref callback or a __del__ the execution ran (an unraisable exception)
            raise KeyboardInterrupt
        if shared is not None and not shared.before_begin(ex, became_taker):
            return False
        return bool(ex.begin()) if board is None else _shard_goes_on(ex, index)

    while goes_on():
        r = driver.run(index, detailed=False)
        if shared is not None:
            shared.counted()
            if shared.taker_of is not None:
                progress = None  # the first process reports progress
        if _Interrupts.watchdog:
            return
        index += 1
        if on_execution is not None:
            on_execution(r)
        if schedule_log is not None:
            schedule_log.add(r)
        if r.timers_pending and cfg.timers == "relaxed" and strategy in PRUNING_STRATEGIES:
            result.relaxed_timers_left = True
        if r.external_early:
            result.external_early = True
        if r.thread_accesses:
            result.thread_accesses = True
        if r.outcome == ABORTED and r.divergence is not None:
            _merge_stats(result, ex, strategy)
            raise _nondeterminism(r, f"execution {r.index} ({strategy})")
        if board is not None:
            board[_Shard.count + _Shard.index] = index
        if r.outcome == FAILED:
            if result.first_failure is None:
                result.first_failure = r
                if board is not None and cfg.stop_on_failure:
                    board[_Shard.index] = _Shard.global_index(r.index)
            if _better(r, result.minimal_failure):
                result.minimal_failure = r
            if cfg.stop_on_failure:
                if shared is not None:
                    shared.stop()
                break
        if progress is not None:
            now = time.monotonic()
            if now - last_progress >= 0.1:
                last_progress = now
                st = ex.stats()
                progress(
                    Progress(
                        strategy,
                        result.executions + st["executions"],
                        result.failing_executions + st["failing"],
                        result.distinct_traces + st["distinct_traces"],
                        now - started,
                        max_executions,
                        time_limit,
                    )
                )


def _shard_goes_on(ex: Any, index: int) -> bool:
    """A shard's next execution (local `index`) runs unless a shard already failed at a smaller
    global index (stop_on_failure) -- checked before the engine begins it."""
    if _Shard.global_index(index) > _Shard.first_failure():
        return False
    return bool(ex.begin())


def _merge_stats(result: ExplorationResult, ex: Any, strategy: str) -> None:
    st = ex.stats()
    result.executions += st["executions"]
    result.failing_executions += st["failing"]
    result.aborted += st["aborted"]
    result.distinct_traces += st["distinct_traces"]
    result.sleep_blocked += st["sleep_blocked"]
    result.max_depth = max(result.max_depth, st["max_depth"])
    result.budget_hit = result.budget_hit or bool(st["budget_hit"])
    result.phases.append(dict(st, strategy=strategy))


def _detail_failure(
    factory: ScenarioFactory,
    result: ExplorationResult,
    cfg: Config,
    oracle: Callable[[Any], Any] | None,
) -> None:
    """Re-runs the minimal failing schedule (if any) once with its full trace and await sites."""
    best = result.minimal_failure
    if best is None:
        return
    try:
        detailed = run_once(
            factory,
            schedule=best.schedule,
            actor_paths=best.actor_paths,
            oracle=oracle,
            detailed=True,
            config=cfg,
        )
    except Exception:  # noqa: BLE001 - the light result stands if the re-run breaks
        detailed = None
    if detailed is not None and detailed.failed:
        detailed.index = best.index
        detailed.strategy = best.strategy
        detailed.seed = best.seed
        detailed.deviations = best.deviations
        result.minimal_failure = detailed
        if result.first_failure is best:
            result.first_failure = detailed


def explore(
    factory: ScenarioFactory,
    *,
    config: Config | None = None,
    oracle: Callable[[Any], Any] | None = None,
    progress: Callable[[Progress], None] | None = None,
    count_traces: bool = True,
    detail_failure: bool = True,
    on_execution: Callable[[ExecutionResult], None] | None = None,
    schedule_log: ScheduleLog | None = None,
    **options: Any,
) -> ExplorationResult:
    """Explores the schedules of a scenario under `config` (default :data:`config.DEFAULTS`)
    with `options` applied (its field names: ``strategy=``, ``max_executions=``,
    ``time_limit=``, ``max_steps=``, ``seed=``, ``timers=``, ``stop_on_failure=``; an unknown
    name or a bad value raises InputError).  The budget is ``max_executions`` and
    ``time_limit`` as given: None is no limit here.

    strategy "auto": dpor within half the budget; if that is not complete (and found nothing,
    or stop_on_failure is off), pct with the rest.  Without a budget, "auto" is dpor.
    Raises NondeterminismError if an execution diverges from its prescribed schedule.
    `on_execution` is called with every execution's (light) result, e.g. to collect outcomes,
    in the process that ran it.  `schedule_log` gets the schedule of every execution of the
    dpor phase, those run by the other processes of a shared tree (``--jobs``) too.
    """
    cfg = (config or DEFAULTS).replace(**options)
    strategy, max_executions, time_limit = cfg.strategy, cfg.max_executions, cfg.time_limit
    stop_on_failure = cfg.stop_on_failure
    started = time.monotonic()
    result = ExplorationResult(strategy=strategy, seed=cfg.seed)
    common: dict[str, Any] = {
        "oracle": oracle,
        "progress": progress,
        "result": result,
        "count_traces": count_traces,
        "on_execution": on_execution,
        "schedule_log": schedule_log,
    }
    if strategy == "auto":
        _explore_one(
            factory,
            cfg,
            "dpor",
            max(1, max_executions // 2) if max_executions else None,
            time_limit / 2 if time_limit else None,
            **common,
        )
        result.complete = bool(result.phases[-1]["complete"])
        go_on = not result.complete and not (stop_on_failure and result.failed)
        if go_on:
            rest_exec = max(0, max_executions - result.executions) if max_executions else None
            rest_time = max(0.0, time_limit - (time.monotonic() - started)) if time_limit else None
            if rest_exec != 0 and (rest_time is None or rest_time > 0):
                result.budget_hit = False
                if cfg.jobs > 1:  # pct's phase on cfg.jobs processes (parallel.py)
                    from chaossloth import parallel  # imported here: it imports this module

                    phase = cfg.replace(
                        strategy="pct", max_executions=rest_exec, time_limit=rest_time
                    )
                    parallel.merge_into(
                        result, parallel.explore(factory, config=phase, oracle=oracle)
                    )
                else:
                    _explore_one(factory, cfg, "pct", rest_exec, rest_time, **common)
            result.budget_hit = result.budget_hit or rest_exec == 0
    else:
        _explore_one(factory, cfg, strategy, max_executions, time_limit, **common)
        result.complete = bool(result.phases[-1]["complete"]) if result.phases else False
    if result.failed and stop_on_failure:
        result.complete = False  # stopped at the first failure: says nothing about the rest
    elif result.complete and result.relaxed_timers_left:
        # A relaxed timer may fire at any point, but one that never fired in an execution
        # made no access there, so it raced with nothing and DPOR never tried it earlier:
        # the reduction cannot vouch for the schedules where it fires before the end.
        result.complete = False
        result.incomplete_reason = RELAXED_PENDING_REASON
    elif result.complete and result.thread_accesses:
        result.complete = False
        result.incomplete_reason = THREAD_ACCESS_REASON
    elif result.complete and result.external_early:
        result.complete = False
        result.incomplete_reason = EXTERNAL_EARLY_REASON
    result.explore_seconds = time.monotonic() - started
    if detail_failure:
        _detail_failure(factory, result, cfg, oracle)
    if progress is not None:
        progress(
            Progress(
                strategy,
                result.executions,
                result.failing_executions,
                result.distinct_traces,
                result.explore_seconds,
                max_executions,
                time_limit,
            )
        )
    return result


# ------------------------------------------------------------------ the sentinel


class ScheduleLog:
    """The schedules (actor ids) of an exploration's executions, kept compactly for the
    sentinel's comparison: each as the length of the prefix it shares with the previous one and
    the rest (DPOR's executions come depth-first and share long prefixes).  Stores at most
    `max_entries` actor ids; the executions after that are counted, not kept (`truncated`)."""

    def __init__(self, max_entries: int = 4_000_000) -> None:
        self.max_entries = max_entries
        self.entries = 0
        self.count = 0
        self.truncated = 0
        self._rows: list[tuple[int, array[int]]] = []
        self._last: list[int] = []

    def add(self, result: ExecutionResult) -> None:
        self.add_schedule(result.schedule)

    def add_schedule(self, sched: list[int]) -> None:
        shared = _common_prefix(self._last, sched)
        if self.entries + len(sched) - shared > self.max_entries:
            self.truncated += 1
            return
        self._rows.append((shared, array("l", sched[shared:])))
        self.entries += len(sched) - shared
        self.count += 1
        self._last = sched

    def restart(self) -> None:
        """Empties the log, keeping its room: in a process forked to take a branch of a shared
        dpor tree (share.py), which logs its own executions and sends them to its giver."""
        self.max_entries -= self.entries
        self.entries = self.count = self.truncated = 0
        self._rows, self._last = [], []

    def merge(self, other: ScheduleLog, actors: list[int]) -> None:
        """Adds `other`'s schedules (a taker's), its actor ids mapped through `actors`."""
        for sched in other:
            self.add_schedule([actors[a] for a in sched])
        self.truncated += other.truncated

    def __iter__(self) -> Iterator[list[int]]:
        cur: list[int] = []
        for shared, rest in self._rows:
            cur = cur[:shared] + list(rest)
            yield cur


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _step_ids(sched: Sequence[int]) -> list[tuple[int, int]]:
    """Each step of a schedule as (actor, how many steps that actor ran before it): the same
    step in every execution that shares the prefix up to it."""
    seen: dict[int, int] = {}
    out = []
    for a in sched:
        k = seen.get(a, 0)
        seen[a] = k + 1
        out.append((a, k))
    return out


@dataclass
class CaptureGap:
    """Two steps of a failing schedule that DPOR never ran in that order: the step at position
    `first` ran before the step at position `second` in the failing schedule, and every one of
    the DPOR executions that share the failing schedule's first `prefix` steps and ran both
    (`sharing` of them share the prefix) ran them the other way round.  `second` is None when
    no pair qualifies (then `first` is `prefix`: the step no DPOR execution ran there)."""

    first: int
    second: int | None
    prefix: int
    sharing: int
    compared: int


#: find_capture_gap's bounds: explored schedules compared, steps after the common prefix
GAP_MAX_SHARING = 2000
GAP_MAX_SPAN = 128


def find_capture_gap(
    failing: Sequence[int], explored: Iterable[Sequence[int]]
) -> CaptureGap | None:
    """The step pair of `failing` (a schedule DPOR's exploration did not cover) that DPOR
    ordered the other way.  The rule, exactly:

    1. A step is (actor, how many steps that actor ran before it): the same step in every
       schedule with the same prefix before it.  m = the length of the longest prefix that
       `failing` shares with an explored schedule (every DPOR execution counts, a
       sleep-set-blocked one with its partial schedule); S = the explored schedules sharing it.
    2. A pair (x, y) of steps of two different actors, x before y in `failing` at positions
       m <= i < j, is *reversed* when at least one schedule of S ran both and every schedule
       of S that ran both ran y before x (a schedule that lacks one of them, because its
       control flow went elsewhere, says nothing).
    3. The pair named is the reversed pair with the smallest j (the first step of `failing`
       that runs after a step DPOR always ran after it), and for that j the largest i (the
       reversed step closest before it).  None reversed: ``second`` is None, ``first`` is m.
    Bounds (the cost stays small whatever DPOR ran): S is the first GAP_MAX_SHARING explored
    schedules sharing the prefix (in exploration order; `sharing` counts them all), and only
    pairs with j < m + GAP_MAX_SPAN are considered.  `explored` is iterated twice.
    Returns None when nothing was explored or `failing` is itself an explored schedule.
    """
    f = list(failing)
    best, compared = -1, 0
    for sched in explored:
        compared += 1
        best = max(best, _common_prefix(f, sched))
    if best < 0 or best >= len(f):
        return None
    ids = _step_ids(f)
    wanted = set(ids[best : best + GAP_MAX_SPAN])
    positions: list[dict[tuple[int, int], int]] = []
    sharing = 0
    for sched in explored:
        if _common_prefix(f, sched) != best:
            continue
        sharing += 1
        if len(positions) < GAP_MAX_SHARING:
            positions.append({st: i for i, st in enumerate(_step_ids(sched)) if st in wanted})
    for j in range(best + 1, min(len(f), best + GAP_MAX_SPAN)):
        y = ids[j]
        for i in range(j - 1, best - 1, -1):
            x = ids[i]
            if x[0] == y[0]:
                continue
            votes = [pos[y] < pos[x] for pos in positions if x in pos and y in pos]
            if votes and all(votes):
                return CaptureGap(i, j, best, sharing, compared)
    return CaptureGap(best, None, best, sharing, compared)


@dataclass
class SentinelResult:
    """What the sentinel did: its budget, its executions and failures, the minimal failing
    execution (detailed) and the capture gap it shows."""

    share: float
    budget_executions: int = 0
    budget_seconds: float = 0.0
    executions: int = 0
    failures: int = 0
    seconds: float = 0.0
    phases: list[str] = field(default_factory=list)
    failing: ExecutionResult | None = None
    gap: CaptureGap | None = None
    dpor_truncated: int = 0


def sentinel_budget(share: float, dpor: ExplorationResult, config: Config) -> tuple[int, float]:
    """(executions, seconds) of the sentinel after a DPOR exploration: `share` of DPOR's
    executions but at least SENTINEL_MIN_EXECUTIONS, within `share` of the longer of DPOR's time
    and the run's time budget (DEFAULT_TIME_LIMIT when none is given): the floor of executions
    holds where the workload is fast enough to run them in that time."""
    executions = max(math.ceil(share * dpor.executions), SENTINEL_MIN_EXECUTIONS)
    seconds = share * max(dpor.explore_seconds, config.time_budget() or DEFAULT_TIME_LIMIT)
    return executions, seconds


def sentinel(
    factory: ScenarioFactory,
    dpor: ExplorationResult,
    explored: ScheduleLog,
    *,
    share: float,
    config: Config | None = None,
    oracle: Callable[[Any], Any] | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> SentinelResult:
    """After a complete DPOR exploration (`dpor`, whose executions' schedules are `explored`):
    schedules chosen WITHOUT the captured dependency relation, pct then random (both choose
    among every enabled step at every await/callback boundary), within
    :func:`sentinel_budget`: half the executions and half the time for pct, the rest for random.
    A failure there is a schedule DPOR should have covered: its minimal failing execution is
    re-run with its trace, and :func:`find_capture_gap` names the step pair capture missed."""
    cfg = config or DEFAULTS
    budget_exec, budget_time = sentinel_budget(share, dpor, cfg)
    out = SentinelResult(share, budget_exec, budget_time, dpor_truncated=explored.truncated)
    if share <= 0:
        return out
    result = ExplorationResult(strategy="sentinel", seed=cfg.seed)
    common: dict[str, Any] = {
        "oracle": oracle,
        "progress": progress,
        "result": result,
        "count_traces": False,
        "on_execution": None,
        "schedule_log": None,
    }
    started = time.monotonic()
    _explore_one(factory, cfg, "pct", max(1, budget_exec // 2), budget_time / 2, **common)
    out.phases.append("pct")
    rest_exec = budget_exec - result.executions
    rest_time = budget_time - (time.monotonic() - started)
    if not (result.failed and cfg.stop_on_failure) and rest_exec > 0 and rest_time > 0:
        _explore_one(factory, cfg, "random", rest_exec, rest_time, **common)
        out.phases.append("random")
    out.seconds = time.monotonic() - started
    out.executions, out.failures = result.executions, result.failing_executions
    failing = result.minimal_failure
    if failing is not None:
        failing = _towards_explored(factory, failing, explored, cfg, oracle)
        result.minimal_failure = failing
        if result.first_failure is not failing:
            result.first_failure = failing
    _detail_failure(factory, result, cfg, oracle)
    out.failing = result.minimal_failure
    if out.failing is not None:
        out.gap = find_capture_gap(out.failing.schedule, explored)
    return out


#: replays the sentinel may spend moving its failing schedule towards DPOR's executions
SENTINEL_SHRINK_REPLAYS = 64


def _towards_explored(
    factory: ScenarioFactory,
    failing: ExecutionResult,
    explored: ScheduleLog,
    cfg: Config,
    oracle: Callable[[Any], Any] | None,
) -> ExecutionResult:
    """The sentinel's failing schedule with the reorders it does not need undone, so that the
    pair find_capture_gap names is one the failure depends on: while there is a pair (x at i,
    y at j), replay the schedule with y moved just before x, else with x moved just after y
    (DPOR's order); the first variant that replays (no divergence) and still fails with the
    same exception type replaces the schedule and the loop goes on; when neither does, that
    pair is one the failure needs.  At most SENTINEL_SHRINK_REPLAYS rounds, never a schedule
    twice."""
    want = failing.failure.type_name if failing.failure is not None else None
    current = failing
    seen = {tuple(failing.schedule)}
    for _ in range(SENTINEL_SHRINK_REPLAYS):
        gap = find_capture_gap(current.schedule, explored)
        if gap is None or gap.second is None:
            break
        sched, i, j = current.schedule, gap.first, gap.second
        better: ExecutionResult | None = None
        for variant in (
            [*sched[:i], sched[j], *sched[i:j], *sched[j + 1 :]],  # y moved before x
            [*sched[:i], *sched[i + 1 : j + 1], sched[i], *sched[j + 1 :]],  # x after y
        ):
            if tuple(variant) in seen:
                continue
            seen.add(tuple(variant))
            r = run_once(
                factory,
                schedule=variant,
                actor_paths=current.actor_paths,
                oracle=oracle,
                detailed=False,
                raise_on_divergence=False,
                config=cfg,
            )
            if r.failed and r.failure is not None and r.failure.type_name == want:
                better = r
                break
        if better is None:
            break
        better.index, better.strategy, better.seed = current.index, current.strategy, current.seed
        current = better
    return current


__all__ = [
    "ABORTED",
    "FAILED",
    "OK",
    "CaptureGap",
    "ExecutionResult",
    "ExplorationResult",
    "Failure",
    "Progress",
    "ScheduleLog",
    "SentinelResult",
    "Step",
    "deviations_from_trace",
    "explore",
    "failure_from_exception",
    "find_capture_gap",
    "run_once",
    "sentinel",
    "sentinel_budget",
]
