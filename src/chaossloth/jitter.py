"""Natural failure rate and collision-window telemetry on the stock asyncio loop.

Everything here runs the user's workload on asyncio's own ``SelectorEventLoop`` -- the stock
scheduler, its ready queue, its timer heap and its iteration rule -- never on ChaosSloth's
controlled loop. Three things are added, all from outside the scheduler:

* a **virtual clock**: ``time()`` is the idle time skipped so far. The selector, instead of
  sleeping until the next timer, adds the timeout to the clock and returns at once; steps take
  no virtual time. So ``asyncio.sleep(0.1)`` costs exactly 0.1 s of virtual time and no real
  time, and nothing real (CPU speed, load, the millisecond rounding of ``epoll``) reaches the
  clock: a run is a function of its seed, J and the offset.
* **injected delays**: the loop's ``call_soon``, when asked to schedule a task's step (a first
  step, or the wake-up after an await), turns it into a timer ``delay`` later, ``delay`` uniform
  in [0, J] from the run's seeded generator. Other callbacks (a sleep's timer, a future's
  result, ``call_later`` callbacks) are not delayed.
* **threads**: an executor job (``asyncio.to_thread``, ``loop.run_in_executor``) and a thread
  the program started during the run (told of by capture/threads.py, as the controlled loop
  is) are waited for, in real time, when the loop has nothing else to run: until every job
  has delivered its completion and every such live thread has sent a callback or is seen
  waiting (``threads.Settling``, the controlled loop's rule); their work costs no virtual time.
  Callbacks from other threads are held until the loop is idle, then run in a fixed order (job
  completions in submission order, the others after them by their thread's start, each
  thread's in arrival order), so where a thread's result lands does not depend on the thread's
  speed, and a timer never fires while a job is pending (``wait_for(to_thread(f), timeout)``
  times out only if the job's own virtual time, none, exceeds it: never). An idle loop whose
  threads do not settle for ``THREAD_WAIT`` (10) real seconds fires its next timer, or, with
  none pending, is stuck (a failure): only a thread that waits for the loop's own timers in a
  way not seen as waiting, without sending it anything, waits that long, and only then does
  real time decide an order.

What J is, and why. J models the scheduling noise of a real loop: how late a task's step may
run compared with the order asyncio's rules give. It is scaled to the spacing of the awaits
that matter -- those of the workers, the tasks the workload's root task starts, whose steps are
the race -- and not to the run's duration, which idle waits (a TTL, a long timeout, a final
sleep) can stretch to seconds. From one undisturbed run (no delay): J is the median of the
workers' await gaps (for each worker, the virtual time between two consecutive steps: 0 for an
await resolved in the same tick, a sleep's nominal delay), and at least one round of the
workers' steps, ``workers * c``, where c is the CPU cost of a step (the median real duration of
the steps of three undisturbed runs, rounded to a power of two nanoseconds, at least 1 µs).
The median ignores a rare long wait; the floor keeps J above zero for workers that never sleep,
where delays of about a step reorder steps ready together -- and cannot move a step past a
timer much further away than a step: a program whose asyncio order always fails fails almost
always here, as on the real loop.

Natural failure rate: runs with independent delays until the Beta posterior's 95% interval
(``_core.rate_estimate``) is at most ``telemetry_width`` wide (at least ``MIN_RUNS`` runs, and
``UNFAILED_RUNS`` while no run has failed), or
60% of ``telemetry_budget`` is spent, or 4000 runs: then ``stopped_by`` says which, and the
report says the interval is wider than asked and why.

Collision window: the workers start at offsets 0, d, 2d, ... (each worker's first step delayed
by d times its index, on top of a small jitter J/10); d is swept over a fixed grid of
``SWEEP_OFFSETS`` points in (0, 4J], widened by 4 up to three times while the widest offset
still fails, ``RUNS_PER_OFFSET`` runs at each. Every run's pass/fail goes to the engine's window
posterior (``_core.window_estimate``). The model (see engine/window.c): a run fails when the
arrivals are closer than an unknown width W, with a small probability of flipping either way;
the posterior over W gives the estimate and a 95% credible interval, read as "two requests
arriving closer than W collide". The sentence only claims what the sweep shows
(``window_verdict``): when the posterior's median lies beyond the widest offset tried (the
widest offsets still fail), the report gives a lower bound, "at least the widest offset", never
the prior's tail; when fewer than two offsets saw most of their runs fail, the data cannot place
an edge and the window is "inconclusive"; when the median lies below the closest offset, no
window fits; interval ends outside the sweep read "below"/"beyond" the swept range. A workload
whose root task starts fewer than two tasks has no two arrivals to stagger: the sweep is skipped
and the window reported as not applicable. The JSON entry carries the verdict (``kind``), the
swept range and, only for an estimate inside it, the posterior's numbers.

What is reproducible: with the same seed, the same workload and the same step cost c, the runs,
failures and sweep are identical, on any machine. c is the one measured quantity; it enters
only J's floor (so only workloads whose workers never wait on a timer longer than their steps),
and it is rounded so that one machine measures the same c run after run; the JSON reports it
(``step_cost_seconds``). Counts also depend on real time when the budget stops the runs
(``stopped_by`` "budget") or a thread waits for the loop's timers (above).

A run that leaves nothing to run while the workload is still waiting and no thread at work (a
deadlock) or exceeds the iteration cap (a livelock; also a busy loop polling ``loop.time()``
around ``sleep(0)``, since steps take no virtual time) counts as a failure. A workload that
opens real I/O cannot be measured this way: the runs stop and the reason is returned instead of
numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import selectors
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from chaossloth import _core
from chaossloth.capture import output
from chaossloth.capture import threads as _threads
from chaossloth.config import DEFAULTS
from chaossloth.runner import Failure, failure_from_exception, tool_interrupt, watched

Trial = Callable[[], Awaitable[Any]]
"""A zero-argument async function: one run of the workload; it raises when the run fails."""

Judge = Callable[[Any], Any]
"""Judges what a trial returned, after the loop stopped (an oracle may run loops of its own):
None or True passes; anything else (a message, False) fails."""

MAX_ITERATIONS = 20_000
"""Loop iterations after which a run counts as a livelock, at least (measure's
``max_iterations``: stage 4 gives twice the step budget, so that a workload the controlled
loop ran to its end within --max-steps steps is not a livelock here for its length)."""


class _Stuck(Exception):
    """Nothing is ready, no timer is pending and no thread is working while the workload still
    waits."""


class _RealIO(Exception):
    """The workload registered a file descriptor with the selector."""


BUSY_LIMIT = 1000
"""Consecutive loop iterations that do not wait (something is always ready) after which the
clock moves to the earliest pending deadline, or by BUSY_TICK when that deadline has come
already: the controlled loop's busy-poll clock (ext/loop.c, POLL_LIMIT) on the stock loop, so
that stage 4 sees a poll for a timer end where stage 3 did."""

BUSY_TICK = 1e-5
"""Virtual seconds an iteration past BUSY_LIMIT costs (a real loop spends ~5-50 us on one)."""

THREAD_WAIT = 10.0
"""Real seconds an idle loop waits for its executor jobs before it fires its next timer, or,
with none pending, the run counts as stuck."""


class _FastForwardSelector(selectors.BaseSelector):
    """A selector with no I/O: waiting for a timeout advances the loop's virtual clock; waiting
    while a thread works (an executor job) waits for the thread, in real time."""

    def __init__(self) -> None:
        self._map: dict[Any, selectors.SelectorKey] = {}
        self.skipped = 0.0
        self.iterations = 0
        self.max_iterations = MAX_ITERATIONS
        self.busy = 0  # consecutive iterations that did not wait
        self.allow_register = True
        self.loop: JitterLoop | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if not self.allow_register:
            raise _RealIO(f"the workload waits on file descriptor {fileobj!r}")
        key = selectors.SelectorKey(fileobj, _fd(fileobj), events, data)
        self._map[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._map.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[Any]:
        self.iterations += 1
        if self.iterations > self.max_iterations:
            raise _Stuck(f"still running after {self.max_iterations} loop iterations (livelock?)")
        if timeout is not None and timeout <= 0:
            # steps are ready: threads are not looked at (their completions wait for an idle
            # point, so where they land does not depend on the threads' real speed)
            self.busy += 1
            if self.busy > BUSY_LIMIT:
                # a loop that never idles still sees its clock move, as a real loop's does: to
                # the next deadline (a poll for a flag a sleeping task sets ends after
                # BUSY_LIMIT iterations, not after seconds' worth of them), and by BUSY_TICK
                # an iteration once that has come (a timer re-armed at "now" by code that waits
                # for time to pass, aiolimiter's leaky bucket, would otherwise fire forever at
                # one instant)
                deadline = self._next_deadline()
                if deadline is not None and deadline > self.skipped + BUSY_TICK:
                    self.skipped = deadline
                    self.busy = 0
                else:
                    self.skipped += BUSY_TICK
            return []
        self.busy = 0
        if self.loop is not None and self.loop._wait_for_threads(timeout):
            return []  # a thread's completion is now ready: no virtual time passes
        if timeout is None:
            raise _Stuck("nothing is ready and no timer is pending (deadlock)")
        self.skipped += timeout
        return []

    def _next_deadline(self) -> float | None:
        """The earliest finite deadline of the loop's live timers, or None."""
        if self.loop is None:
            return None
        live = [
            h.when() for h in self.loop._scheduled if not h.cancelled() and math.isfinite(h.when())
        ]
        return min(live) if live else None

    def get_map(self) -> Any:
        return dict(self._map)

    def close(self) -> None:
        self._map.clear()


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else fileobj.fileno()


class JitterLoop(asyncio.SelectorEventLoop):
    """asyncio's stock selector loop on a virtual clock, with injected step delays.

    The clock is the idle time skipped: idle waits advance it by their nominal duration, steps
    by nothing.  Nothing real enters it, so a run is a function of its seed, ``jitter`` and
    ``offset`` (threads aside: see ``_wait_for_threads``)."""

    #: the program's time.monotonic() and time.time() read this clock (capture/entropy.py)
    _cs_virtual_clock = True

    def __init__(
        self,
        rng: random.Random,
        jitter: float = 0.0,
        offset: float = 0.0,
        record: bool = False,
    ) -> None:
        self._ff = _FastForwardSelector()
        super().__init__(selector=self._ff)
        self._ff.allow_register = False
        self._ff.loop = self
        self._rng = rng
        self._jitter = jitter
        self._offset = offset
        self._root: asyncio.Task[Any] | None = None
        self._seen: set[int] = set()
        self._worker_ids: set[int] = set()
        self._workers = 0
        #: executor jobs: the asyncio future of each pending run_in_executor, by submission
        self._jobs: dict[int, int] = {}
        self._job_count = 0
        #: callbacks from other threads with the sending thread's ident, held until the loop
        #: is idle (see _wait_for_threads)
        self._held: list[tuple[int, asyncio.Handle]] = []
        #: the threads the program started during the run, in start order
        self._started: list[threading.Thread] = []
        self._held_cv = threading.Condition()
        self._record = record
        #: with record: per task step, (task id, virtual start, real seconds, worker?)
        self.trace: list[tuple[int, float, float, bool]] = []
        #: what asyncio would have logged ("Task exception was never retrieved", a callback's
        #: error): the failure the exploration reports already, hundreds of times over here
        self.logged: list[dict[str, Any]] = []
        self.set_exception_handler(lambda _loop, context: self.logged.append(context))

    def time(self) -> float:
        return self._ff.skipped

    def set_root(self, task: asyncio.Task[Any]) -> None:
        self._root = task
        self._seen.add(id(task))

    def call_soon(self, callback: Any, *args: Any, context: Any = None) -> Any:
        task = getattr(callback, "__self__", None)
        if isinstance(task, asyncio.Task) and self._root is not None:
            delay = 0.0
            if id(task) not in self._seen:
                self._seen.add(id(task))
                if asyncio.current_task(self) is self._root:  # a worker's first step
                    delay += self._offset * self._workers
                    self._workers += 1
                    self._worker_ids.add(id(task))
            if self._jitter > 0:
                delay += self._draw()
            if delay > 0:
                return super().call_at(
                    self.time() + delay, self._step, task, callback, *args, context=context
                )
            return super().call_soon(self._step, task, callback, *args, context=context)
        return super().call_soon(callback, *args, context=context)

    def _draw(self) -> float:
        """One injected delay: uniform in [0, J], from the run's seeded generator."""
        return self._rng.uniform(0.0, self._jitter)

    def _step(self, task: asyncio.Task[Any], callback: Any, *args: Any) -> None:
        """Runs one task step (recording it with ``record``)."""
        if not self._record:
            callback(*args)
            return
        t0 = time.perf_counter()
        try:
            callback(*args)
        finally:
            real = time.perf_counter() - t0
            self.trace.append((id(task), self.time(), real, id(task) in self._worker_ids))

    # -- threads ---------------------------------------------------------------------------

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        fut = super().run_in_executor(executor, func, *args)
        self._jobs[id(fut)] = self._job_count
        self._job_count += 1
        fut.add_done_callback(lambda f: self._jobs.pop(id(f), None))
        return fut

    def run_forever(self) -> None:
        _threads.begin()
        try:
            super().run_forever()
        finally:
            _threads.end()

    def _cs_thread_started(self, thread: threading.Thread) -> None:
        """A thread the program started while this loop runs (capture.threads)."""
        self._started.append(thread)

    def call_soon_threadsafe(self, callback: Any, *args: Any, context: Any = None) -> Any:
        handle = asyncio.Handle(callback, args, self, context)
        with self._held_cv:
            self._held.append((threading.get_ident(), handle))
            self._held_cv.notify_all()
        return handle

    def _job_of(self, handle: asyncio.Handle) -> int:
        """The submission index of the executor job a held callback completes (its first
        argument is the job's asyncio future), else -1.  Asked in the loop's thread only: a
        job may finish before run_in_executor has returned and registered it."""
        args = handle._args
        return self._jobs.get(id(args[0]), -1) if args else -1

    def _wait_for_threads(self, timeout: float | None) -> bool:
        """Called when the loop would idle.  Waits (really) until every pending executor job has
        delivered its completion and every live thread the program started has sent a callback
        or is seen waiting (threads.Settling), then releases what the threads sent into the
        ready queue, job completions in submission order, other callbacks after them by their
        thread's start, each thread's in arrival order (so the order does not depend on the
        threads' speed).  A thread's work costs no virtual time.  Returns False when nothing
        came (no thread at work, or THREAD_WAIT real seconds passed with a timer pending: it
        fires); raises _Stuck after THREAD_WAIT real seconds with no timer pending."""
        deadline = time.monotonic() + THREAD_WAIT
        settling = _threads.Settling(self._started)
        with self._held_cv:
            while True:
                delivered = {self._job_of(h) for _, h in self._held}
                waiting = [j for j in self._jobs.values() if j not in delivered]
                if not waiting and settling.settled({ident for ident, _ in self._held}):
                    stuck = timeout is None and not self._held
                    if stuck and settling.still_only and not settling.confirm:
                        # stuck unless a thread seen only still sends: wait longer for it
                        settling = _threads.Settling(self._started, confirm=True)
                        continue
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    if timeout is None:
                        what = f"{len(waiting)} executor job(s)" if waiting else "its threads"
                        raise _Stuck(f"waited {THREAD_WAIT:g} s for {what}")
                    break
                self._held_cv.wait(min(left, _threads.POLL))
            held, self._held = self._held, []
        if not held:
            return False
        rank = {t.ident: k for k, t in enumerate(self._started)}
        jobs = [self._job_of(h) for _, h in held]
        order = sorted(
            range(len(held)),
            key=lambda i: (jobs[i] < 0, jobs[i], rank.get(held[i][0], len(rank)), i),
        )
        for i in order:  # job completions by submission, then the others by thread, arrival
            self._ready.append(held[i][1])
        return True


@dataclass
class RunResult:
    failed: bool
    duration: float  # virtual seconds of the run (its idle waits)
    reason: str = ""
    workers: int = 0  # tasks the workload's root task started (the ones offsets stagger)
    #: why it failed: the exception and its traceback in user code (kind deadlock/livelock for
    #: a stuck run, oracle for the judge's verdict)
    failure: Failure | None = None
    #: with record: per task step, (task id, virtual start, real seconds, worker?)
    trace: list[tuple[int, float, float, bool]] = field(default_factory=list)


def run_on_stock_loop(
    trial: Trial,
    *,
    seed: int = 0,
    jitter: float = 0.0,
    offset: float = 0.0,
    judge: Judge | None = None,
    record: bool = False,
    max_iterations: int = MAX_ITERATIONS,
) -> RunResult:
    """One run of ``trial`` on the stock loop; never raises for the workload's own failures.
    With ``record``, the result's ``trace`` lists every task step (see JitterLoop.trace); past
    ``max_iterations`` loop iterations the run is a livelock."""
    loop = JitterLoop(random.Random(seed), jitter=jitter, offset=offset, record=record)
    loop._ff.max_iterations = max(max_iterations, MAX_ITERATIONS)
    failed, reason = False, ""
    failure: Failure | None = None
    raised: BaseException | None = None
    value: Any = None
    workers = 0
    trace: list[tuple[int, float, float, bool]] = []
    try:
        start = loop.time()
        task = loop.create_task(_call(trial))
        loop.set_root(task)
        try:
            # the time limit holds on the stock loop too; the program's output is dropped
            with watched(), output.captured():
                value = loop.run_until_complete(task)
        except _RealIO:
            raise
        except _Stuck as exc:
            failed, reason = True, str(exc)
            kind = "livelock" if "livelock" in reason else "deadlock"
            failure = Failure(kind, kind.capitalize() + "Error", reason)
        except BaseException as exc:
            if tool_interrupt(exc):  # the program's own exits are this run's failure
                raise
            if task.done() and not task.cancelled():
                task.exception()  # a SystemExit the task's step re-raised: retrieved here
            failed, reason = True, f"{type(exc).__name__}: {exc}"
            raised = exc
        duration = loop.time() - start
        if raised is not None:  # after the run's clock stopped: its traceback costs no time
            failure = failure_from_exception(raised)
            raised = None
        workers = loop._workers
        trace = loop.trace
    finally:
        _shutdown(loop)
    if not failed and judge is not None:
        try:
            verdict = judge(value)
        except Exception as exc:  # noqa: BLE001 - the oracle's own failure fails the run
            verdict = f"{type(exc).__name__}: {exc}"
        if verdict is not None and verdict is not True:
            failed, reason = True, str(verdict)
            failure = Failure("oracle", "OracleFailure", reason)
    return RunResult(failed, duration, reason, workers, failure, trace)


async def _call(trial: Trial) -> Any:
    return await trial()


def _shutdown(loop: JitterLoop) -> None:
    """Cancels what a failed run left behind, without waiting on anything real."""
    loop._root = None
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop._ff.iterations = 0
            # best effort: a broken run may not even let its tasks finish cancelling
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        if loop._default_executor is not None:
            # as asyncio.run ends: the executor's threads (to_thread) are joined, not left
            # running past the run
            with contextlib.suppress(BaseException):
                loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


@dataclass
class Telemetry:
    """What stage 4 reports; ``error`` set means the workload could not be measured."""

    runs: int = 0
    failures: int = 0
    rate: dict[str, float] = field(default_factory=dict)
    jitter_seconds: float = 0.0
    run_seconds: float = 0.0
    offsets: list[float] = field(default_factory=list)
    offset_failed: list[bool] = field(default_factory=list)
    window: dict[str, float] = field(default_factory=dict)
    workers: int = 0
    kind: str = ""
    sentence: str = ""
    error: str = ""
    seconds: float = 0.0
    #: the first failing run's failure (the evidence when exploration found no failing schedule)
    first_failure: Failure | None = None
    #: the 95% interval's width the rate's runs aimed at (option telemetry_width)
    width: float = DEFAULTS.telemetry_width
    #: the CPU cost of one step, measured once (see step_cost)
    step_cost_seconds: float = 0.0
    #: why the rate's runs stopped before the interval was ``width`` wide: "budget" (the
    #: telemetry_budget ran out), "time_limit" (the run's --time-limit: measure's deadline) or
    #: "max_runs"; "" when the interval reached the width
    stopped_by: str = ""
    #: "budget" when the sweep could not widen further within the budget
    sweep_stopped_by: str = ""

    def rate_sentence(self) -> str:
        """The rate with its interval, and why the interval is wider than asked when it is."""
        r = self.rate
        text = (
            f"natural failure rate on the stock loop: {self.failures}/{self.runs} runs "
            f"(estimate {100 * r['estimate']:.1f}%, 95% interval {100 * r['low']:.1f}%"
            f"-{100 * r['high']:.1f}%; jitter J = {human_seconds(self.jitter_seconds)} per step)"
        )
        if self.stopped_by:
            cause = {
                "budget": f"the time budget (option telemetry_budget, {self.seconds:.2g} s) ran out",
                "time_limit": "the run's time limit (--time-limit) ran out",
            }.get(self.stopped_by, f"the run cap ({self.runs} runs) was reached")
            wide = r["high"] - r["low"]
            if wide > self.width:
                text += (
                    f"; the interval is {100 * wide:.1f} points wide, wider than the "
                    f"{100 * self.width:.3g} asked (option telemetry_width): {cause}"
                )
            else:
                # narrow enough, but a workload with no failing run is run UNFAILED_RUNS times
                text += (
                    f"; no run failed, and the count stopped before the {UNFAILED_RUNS} runs "
                    f"asked of a workload that has not failed (a rarer failure may go unseen): "
                    f"{cause}"
                )
        return text

    def to_json(self) -> dict[str, Any]:
        natural: dict[str, Any] = {"runs": self.runs, "failures": self.failures}
        natural.update(self.rate)
        natural["jitter_seconds"] = self.jitter_seconds
        natural["step_cost_seconds"] = self.step_cost_seconds
        natural["width_asked"] = self.width
        natural["stopped_by"] = self.stopped_by or None
        # the posterior's numbers only where the data bounds the window on both sides;
        # elsewhere they would be the prior's (see window_verdict)
        window: dict[str, Any] = {
            "estimate_seconds": None,
            "low_seconds": None,
            "high_seconds": None,
        }
        if self.kind == WINDOW_ESTIMATE:
            window.update(self.window)
        if self.kind in (WINDOW_LOWER_BOUND, WINDOW_EVERY_OFFSET):
            window["lower_bound_seconds"] = max(self.offsets)
        window.update(
            {
                "kind": self.kind,
                "workers": self.workers,
                # "offsets"/"failing_offsets" count runs (observations), as they always did;
                # the sweep repeats each offset RUNS_PER_OFFSET times
                "offsets": len(self.offsets),
                "failing_offsets": sum(self.offset_failed),
                "distinct_offsets": len(set(self.offsets)),
                "colliding_offsets": len(colliding_offsets(self.offsets, self.offset_failed)),
                # "budget" when the budget stopped the widening (see measure)
                "stopped_by": self.sweep_stopped_by or None,
                "offset_min_seconds": min(self.offsets) if self.offsets else None,
                "offset_max_seconds": max(self.offsets) if self.offsets else None,
                "run_seconds": self.run_seconds,
                "sentence": self.sentence,
                # the sweep's observations by offset, ascending (the HTML report's plot)
                "per_offset": per_offset(self.offsets, self.offset_failed),
            }
        )
        if self.error:
            natural["error"] = window["error"] = self.error
        return {"natural_failure_rate": natural, "collision_window": window}


def _posterior(value: Any, names: tuple[str, str, str]) -> dict[str, float]:
    """Normalises what the engine returns (a dict or a 3-tuple) to {estimate, low, high}."""
    if isinstance(value, dict):

        def pick(*keys: str) -> float:
            for k in keys:
                if k in value:
                    return float(value[k])
            raise KeyError(keys[0])

        return {
            names[0]: pick("estimate", "mean", "mode", "map", "median"),
            names[1]: pick("low", "lo", "lower", "ci_low"),
            names[2]: pick("high", "hi", "upper", "ci_high"),
        }
    est, lo, hi = value
    return {names[0]: float(est), names[1]: float(lo), names[2]: float(hi)}


WINDOW_ESTIMATE = "estimate"
"""The posterior's median lies inside the sweep: the estimate stands."""
WINDOW_LOWER_BOUND = "lower_bound"
"""The median lies beyond the widest offset: the data shows no upper edge, only a bound."""
WINDOW_EVERY_OFFSET = "every_offset"
"""Every offset tried failed (a lower bound too)."""
WINDOW_NO_COLLISION = "no_collision"
"""No offset failed."""
WINDOW_NO_FIT = "no_fit"
"""The median lies below the closest offset: failures do not come from close arrivals."""
WINDOW_INCONCLUSIVE = "inconclusive"
"""Collisions were seen, but at fewer than two offsets where most runs failed: too few to
place an edge, and a re-run with another seed could read them either way."""
WINDOW_NOT_APPLICABLE = "not_applicable"
"""Fewer than two concurrent workers: there are no two arrivals to bring together."""
WINDOW_NOT_MEASURED = "not_measured"
"""The run's time limit (``deadline``) ran out before the sweep's first pass over its offsets
ended: what it saw is not a sweep."""


def window_verdict(offsets: list[float], failed: list[bool], window: dict[str, float]) -> str:
    """What the sweep's data can say about the window, given the posterior ``window``.

    The model (engine/window.c) expects close arrivals to fail and distant ones to pass. The
    data can only place the window's edge between offsets the sweep tried: where the
    posterior's median lies beyond the widest offset, the widest offsets still fail and the
    mass out there is the prior's (log-uniform up to 10 s), so its "estimate" would be the
    prior's tail; all the data says is "at least the widest offset". Where the median lies
    below the closest offset, even the closest arrivals mostly pass: the failures that were
    seen do not come from close arrivals (or the window is narrower than the sweep sees)."""
    n = len(offsets)
    fails = sum(bool(f) for f in failed)
    if n == 0 or fails == 0:
        return WINDOW_NO_COLLISION
    if fails == n:
        return WINDOW_EVERY_OFFSET
    median = window.get("estimate_seconds", math.nan)
    if median >= max(offsets):
        return WINDOW_LOWER_BOUND
    # an edge (or its absence) needs failures at two offsets at least, each in most of its runs;
    # fewer is what a few runs of noise give, and the next seed reads them the other way
    if len(colliding_offsets(offsets, failed)) < 2:
        return WINDOW_INCONCLUSIVE
    if median <= min(offsets):
        return WINDOW_NO_FIT
    return WINDOW_ESTIMATE


def per_offset(offsets: list[float], failed: list[bool]) -> list[dict[str, Any]]:
    """The runs and failures at each distinct offset, by ascending offset."""
    counts: dict[float, list[int]] = {}
    for d, f in zip(offsets, failed):
        c = counts.setdefault(d, [0, 0])
        c[0] += 1
        c[1] += bool(f)
    return [{"offset_seconds": d, "runs": n, "failures": k} for d, (n, k) in sorted(counts.items())]


def colliding_offsets(offsets: list[float], failed: list[bool]) -> list[float]:
    """The distinct offsets at which more than half of the runs failed."""
    runs: dict[float, list[int]] = {}
    for d, f in zip(offsets, failed):
        runs.setdefault(d, [0, 0])[bool(f)] += 1
    return sorted(d for d, (passes, fails) in runs.items() if fails > passes)


def window_sentence(tel: Telemetry) -> str:
    """The report's sentence for stage 4's collision window (``tel.kind`` decided)."""
    if tel.kind == WINDOW_NOT_MEASURED:
        return (
            f"the collision window was not measured: the time limit (--time-limit) ran out "
            f"after {len(tel.offsets)} of the sweep's {SWEEP_OFFSETS * RUNS_PER_OFFSET} runs"
        )
    if tel.kind == WINDOW_NOT_APPLICABLE:
        started = "starts no concurrent task" if tel.workers == 0 else "starts only one task"
        seen = f"no collision seen in {tel.runs} runs; " if tel.runs and not tel.failures else ""
        return (
            f"{seen}the collision window does not apply: the workload {started} (the window "
            "measures how close together two concurrent requests must arrive to collide)"
        )
    lo, hi = human_seconds(min(tel.offsets)), human_seconds(max(tel.offsets))
    n, fails = len(tel.offsets), sum(tel.offset_failed)
    tried = f"{n} runs at {len(set(tel.offsets))} offsets"
    if tel.kind == WINDOW_NO_COLLISION:
        return f"no collision seen for arrivals {lo} to {hi} apart ({tried})"
    if tel.kind == WINDOW_EVERY_OFFSET:
        return (
            f"the collision window is at least {hi}: every offset tried, {lo} to {hi}, "
            f"collided ({n}/{n} runs); no pass was seen, so its upper edge is unknown"
        )
    if tel.kind == WINDOW_LOWER_BOUND:
        return (
            f"the collision window is at least {hi}: the widest offsets tried, up to {hi}, "
            f"still collided ({fails}/{tried} from {lo} failed), so its upper edge is "
            "beyond the sweep"
        )
    if tel.kind == WINDOW_INCONCLUSIVE:
        return (
            f"collision window inconclusive: {fails}/{n} runs at offsets {lo} to {hi} collided, "
            f"but at fewer than two offsets did most runs collide: too few to place its edge"
        )
    if tel.kind == WINDOW_NO_FIT:
        return (
            f"no collision window fits: {fails}/{tried}, {lo} to {hi}, failed, but even "
            f"the closest arrivals, {lo} apart, mostly passed: the failures do not come from "
            f"two requests arriving close together (or only closer than {lo})"
        )
    w = tel.window
    # the interval's ends, where they fall outside the sweep, are the prior's: say so
    low = f"below {lo}" if w["low_seconds"] < min(tel.offsets) else human_seconds(w["low_seconds"])
    high = (
        f"beyond {hi}" if w["high_seconds"] > max(tel.offsets) else human_seconds(w["high_seconds"])
    )
    text = (
        f"two requests arriving closer than {human_seconds(w['estimate_seconds'])} "
        f"collide (95% credible interval {low} to {high}; offsets tried {lo} to {hi}, "
        f"{fails}/{tried} failed)"
    )
    if w["high_seconds"] <= tel.jitter_seconds / 10.0:
        # steps take no virtual time: a window inside the sweep's own delays says only that
        # the workers collide when they start together
        text += (
            f"; that is within the sweep's own delays (J/10 = "
            f"{human_seconds(tel.jitter_seconds / 10.0)}): the requests collide when they "
            "arrive together, before either has awaited anything that takes time"
        )
    return text


def human_seconds(s: float) -> str:
    if s <= 0 or math.isnan(s):
        return "0 s"
    if s < 0.9995e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 0.9995:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def step_cost(traces: list[list[tuple[int, float, float, bool]]]) -> float:
    """The CPU cost of one task step: the median real duration of the recorded steps, rounded to
    a power of two nanoseconds (at least 1 µs) so that repeated measurements on one machine
    give the same number.  It enters the runs only through J's floor (see :func:`jitter_scale`)."""
    costs = sorted(real for trace in traces for _, _, real, _ in trace)
    if not costs:
        return MIN_STEP_COST
    median = costs[len(costs) // 2]
    return max(MIN_STEP_COST, 2.0 ** round(math.log2(max(median, 1e-9) * 1e9)) * 1e-9)


def await_gaps(trace: list[tuple[int, float, float, bool]]) -> list[float]:
    """The workers' awaits as the undisturbed run resolved them: for each worker, the virtual
    time between two of its consecutive steps (0 for an await that resolves in the same tick,
    the nominal delay of a sleep or a timeout)."""
    last: dict[int, float] = {}
    gaps: list[float] = []
    for task, start, _, worker in trace:
        if not worker:
            continue
        if task in last:
            gaps.append(start - last[task])
        last[task] = start
    return gaps


def jitter_scale(gaps: list[float], workers: int, cost: float) -> float:
    """J: the median of the workers' await gaps, at least one round of the workers' steps
    (``max(workers, 1) * cost``).  The median ignores the rare long wait (a TTL, a timeout
    that never fires) that a mean or the run's duration would be dominated by."""
    floor = max(workers, 1) * cost
    if not gaps:
        return floor
    ordered = sorted(gaps)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
    return max(floor, median)


def _log_grid(lo: float, hi: float, n: int, include_low: bool = True) -> list[float]:
    """``n`` offsets log-spaced from ``lo`` to ``hi`` (both included, or ``lo`` left out)."""
    if include_low:
        return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    return [lo * (hi / lo) ** ((i + 1) / n) for i in range(n)]


MIN_STEP_COST = 1e-6
"""The smallest step cost :func:`step_cost` returns."""

MIN_RUNS = 20
"""Runs before the rate's interval may stop the count."""

UNFAILED_RUNS = 200
"""Runs before a workload that has not failed yet stops (its interval is narrow long before):
a failure seen here is evidence of its own (it sends stage 3 to relaxed timers), and a rate of
a few percent goes unseen in 34 runs one time in ten."""

SWEEP_OFFSETS = 24
"""Offsets per sweep of the collision window."""

RUNS_PER_OFFSET = 5
"""Runs at each offset: 120 observations per sweep keep the verdict stable from seed to seed."""


def measure(
    trial: Trial,
    *,
    judge: Judge | None = None,
    seed: int = 0,
    budget: float = DEFAULTS.telemetry_budget,
    width: float = DEFAULTS.telemetry_width,
    max_runs: int = 4000,
    cost: float | None = None,
    max_iterations: int = MAX_ITERATIONS,
    deadline: float | None = None,
) -> Telemetry:
    """Stage 4: natural failure rate, then the collision-window sweep, within ``budget`` seconds.

    The rate's runs continue until the 95% interval is at most ``width`` wide (at least
    MIN_RUNS runs, at most ``max_runs``) or 60% of the budget is spent; the sweep gets the rest
    (at least one pass over the offsets).  ``cost`` overrides the measured step cost.
    ``deadline`` (time.monotonic(): the run's time limit) ends the runs wherever they are: the
    rate stops with fewer than MIN_RUNS runs ("budget"), the sweep where it is (before its
    first pass ended: the window is WINDOW_NOT_MEASURED)."""
    t0 = time.perf_counter()
    tel = Telemetry(width=width)
    rng = random.Random(seed)

    def late() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    def run(**kw: Any) -> RunResult:
        return run_on_stock_loop(trial, judge=judge, max_iterations=max_iterations, **kw)

    try:
        base = run(seed=seed, record=True)
        tel.first_failure = base.failure
        tel.run_seconds = base.duration
        tel.workers = base.workers
        if cost is None:
            extra = [run(seed=seed, record=True) for _ in "ab"]
            cost = step_cost([base.trace] + [r.trace for r in extra])
        tel.step_cost_seconds = cost
        jitter = jitter_scale(await_gaps(base.trace), base.workers, cost)
        tel.jitter_seconds = jitter
        rate_budget = 0.6 * budget
        while True:
            r = run(seed=rng.getrandbits(32), jitter=jitter)
            tel.runs += 1
            tel.failures += r.failed
            if r.failed and tel.first_failure is None:
                tel.first_failure = r.failure
            if tel.runs < MIN_RUNS and not late():
                continue
            tel.rate = _posterior(
                _core.rate_estimate(tel.failures, tel.runs), ("estimate", "low", "high")
            )
            if tel.rate["high"] - tel.rate["low"] <= width and (
                tel.failures or tel.runs >= UNFAILED_RUNS
            ):
                break
            if tel.runs >= max_runs:
                tel.stopped_by = "max_runs"
                break
            if late():
                tel.stopped_by = "time_limit"
                break
            if time.perf_counter() - t0 > rate_budget:
                tel.stopped_by = "budget"
                break

        if tel.workers < 2:  # offsets stagger workers: with one, every offset is the same run
            tel.kind = WINDOW_NOT_APPLICABLE
            tel.sentence = window_sentence(tel)
            tel.seconds = time.perf_counter() - t0
            return tel
        small = jitter / 10.0
        # fixed grids (the seed decides the delays): the same seed sweeps the same offsets.
        # The first is log-spaced over [4J/1000, 4J] (the window's prior is log-uniform: a
        # window of a few small delays is resolved as well as one of a sleep); each widening
        # adds a log-spaced grid over (span, 4 span] while the widest offset still fails.
        lo, span = 4.0 * jitter / 1000.0, 4.0 * jitter
        grid = _log_grid(lo, span, SWEEP_OFFSETS)
        for widening in range(4):
            for d in grid:
                for _ in range(RUNS_PER_OFFSET):
                    if late():
                        break
                    r = run(seed=rng.getrandbits(32), jitter=small, offset=d)
                    tel.offsets.append(d)
                    tel.offset_failed.append(r.failed)
                    if r.failed and tel.first_failure is None:
                        tel.first_failure = r.failure
            if late():
                tel.sweep_stopped_by = "budget"
                if widening == 0:
                    tel.kind = WINDOW_NOT_MEASURED
                    tel.sentence = window_sentence(tel)
                    tel.seconds = time.perf_counter() - t0
                    return tel
                break
            widest = grid[-1]
            if widening == 3 or not any(
                f for d, f in zip(tel.offsets, tel.offset_failed) if d == widest
            ):
                break
            if time.perf_counter() - t0 > budget:
                tel.sweep_stopped_by = "budget"
                break
            grid = _log_grid(span, 4.0 * span, SWEEP_OFFSETS // 3, include_low=False)
            span *= 4.0
        tel.window = _posterior(
            _core.window_estimate(tel.offsets, tel.offset_failed),
            ("estimate_seconds", "low_seconds", "high_seconds"),
        )
        tel.kind = window_verdict(tel.offsets, tel.offset_failed, tel.window)
        tel.sentence = window_sentence(tel)
    except _RealIO as exc:
        tel.error = f"not measured: {exc} (real I/O cannot be fast-forwarded)"
    tel.seconds = time.perf_counter() - t0
    return tel
