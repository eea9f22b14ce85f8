"""``--jobs N``: a sampling exploration (random, pct, pos) split across N worker processes.

Worker k is a fork of this process that runs :func:`runner.explore` as shard k of N
(``runner.set_shard``): its execution i is the exploration's execution ``i * N + k``, whose random
stream the engine draws (``cs_config.shard_index``), so the N workers together try the executions
one process would try with the same seed and budget (exactly so for random and pos; pct's change
points also depend on the longest execution each worker has seen).  The budget is split the same
way: ``max_executions`` M gives worker k the executions k, k + N, ... below M; a time limit holds
for each worker.

The workers share a board (an anonymous shared mapping, written by each worker in its own slots
only): the global index of its first failing execution, and how many executions it has run.  With
stop-on-failure a worker stops before any execution whose global index is above the smallest
failing one, so the failure reported is the one with the smallest global index -- the one a single
process would stop at -- whatever the workers' speeds.  Each worker sends its counts and its
failing schedule back through a pipe; this process re-runs the chosen schedule once (a replay,
with the full trace) for the stages after 3, as a single-process exploration re-runs its minimal
failure.

Distinct traces are counted per worker (the fingerprint sets are not merged): the total is the
largest worker's count, a lower bound, and the exploration says so.  Never complete: sampling
proves nothing.  Needs ``os.fork`` (Linux, macOS); elsewhere ``--jobs`` above 1 is refused.

No worker outlives this process.  On Linux a worker asks the kernel, right after the fork, for
SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), then checks that its parent is still the
process that forked it (one that died before the prctl: the fork's race); everywhere a worker
also checks its parent between executions (every 0.1 s at most), and ends when it changed.
SIGTERM here kills the workers and waits for them, then ends this process as SIGTERM does.
The user's Ctrl-C (the terminal sends it to the workers too; this process forwards it) stops
every worker, and each sends what it had found so far; this process reads their reports for
STOP_GRACE seconds (a second Ctrl-C: not at all), kills the workers left, and notes the failure
a finished exploration would have chosen among theirs (light: not re-run) as the interrupted
exploration's (runner.note_interrupted_exploration), for stage 3 to save; the interrupt goes
on.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import pickle
import selectors
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from chaossloth import runner
from chaossloth.config import Config
from chaossloth.errors import InputError, NondeterminismError

#: the strategies --jobs splits (the others run in one process)
SHARDED_STRATEGIES = ("random", "pct", "pos")

_SLOT = 8  # bytes of one board slot (an unsigned 64-bit integer)

#: seconds the workers have, after the user's Ctrl-C, to send what they found before they are
#: killed (a worker stuck in a step that ignores the interrupt loses its failure)
STOP_GRACE = 3.0

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: the exit status of a worker that found its parent gone (nobody waits for it)
_ORPHANED = 1


@dataclass
class WorkerReport:
    """What a worker sends back (pickled through its pipe)."""

    shard: int
    stats: dict[str, Any] = field(default_factory=dict)
    #: the worker's chosen failing execution: schedule, actor table, global index, deviations
    failure: dict[str, Any] | None = None
    #: an exception that ended the worker: (class name, message)
    error: tuple[str, str] | None = None
    #: the user's Ctrl-C stopped the worker: `failure` is what it had found, `stats` is empty
    interrupted: bool = False


def supported() -> bool:
    return hasattr(os, "fork")


def explore(
    factory: runner.ScenarioFactory,
    *,
    config: Config,
    oracle: Callable[[Any], Any] | None = None,
    progress: Callable[[runner.Progress], None] | None = None,
) -> runner.ExplorationResult:
    """Explores like :func:`runner.explore` with ``config.strategy`` in SHARDED_STRATEGIES, on
    ``config.jobs`` worker processes; the result counts every worker's executions."""
    jobs, strategy = config.jobs, config.strategy
    if strategy not in SHARDED_STRATEGIES:
        raise ValueError(f"parallel.explore: strategy {strategy} is not sharded")
    if not supported():
        raise InputError("--jobs above 1 needs os.fork, which this platform does not have")
    budget = config.max_executions
    shares = [None if budget is None else len(range(k, budget, jobs)) for k in range(jobs)]
    shards = [k for k in range(jobs) if shares[k] != 0]
    started = time.monotonic()
    board_map = mmap.mmap(-1, 2 * jobs * _SLOT)
    board = memoryview(board_map).cast("Q")
    for k in range(jobs):
        board[k] = runner._Shard.NO_FAILURE
        board[jobs + k] = 0
    parent = os.getpid()
    _prctl()  # looked up (imports ctypes) here: a worker only calls it
    workers: dict[int, tuple[int, int]] = {}  # shard -> (pid, read end; -1 once closed)
    chunks: dict[int, list[bytes]] = {}  # shard -> its report's bytes read so far
    finished = False
    with _sigterm_reaps():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            for k in shards:
                share = shares[k]
                read_end, write_end = os.pipe()
                work = functools.partial(
                    _work, factory, config, share, oracle, k, jobs, board, read_end, write_end
                )
                try:
                    workers[k] = (_fork(work, parent), read_end)
                finally:
                    os.close(write_end)  # the worker's end: its report ends when it closes it
            tick = _progress_tick(workers, board, jobs, config, progress, started)
            _read(workers, chunks, tick=tick)
            reports = _reports(chunks, strict=True)
            if any(rep.interrupted for rep in reports.values()):
                # a Ctrl-C that reached a worker only (kill -INT): the user's, for the whole run
                runner.note_user_interrupt()
                raise KeyboardInterrupt
            finished = True
        except KeyboardInterrupt:
            # the user's (the CLI's SIGINT handler, or Python's): each worker sends what it
            # found so far; a second Ctrl-C during the grace ends the wait (the finally kills)
            _stop(workers, chunks)
            runner.note_interrupted_exploration(
                _interrupted(config, _reports(chunks, strict=False), board, jobs, started)
            )
            raise
        finally:
            statuses = _reap(workers, kill=not finished)
            board.release()
            board_map.close()
    for k, status in statuses.items():
        if k not in reports:  # it died before sending its counts: none of them may be dropped
            code = os.waitstatus_to_exitcode(status)
            raise (InputError if code == 2 else RuntimeError)(
                f"--jobs: worker {k} ended without its report (exit status {code})"
            )
    return _merge(factory, config, oracle, reports, started)


@functools.cache
def _prctl() -> Any:
    """libc's prctl on Linux, or None (another system, or no ctypes)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None


def die_with_parent(parent: int) -> None:
    """In a process just forked from `parent`: the kernel kills it when `parent` dies (Linux;
    elsewhere only the caller's own checks of os.getppid see that), and it ends at once when
    `parent` died before the prctl (the fork's race: then it was already reparented)."""
    prctl = _prctl()
    if prctl is not None:
        # the signal comes when the thread that forked ends: parallel.explore's, which waits
        # for this worker before it returns
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(_ORPHANED)


def _fork(work: Callable[[int], None], parent: int) -> int:
    """os.fork; the child runs ``work(parent)``, which never returns.  Whatever reaches the
    child before that (a signal just after the fork) ends it: this process's code never runs
    twice."""
    try:
        with warnings.catch_warnings():
            # 3.12+ warns about fork in a process with threads (the watchdog's, which holds
            # no lock the worker needs)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            work(parent)
    except BaseException:
        if os.getpid() != parent:
            os._exit(_ORPHANED)
        raise
    return pid


class _Terminated(BaseException):
    """SIGTERM while the workers run (_sigterm_reaps)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


@contextlib.contextmanager
def _sigterm_reaps() -> Iterator[None]:
    """SIGTERM during the block (its default disposition, in the main thread) unwinds it, so
    that the workers are killed and waited for, then ends this process as SIGTERM does."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
        os._exit(128 + signal.SIGTERM)  # not reached: the default disposition ends the process
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _Stopping:
    """In a worker: the user's Ctrl-C was seen (the terminal's, or its parent's forward of it);
    the later ones are ignored while the worker sends its report."""

    seen = False


def _on_worker_sigint(signum: int, frame: FrameType | None) -> None:
    """A worker's SIGINT handler: cli._on_sigint's rule, once (no execution runs after the
    first: the watchdog's interrupt_main has nothing left to stop)."""
    if _Stopping.seen:
        return
    if runner.time_limit_hit():  # the watchdog's interrupt_main comes this way too
        raise KeyboardInterrupt
    _Stopping.seen = True
    runner.note_user_interrupt()
    raise KeyboardInterrupt


def _exit_if_orphaned(parent: int) -> None:
    """In a worker, between executions: its parent died (it was reparented)."""
    if os.getppid() != parent:
        os._exit(_ORPHANED)


def _work(
    factory: runner.ScenarioFactory,
    config: Config,
    share: int | None,
    oracle: Callable[[Any], Any] | None,
    shard: int,
    jobs: int,
    board: Any,
    read_end: int,
    write_end: int,
    parent: int,
) -> None:
    """A worker process (forked from `parent`): shard `shard`'s exploration, its report
    written to `write_end`; never returns."""
    die_with_parent(parent)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # _sigterm_reaps is the parent's
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _on_worker_sigint)
    status = 0
    report = WorkerReport(shard=shard)
    send = True
    try:
        os.close(read_end)
        runner.restart_watchdog()
        runner.set_shard(shard, jobs, board)
        try:
            res = runner.explore(
                factory,
                config=config.replace(max_executions=share),
                oracle=oracle,
                progress=lambda _p: _exit_if_orphaned(parent),
                detail_failure=False,
            )
        except KeyboardInterrupt:
            # the user's Ctrl-C (_Stopping ignores the next ones): what this shard had found
            report.interrupted, status = True, 130
            stopped = runner.take_interrupted_exploration()
            report.failure = _failure_record(config, stopped) if stopped is not None else None
        else:
            _Stopping.seen = True  # the report is final: a Ctrl-C from now on changes nothing
            report.stats = {
                "executions": res.executions,
                "failing_executions": res.failing_executions,
                "aborted": res.aborted,
                "distinct_traces": res.distinct_traces,
                "budget_hit": res.budget_hit,
                "max_depth": res.max_depth,
                "phases": res.phases,
            }
            report.failure = _failure_record(config, res)
    except KeyboardInterrupt:  # outside the exploration (the watchdog's, landing late)
        status, send = 130, False
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        report.error = (type(exc).__name__, str(exc))
    try:
        if send:
            data = pickle.dumps(report)
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
        os.close(write_end)
    finally:
        os._exit(status)


def _failure_record(config: Config, res: runner.ExplorationResult) -> dict[str, Any] | None:
    """A worker's chosen failing execution: its schedule and actor table (replayed by the
    parent), its global index and size (the choice among the workers'), and its named steps
    and failure (an interrupted run's schedule file, written without a replay)."""
    best = res.first_failure if config.stop_on_failure else res.minimal_failure
    if best is None:
        return None
    return {
        "schedule": best.schedule,
        "actor_paths": list(best.actor_paths),
        "index": runner._Shard.global_index(best.index),
        "deviations": best.deviations,
        "steps": len(best.steps),
        "named_steps": list(best.steps),
        "failure": best.failure,
    }


def _progress_tick(
    workers: dict[int, tuple[int, int]],
    board: Any,
    jobs: int,
    config: Config,
    progress: Callable[[runner.Progress], None] | None,
    started: float,
) -> Callable[[], None] | None:
    """`progress` called with the board's counts (or None without one)."""
    if progress is None:
        return None
    call = progress

    def tick() -> None:
        done = sum(int(board[jobs + k]) for k in workers)
        failed = sum(board[k] != runner._Shard.NO_FAILURE for k in workers)
        call(
            runner.Progress(
                config.strategy,
                done,
                failed,
                0,
                time.monotonic() - started,
                config.max_executions,
                config.time_limit,
            )
        )

    return tick


def _read(
    workers: dict[int, tuple[int, int]],
    chunks: dict[int, list[bytes]],
    *,
    tick: Callable[[], None] | None = None,
    deadline: float | None = None,
) -> None:
    """Reads the workers' open report pipes into `chunks` until each is closed (its worker
    wrote its report and ended) or `deadline` (time.monotonic()) passes; calls `tick` every
    0.1 s meanwhile.  Without a deadline, the user's Ctrl-C stops it.  A closed end is marked
    in `workers` before it is closed (an interrupt in between leaks it, never closes another
    file twice)."""
    open_ends = {fd: k for k, (_pid, fd) in workers.items() if fd >= 0}
    with selectors.DefaultSelector() as sel:
        for fd in open_ends:
            sel.register(fd, selectors.EVENT_READ)
        while open_ends:
            wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if wait <= 0:
                return
            for key, _ in sel.select(timeout=wait):
                fd = int(key.fd)
                data = os.read(fd, 1 << 16)
                k = open_ends[fd]
                if data:
                    chunks.setdefault(k, []).append(data)
                else:
                    workers[k] = (workers[k][0], -1)
                    del open_ends[fd]
                    sel.unregister(fd)
                    os.close(fd)
            if deadline is None and runner.user_interrupted():
                # the user's Ctrl-C whose KeyboardInterrupt the interpreter swallowed (raised
                # in a weakref callback or a __del__: an unraisable exception)
                raise KeyboardInterrupt
            if tick is not None:
                tick()


def _reports(chunks: dict[int, list[bytes]], *, strict: bool) -> dict[int, WorkerReport]:
    """The workers' reports; not `strict` (after an interrupt) one cut short is left out."""
    reports: dict[int, WorkerReport] = {}
    for k, parts in chunks.items():
        try:
            reports[k] = pickle.loads(b"".join(parts))
        except Exception:
            if strict:
                raise
    return reports


def _stop(workers: dict[int, tuple[int, int]], chunks: dict[int, list[bytes]]) -> None:
    """After the user's Ctrl-C: the workers still running are sent SIGINT (those the terminal
    sent it to already take only one) and their reports read for STOP_GRACE seconds."""
    for pid, fd in workers.values():
        if fd >= 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
    _read(workers, chunks, deadline=time.monotonic() + STOP_GRACE)


def _interrupted(
    config: Config,
    reports: dict[int, WorkerReport],
    board: Any,
    jobs: int,
    started: float,
) -> runner.ExplorationResult:
    """The interrupted exploration: the executions the workers ran, and the failure _merge
    would have chosen among theirs, light (its steps and failure as its worker saw them)."""
    result = runner.ExplorationResult(strategy=config.strategy, seed=config.seed)
    result.executions = sum(int(board[jobs + k]) for k in range(jobs))
    chosen = _choose(config, [r.failure for r in reports.values() if r.failure is not None])
    if chosen is not None:
        result.first_failure = result.minimal_failure = runner.ExecutionResult(
            outcome=runner.FAILED,
            failure=chosen["failure"],
            steps=list(chosen["named_steps"]),
            actor_paths=[tuple(p) for p in chosen["actor_paths"]],
            deviations=chosen["deviations"],
            index=chosen["index"],
            strategy=config.strategy,
            seed=config.seed,
        )
    result.explore_seconds = time.monotonic() - started
    return result


def _reap(workers: dict[int, tuple[int, int]], *, kill: bool) -> dict[int, int]:
    """Closes the read ends still open and waits for every worker, first killing them when
    `kill` (the parent is stopping early); returns each worker's wait status."""
    statuses: dict[int, int] = {}
    for k, (pid, fd) in workers.items():
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            if kill:
                os.kill(pid, signal.SIGKILL)
            statuses[k] = os.waitpid(pid, 0)[1]
        except (ChildProcessError, ProcessLookupError):
            pass
    return statuses


def merge_into(result: runner.ExplorationResult, part: runner.ExplorationResult) -> None:
    """Adds a parallel phase's counts and failures to an exploration's result (strategy auto:
    dpor in one process, then pct on the workers)."""
    result.executions += part.executions
    result.failing_executions += part.failing_executions
    result.aborted += part.aborted
    result.distinct_traces += part.distinct_traces
    result.distinct_traces_exact = result.distinct_traces_exact and part.distinct_traces_exact
    result.max_depth = max(result.max_depth, part.max_depth)
    result.budget_hit = result.budget_hit or part.budget_hit
    result.phases.extend(part.phases)
    if part.first_failure is not None and result.first_failure is None:
        result.first_failure = part.first_failure
    if part.minimal_failure is not None and runner._better(
        part.minimal_failure, result.minimal_failure
    ):
        result.minimal_failure = part.minimal_failure


def _choose(config: Config, failures: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The failure the exploration reports among the workers' (_failure_record): with
    stop_on_failure the one of the smallest global index (one process's), else the minimal."""
    if not failures:
        return None
    if config.stop_on_failure:
        return min(failures, key=lambda f: f["index"])
    return min(failures, key=lambda f: (f["deviations"], f["steps"], f["index"]))


def _merge(
    factory: runner.ScenarioFactory,
    config: Config,
    oracle: Callable[[Any], Any] | None,
    reports: dict[int, WorkerReport],
    started: float,
) -> runner.ExplorationResult:
    for rep in reports.values():
        if rep.error is not None:
            name, message = rep.error
            if name in ("NondeterminismError", "ScheduleDivergedError"):
                raise NondeterminismError(message)
            if name == "InputError":
                raise InputError(message)
            raise RuntimeError(f"a --jobs worker failed: {name}: {message}")
    result = runner.ExplorationResult(strategy=config.strategy, seed=config.seed)
    for rep in reports.values():
        st = rep.stats
        result.executions += st["executions"]
        result.failing_executions += st["failing_executions"]
        result.aborted += st["aborted"]
        result.distinct_traces = max(result.distinct_traces, st["distinct_traces"])
        result.max_depth = max(result.max_depth, st["max_depth"])
        result.budget_hit = result.budget_hit or st["budget_hit"]
        for phase in st["phases"]:
            result.phases.append(dict(phase, shard=rep.shard))
    result.distinct_traces_exact = False
    chosen = _choose(config, [rep.failure for rep in reports.values() if rep.failure is not None])
    if chosen is not None:
        detailed = runner.run_once(
            factory,
            schedule=chosen["schedule"],
            actor_paths=[tuple(p) for p in chosen["actor_paths"]],
            oracle=oracle,
            detailed=True,
            config=config,
        )
        if not detailed.failed:
            raise NondeterminismError(
                f"the failing schedule of execution {chosen['index']} (found by a --jobs "
                "worker) passes when replayed in the main process"
            )
        detailed.index = chosen["index"]
        detailed.strategy = config.strategy
        detailed.seed = config.seed
        detailed.deviations = chosen["deviations"]
        result.first_failure = result.minimal_failure = detailed
    result.complete = False
    result.explore_seconds = time.monotonic() - started
    return result
