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
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import selectors
import signal
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaossloth import runner
from chaossloth.config import Config
from chaossloth.errors import InputError, NondeterminismError

#: the strategies --jobs splits (the others run in one process)
SHARDED_STRATEGIES = ("random", "pct", "pos")

_SLOT = 8  # bytes of one board slot (an unsigned 64-bit integer)


@dataclass
class WorkerReport:
    """What a worker sends back (pickled through its pipe)."""

    shard: int
    stats: dict[str, Any] = field(default_factory=dict)
    #: the worker's chosen failing execution: schedule, actor table, global index, deviations
    failure: dict[str, Any] | None = None
    #: an exception that ended the worker: (class name, message)
    error: tuple[str, str] | None = None


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
    workers: dict[int, tuple[int, int]] = {}  # shard -> (pid, read end; -1 once closed)
    finished = False
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        for k in shards:
            share = shares[k]
            read_end, write_end = os.pipe()
            with warnings.catch_warnings():
                # 3.12+ warns about fork in a process with threads (the watchdog's, which holds
                # no lock the worker needs)
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # the worker: never returns
                os.close(read_end)
                _work(factory, config, share, oracle, k, jobs, board, write_end)
            os.close(write_end)
            workers[k] = (pid, read_end)
        reports = _collect(workers, board, jobs, config, progress, started)
        finished = True
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


def _work(
    factory: runner.ScenarioFactory,
    config: Config,
    share: int | None,
    oracle: Callable[[Any], Any] | None,
    shard: int,
    jobs: int,
    board: Any,
    write_end: int,
) -> None:
    """A worker process: shard `shard`'s exploration, its report written to `write_end`."""
    status = 0
    report = WorkerReport(shard=shard)
    try:
        runner.restart_watchdog()
        runner.set_shard(shard, jobs, board)
        res = runner.explore(
            factory,
            config=config.replace(max_executions=share),
            oracle=oracle,
            detail_failure=False,
        )
        report.stats = {
            "executions": res.executions,
            "failing_executions": res.failing_executions,
            "aborted": res.aborted,
            "distinct_traces": res.distinct_traces,
            "budget_hit": res.budget_hit,
            "max_depth": res.max_depth,
            "phases": res.phases,
        }
        best = res.first_failure if config.stop_on_failure else res.minimal_failure
        if best is not None:
            report.failure = {
                "schedule": best.schedule,
                "actor_paths": list(best.actor_paths),
                "index": runner._Shard.global_index(best.index),
                "deviations": best.deviations,
                "steps": len(best.steps),
            }
    except KeyboardInterrupt:
        status = 130
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        report.error = (type(exc).__name__, str(exc))
    try:
        if status == 0:
            data = pickle.dumps(report)
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
        os.close(write_end)
    finally:
        os._exit(status)


def _collect(
    workers: dict[int, tuple[int, int]],
    board: Any,
    jobs: int,
    config: Config,
    progress: Callable[[runner.Progress], None] | None,
    started: float,
) -> dict[int, WorkerReport]:
    """Reads every worker's report, calling `progress` with the board's counts meanwhile."""
    chunks: dict[int, list[bytes]] = {k: [] for k in workers}
    open_ends = {fd: k for k, (_pid, fd) in workers.items()}
    with selectors.DefaultSelector() as sel:
        for fd in open_ends:
            sel.register(fd, selectors.EVENT_READ)
        while open_ends:
            for key, _ in sel.select(timeout=0.1):
                fd = int(key.fd)
                data = os.read(fd, 1 << 16)
                if data:
                    chunks[open_ends[fd]].append(data)
                else:
                    sel.unregister(fd)
                    os.close(fd)
                    k = open_ends.pop(fd)
                    workers[k] = (workers[k][0], -1)
            if progress is not None:
                done = sum(int(board[jobs + k]) for k in workers)
                failed = sum(board[k] != runner._Shard.NO_FAILURE for k in workers)
                progress(
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
    reports: dict[int, WorkerReport] = {}
    for k, parts in chunks.items():
        if parts:
            reports[k] = pickle.loads(b"".join(parts))
    return reports


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
    failures = [rep.failure for rep in reports.values() if rep.failure is not None]
    if failures:
        if config.stop_on_failure:
            chosen = min(failures, key=lambda f: f["index"])
        else:
            chosen = min(failures, key=lambda f: (f["deviations"], f["steps"], f["index"]))
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
