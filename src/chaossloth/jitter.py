"""Natural failure rate and collision-window telemetry on the stock asyncio loop.

Everything here runs the user's workload on asyncio's own ``SelectorEventLoop`` -- the stock
scheduler, its ready queue, its timer heap and its iteration rule -- never on ChaosSloth's
controlled loop. Two things are added, both from outside the scheduler:

* a **fast-forward clock**: ``time()`` is the real monotonic clock plus the idle time skipped so
  far, and the selector, instead of sleeping until the next timer, adds the timeout to the skipped
  time and returns at once. Steps still cost their real CPU time; idle waits (``asyncio.sleep``,
  timeouts) cost their nominal duration exactly, without waiting for it and without the
  millisecond rounding of ``epoll``. So a 100 µs sleep counts 100 µs and a run takes microseconds.
* **injected delays**: the loop's ``call_soon``, when asked to schedule a task's step (a first
  step, or the wake-up after an await), may turn it into ``call_later(delay)``.

Natural failure rate: the workload runs N times with every task step delayed by an independent
uniform delay in [0, J]; J is half the duration T of one undisturbed run (at least 10 µs), so the
delays are small compared with the work itself. The count of failing runs goes to the engine's
Beta-Binomial posterior (``_core.rate_estimate``).

Collision window: the workers (tasks started by the workload's root task) start at offsets
0, d, 2d, ... and d is swept over [0, 2T] (widened while the widest offset still fails); each
offset's pass/fail goes to the engine's window posterior (``_core.window_estimate``). The model
(see engine/window.c): a run fails when the arrivals are closer than an unknown width W, with a
small probability of flipping either way; the posterior over W gives the estimate and a 95%
credible interval, read as "two requests arriving closer than W collide". The sentence only
claims what the sweep shows (``window_verdict``): when the posterior's median lies beyond the
widest offset tried (the widest offsets still fail), the report gives a lower bound, "at least
the widest offset", never the prior's tail; when it lies below the closest offset, no window
fits; interval ends outside the sweep read "below"/"beyond" the swept range. A workload whose
root task starts fewer than two tasks has no two arrivals to stagger: the sweep is skipped and
the window reported as not applicable. The JSON entry carries the verdict (``kind``), the
swept range and, only for an estimate inside it, the posterior's numbers.

A run that leaves nothing to run while the workload is still waiting (a deadlock) or exceeds the
iteration cap (a livelock) counts as a failure. A workload that opens real I/O cannot be measured
this way: the runs stop and the reason is returned instead of numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import selectors
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from chaossloth import _core
from chaossloth.config import DEFAULTS
from chaossloth.runner import Failure, failure_from_exception, tool_interrupt, watched

Trial = Callable[[], Awaitable[Any]]
"""A zero-argument async function: one run of the workload; it raises when the run fails."""

Judge = Callable[[Any], Any]
"""Judges what a trial returned, after the loop stopped (an oracle may run loops of its own):
None or True passes; anything else (a message, False) fails."""

MAX_ITERATIONS = 20_000
"""Loop iterations after which a run counts as a livelock."""


class _Stuck(Exception):
    """Nothing is ready and no timer is pending while the workload still waits."""


class _RealIO(Exception):
    """The workload registered a file descriptor with the selector."""


class _FastForwardSelector(selectors.BaseSelector):
    """A selector with no I/O: waiting for a timeout advances the loop's skipped time."""

    def __init__(self) -> None:
        self._map: dict[Any, selectors.SelectorKey] = {}
        self.skipped = 0.0
        self.iterations = 0
        self.allow_register = True

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
        if self.iterations > MAX_ITERATIONS:
            raise _Stuck(f"still running after {MAX_ITERATIONS} loop iterations (livelock?)")
        if timeout is None:
            raise _Stuck("nothing is ready and no timer is pending (deadlock)")
        if timeout > 0:
            self.skipped += timeout
        return []

    def get_map(self) -> Any:
        return dict(self._map)

    def close(self) -> None:
        self._map.clear()


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else fileobj.fileno()


class JitterLoop(asyncio.SelectorEventLoop):
    """asyncio's stock selector loop with a fast-forward clock and injected step delays."""

    def __init__(self, rng: random.Random, jitter: float = 0.0, offset: float = 0.0) -> None:
        self._ff = _FastForwardSelector()
        super().__init__(selector=self._ff)
        self._ff.allow_register = False
        self._rng = rng
        self._jitter = jitter
        self._offset = offset
        self._root: asyncio.Task[Any] | None = None
        self._seen: set[int] = set()
        self._workers = 0

    def time(self) -> float:
        return time.monotonic() + self._ff.skipped

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
            if self._jitter > 0:
                delay += self._rng.uniform(0.0, self._jitter)
            if delay > 0:
                return self.call_later(delay, callback, *args, context=context)
        return super().call_soon(callback, *args, context=context)


@dataclass
class RunResult:
    failed: bool
    duration: float  # fast-forward seconds of the run
    reason: str = ""
    workers: int = 0  # tasks the workload's root task started (the ones offsets stagger)
    #: why it failed: the exception and its traceback in user code (kind deadlock/livelock for
    #: a stuck run, oracle for the judge's verdict)
    failure: Failure | None = None


def run_on_stock_loop(
    trial: Trial,
    *,
    seed: int = 0,
    jitter: float = 0.0,
    offset: float = 0.0,
    judge: Judge | None = None,
) -> RunResult:
    """One run of ``trial`` on the stock loop; never raises for the workload's own failures."""
    loop = JitterLoop(random.Random(seed), jitter=jitter, offset=offset)
    failed, reason = False, ""
    failure: Failure | None = None
    raised: BaseException | None = None
    value: Any = None
    workers = 0
    try:
        start = loop.time()
        task = loop.create_task(_call(trial))
        loop.set_root(task)
        try:
            with watched():  # the time limit holds on the stock loop too
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
    return RunResult(failed, duration, reason, workers, failure)


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

    def to_json(self) -> dict[str, Any]:
        natural: dict[str, Any] = {"runs": self.runs, "failures": self.failures}
        natural.update(self.rate)
        natural["jitter_seconds"] = self.jitter_seconds
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
                "offsets": len(self.offsets),
                "failing_offsets": sum(self.offset_failed),
                "offset_min_seconds": min(self.offsets) if self.offsets else None,
                "offset_max_seconds": max(self.offsets) if self.offsets else None,
                "run_seconds": self.run_seconds,
                "sentence": self.sentence,
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
WINDOW_NOT_APPLICABLE = "not_applicable"
"""Fewer than two concurrent workers: there are no two arrivals to bring together."""


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
    if median <= min(offsets):
        return WINDOW_NO_FIT
    return WINDOW_ESTIMATE


def window_sentence(tel: Telemetry) -> str:
    """The report's sentence for stage 4's collision window (``tel.kind`` decided)."""
    if tel.kind == WINDOW_NOT_APPLICABLE:
        started = "starts no concurrent task" if tel.workers == 0 else "starts only one task"
        seen = f"no collision seen in {tel.runs} runs; " if tel.runs and not tel.failures else ""
        return (
            f"{seen}the collision window does not apply: the workload {started} (the window "
            "measures how close together two concurrent requests must arrive to collide)"
        )
    lo, hi = human_seconds(min(tel.offsets)), human_seconds(max(tel.offsets))
    n, fails = len(tel.offsets), sum(tel.offset_failed)
    if tel.kind == WINDOW_NO_COLLISION:
        return f"no collision seen for arrivals {lo} to {hi} apart ({n} offsets tried)"
    if tel.kind == WINDOW_EVERY_OFFSET:
        return (
            f"the collision window is at least {hi}: every offset tried, {lo} to {hi}, "
            f"collided ({n}/{n}); no pass was seen, so its upper edge is unknown"
        )
    if tel.kind == WINDOW_LOWER_BOUND:
        return (
            f"the collision window is at least {hi}: the widest offsets tried, up to {hi}, "
            f"still collided ({fails}/{n} offsets from {lo} failed), so its upper edge is "
            "beyond the sweep"
        )
    if tel.kind == WINDOW_NO_FIT:
        return (
            f"no collision window fits: {fails}/{n} offsets from {lo} to {hi} failed, but even "
            f"the closest arrivals, {lo} apart, mostly passed: the failures do not come from "
            f"two requests arriving close together (or only closer than {lo})"
        )
    w = tel.window
    # the interval's ends, where they fall outside the sweep, are the prior's: say so
    low = f"below {lo}" if w["low_seconds"] < min(tel.offsets) else human_seconds(w["low_seconds"])
    high = (
        f"beyond {hi}" if w["high_seconds"] > max(tel.offsets) else human_seconds(w["high_seconds"])
    )
    return (
        f"two requests arriving closer than {human_seconds(w['estimate_seconds'])} "
        f"collide (95% credible interval {low} to {high}; offsets tried {lo} to {hi}, "
        f"{fails}/{n} failed)"
    )


def human_seconds(s: float) -> str:
    if s <= 0 or math.isnan(s):
        return "0 s"
    if s < 0.9995e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 0.9995:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def measure(
    trial: Trial,
    *,
    judge: Judge | None = None,
    seed: int = 0,
    budget: float = DEFAULTS.telemetry_budget,
    max_runs: int = 200,
    sweep: int = 40,
) -> Telemetry:
    """Stage 4: natural failure rate, then the collision-window sweep, within ``budget`` seconds."""
    t0 = time.perf_counter()
    tel = Telemetry()
    rng = random.Random(seed)
    try:
        base = run_on_stock_loop(trial, seed=seed, judge=judge)
        tel.first_failure = base.failure
        tel.run_seconds = base.duration
        tel.workers = base.workers
        jitter = max(base.duration / 2.0, 10e-6)
        tel.jitter_seconds = jitter
        half = budget / 2.0
        while tel.runs < max_runs and (tel.runs < 10 or time.perf_counter() - t0 < half):
            r = run_on_stock_loop(trial, seed=rng.getrandbits(32), jitter=jitter, judge=judge)
            tel.runs += 1
            tel.failures += r.failed
            if r.failed and tel.first_failure is None:
                tel.first_failure = r.failure
        tel.rate = _posterior(
            _core.rate_estimate(tel.failures, tel.runs), ("estimate", "low", "high")
        )

        if tel.workers < 2:  # offsets stagger workers: with one, every offset is the same run
            tel.kind = WINDOW_NOT_APPLICABLE
            tel.sentence = window_sentence(tel)
            tel.seconds = time.perf_counter() - t0
            return tel
        span = max(2.0 * base.duration, 20e-6)
        small = jitter / 10.0
        for _ in range(4):  # widen while the widest offset still fails
            for i in range(sweep):
                d = span * (i + rng.random()) / sweep
                r = run_on_stock_loop(
                    trial, seed=rng.getrandbits(32), jitter=small, offset=d, judge=judge
                )
                tel.offsets.append(d)
                tel.offset_failed.append(r.failed)
                if r.failed and tel.first_failure is None:
                    tel.first_failure = r.failure
                if time.perf_counter() - t0 > budget and len(tel.offsets) >= 10:
                    break
            widest_fails = any(f for d, f in zip(tel.offsets, tel.offset_failed) if d > 0.9 * span)
            if not widest_fails or time.perf_counter() - t0 > budget:
                break
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
