"""``--jobs N`` for dpor: one exploration tree shared by up to N processes.

Between two executions, a process with a free slot gives the shallowest pending branch of its
wakeup tree to a fork of itself (``Explorer.share_offer`` / ``share_give`` in the giver,
``share_take`` in the fork): the fork explores that branch's subtree only, the giver goes on
without it.  The engine holds the position a branch was given at: the giver does not backtrack
above it until the taker has ended and its reports (the races it found that reverse at or above
that position, as wakeup sequences) are imported (``share_import``, ``share_done``); then it
goes on as if it had found them itself.  A taker can give in turn.  strategy_dpor.c states why
every trace is still explored; the tests compare the outcomes with brute force's.

What a taker sends back when it ends (pickled through its pipe): its reports, the actor table
it added (its ids are mapped to the giver's through their creation paths), its counts, whether
its part is complete, and its failing schedules (schedule and actor table: replayed by the
process that reports them).  ``complete`` is the conjunction of every process's; the
distinct-trace count is the sum of each process's new traces (a process counts the traces it
ran that its own set, inherited at the fork, did not hold), an upper bound.

Shared by every process of one exploration (made before the first fork): slots, a pipe
holding one byte per free slot (a process takes one to fork, its giver gives it back when it
has reaped it; a process waiting at a held position lends its own meanwhile); a board of two
counters (stop: a failure was found with stop-on-failure; the executions run by all, for
``max_executions``), updated under a POSIX record lock.  ``on_execution`` runs in the process
that ran the execution; the exploration's schedule log (runner.ScheduleLog, the sentinel's
record of what dpor ran) gets every process's schedules: a taker logs its own and sends them
with its report.  Needs ``os.fork``.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import pickle
import select
import signal
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

#: the counts a taker sends (keys of Explorer.stats()), summed over its own executions and
#: its takers'
COUNTS = ("executions", "failing", "aborted", "sleep_blocked", "distinct_traces")

#: seconds a process explores (since it began, or was forked) before it gives a branch away,
#: unless $CHAOSSLOTH_SHARE_AFTER says otherwise: a fork costs its two processes some tens of
#: milliseconds (the pages both then write are copied), more than a small exploration takes
#: whole (bench/jobs.py)
GIVE_AFTER = 0.05


def give_after() -> float:
    text = os.environ.get("CHAOSSLOTH_SHARE_AFTER", "").strip()
    try:
        value = float(text) if text else GIVE_AFTER
    except ValueError:
        value = -1.0
    if not value >= 0:
        from chaossloth.errors import InputError

        raise InputError(f"CHAOSSLOTH_SHARE_AFTER must be a number of seconds >= 0, not {text!r}")
    return value


@dataclass
class TakerReport:
    """What a taker sends its giver when it ends."""

    position: int
    reports: bytes = b""
    #: the actor count at the fork, and (parent, index) of every actor interned after it
    actor_base: int = 0
    actor_paths: list[tuple[int | None, int]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    max_depth: int = 0
    complete: bool = True
    budget_hit: bool = False
    traces_estimated: bool = False
    #: failing executions: {"schedule", "actor_paths", "deviations", "steps"}
    failures: list[dict[str, Any]] = field(default_factory=list)
    #: the schedules the taker and its own takers ran (runner.ScheduleLog, taker's actor
    #: ids), when the exploration keeps a log
    schedule_log: Any = None
    #: an exception that ended the taker: (class name, message)
    error: tuple[str, str] | None = None


@dataclass
class _Taker:
    pid: int
    fd: int
    position: int
    token: int
    chunks: list[bytes] = field(default_factory=list)


class Share:
    """One process's side of a shared dpor exploration (made in the first process; a fork
    carries it on as a taker)."""

    def __init__(self, jobs: int, max_executions: int | None, log: Any = None) -> None:
        self.max_executions = max_executions
        #: the exploration's runner.ScheduleLog, or None
        self.log = log
        self.slots_r, self.slots_w = os.pipe()
        os.set_blocking(self.slots_r, False)
        os.write(self.slots_w, b"." * (jobs - 1))
        self.board_map = mmap.mmap(-1, 16)
        self.board = memoryview(self.board_map).cast("Q")
        self.lock_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.takers: dict[int, _Taker] = {}
        self.taker_of: int | None = None  # the pipe to the giver, in a taker
        self.position = -1  # in a taker: the position it took
        self.base: dict[str, Any] = {}
        self.actor_base = 0
        #: what this process's takers sent: counts, failures, completeness
        self.counts = dict.fromkeys(COUNTS, 0)
        self.max_depth = 0
        self.complete = True
        self.budget_hit = False
        self.traces_estimated = False
        self.failures: list[dict[str, Any]] = []
        self.gave = 0
        self.since = time.monotonic()  # when this process began exploring
        self.give_after = give_after()

    # -- the board ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Any:
        fd = self.lock_file.fileno()
        fcntl.lockf(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)

    def stopped(self) -> bool:
        return bool(self.board[0])

    def stop(self) -> None:
        with self._locked():
            self.board[0] = 1

    def counted(self) -> None:
        """One more execution ran in this process."""
        with self._locked():
            self.board[1] += 1

    def _over_budget(self) -> bool:
        return self.max_executions is not None and self.board[1] >= self.max_executions

    # -- between executions ---------------------------------------------------------------

    def before_begin(self, ex: Any, restart: Any) -> bool:
        """Imports what takers have sent, waits where the engine holds, gives branches to
        free slots.  False: the exploration stops here (a failure elsewhere, the budget)."""
        self._poll(ex, block=False)
        while (held := ex.share_waiting()) is not None:
            # idle until the branches given there report: the slot is lent meanwhile
            os.write(self.slots_w, b".")
            while any(t.position == held for t in self.takers.values()):
                self._poll(ex, block=True)
            self._reclaim(ex)
            ex.share_resume()
        if self.stopped():
            return False
        if self._over_budget():
            self.budget_hit = True
            return False
        if time.monotonic() - self.since < self.give_after:
            return True
        while (position := ex.share_offer()) is not None:
            try:
                os.read(self.slots_r, 1)
            except BlockingIOError:
                break
            if not self._fork(ex, position, restart):
                break
        return True

    def _fork(self, ex: Any, position: int, restart: Any) -> bool:
        """Gives the branch offered at `position` to a new fork (True), or, with no process to
        be had, gives nothing and stops giving (False)."""
        try:
            read_end, write_end = os.pipe()
        except OSError:
            read_end = write_end = -1
        sys.stdout.flush()
        sys.stderr.flush()
        pid = -1
        giver = os.getpid()
        if read_end >= 0:
            with warnings.catch_warnings():
                # 3.12+ warns about fork in a process with threads (the watchdog's, which holds
                # no lock the taker needs)
                warnings.simplefilter("ignore", DeprecationWarning)
                try:
                    pid = os.fork()
                except OSError:
                    os.close(read_end)
                    os.close(write_end)
        if pid < 0:
            # no process to be had (a limit of the system): this one explores on alone, the
            # branch stays its own
            os.write(self.slots_w, b".")
            self.give_after = float("inf")
            return False
        if pid == 0:
            from chaossloth.parallel import die_with_parent  # parallel imports the runner

            # no taker outlives its giver (which reaps its takers before it ends)
            die_with_parent(giver)
            os.close(read_end)
            for t in self.takers.values():
                os.close(t.fd)
            self.takers = {}
            self.taker_of = write_end
            self.position = position
            self.counts = dict.fromkeys(COUNTS, 0)
            self.max_depth, self.complete, self.budget_hit = 0, True, False
            self.traces_estimated, self.failures, self.gave = False, [], 0
            if self.log is not None:
                self.log.restart()
            self.since = time.monotonic()
            ex.share_take(position)
            self.base = ex.stats()
            self.actor_base = _actor_count(ex)
            restart()
            return True
        os.close(write_end)
        token = ex.share_give(position)
        self.takers[pid] = _Taker(pid, read_end, position, token)
        self.gave += 1
        return True

    def _reclaim(self, ex: Any) -> None:
        """Takes a slot back, reaping the takers that end meanwhile (their giver gives their
        slots back: a process that waited for a slot without reaping could wait forever)."""
        while True:
            try:
                os.read(self.slots_r, 1)
                return
            except BlockingIOError:
                pass
            fds = [self.slots_r, *(t.fd for t in self.takers.values())]
            ready, _, _ = select.select(fds, [], [])
            if any(fd != self.slots_r for fd in ready):
                self._poll(ex, block=False)

    def _poll(self, ex: Any, *, block: bool) -> None:
        """Reads the takers' pipes; imports each ended taker's report."""
        if not self.takers:
            return
        fds = {t.fd: t for t in self.takers.values()}
        ready, _, _ = select.select(list(fds), [], [], None if block else 0)
        for fd in ready:
            t = fds[fd]
            data = os.read(fd, 1 << 16)
            if data:
                t.chunks.append(data)
                continue
            os.close(fd)
            del self.takers[t.pid]
            status = _reap(t.pid)
            os.write(self.slots_w, b".")
            if not t.chunks:
                code = os.waitstatus_to_exitcode(status)
                raise RuntimeError(
                    f"--jobs: a dpor process ended without its report (exit status {code})"
                )
            self._import(ex, t, pickle.loads(b"".join(t.chunks)))

    def _import(self, ex: Any, t: _Taker, rep: TakerReport) -> None:
        if rep.error is not None:
            self._raise(rep.error)
        amap = list(range(rep.actor_base))
        for parent, index in rep.actor_paths:
            amap.append(ex.intern(None if parent is None else amap[parent], index))
        if not self.stopped():
            ex.share_import(rep.reports, amap)
        ex.share_done(t.position, t.token)
        if self.log is not None and rep.schedule_log is not None:
            self.log.merge(rep.schedule_log, amap)
        for k in COUNTS:
            self.counts[k] += rep.counts.get(k, 0)
        self.max_depth = max(self.max_depth, rep.max_depth)
        self.complete = self.complete and rep.complete
        self.budget_hit = self.budget_hit or rep.budget_hit
        self.traces_estimated = self.traces_estimated or rep.traces_estimated
        self.failures.extend(rep.failures)

    @staticmethod
    def _raise(error: tuple[str, str]) -> None:
        from chaossloth.errors import InputError, NondeterminismError

        name, message = error
        if name == "KeyboardInterrupt":
            raise KeyboardInterrupt
        if name in ("NondeterminismError", "ScheduleDivergedError"):
            raise NondeterminismError(message)
        if name == "InputError":
            raise InputError(message)
        raise RuntimeError(f"a --jobs dpor process failed: {name}: {message}")

    # -- the end --------------------------------------------------------------------------

    def wait_all(self, ex: Any) -> None:
        """Every taker of this process ended and imported (the exploration is over here)."""
        while self.takers:
            self._poll(ex, block=True)

    def kill_all(self) -> None:
        for t in list(self.takers.values()):
            with contextlib.suppress(OSError):
                os.kill(t.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.close(t.fd)
            _reap(t.pid)
        self.takers = {}

    def finish_taker(
        self, ex: Any, failures: list[dict[str, Any]], watchdog: bool, error: BaseException | None
    ) -> None:
        """In a taker: sends its report to its giver and ends the process (never returns)."""
        status = 0
        try:
            if error is None:
                try:
                    self.wait_all(ex)
                except BaseException as exc:  # noqa: BLE001 - sent to the giver
                    error = exc
            if error is not None:
                self.kill_all()
                rep = TakerReport(self.position, error=(type(error).__name__, str(error)))
            else:
                st = ex.stats()
                paths: list[tuple[int | None, int]] = []
                while True:
                    try:
                        paths.append(ex.actor_path(self.actor_base + len(paths)))
                    except ValueError:
                        break
                counts = {k: self.counts[k] + st[k] - self.base[k] for k in COUNTS}
                rep = TakerReport(
                    self.position,
                    reports=ex.share_reports(),
                    actor_base=self.actor_base,
                    actor_paths=paths,
                    counts=counts,
                    max_depth=max(self.max_depth, st["max_depth"]),
                    complete=self.complete and bool(st["complete"]) and not watchdog,
                    budget_hit=self.budget_hit or bool(st["budget_hit"]) or watchdog,
                    traces_estimated=self.traces_estimated or bool(st["traces_estimated"]),
                    failures=self.failures + failures,
                    schedule_log=self.log,
                )
            data = pickle.dumps(rep)
            view = memoryview(data)
            assert self.taker_of is not None
            while view:
                view = view[os.write(self.taker_of, view) :]
            os.close(self.taker_of)
        except BaseException:  # noqa: BLE001 - the giver sees the missing report
            status = 1
        finally:
            os._exit(status)

    def close(self) -> None:
        """In the first process, at the end: the shared objects go (the stop flag first, so
        that the takers of a taker killed here stop at their next execution)."""
        self.stop()
        self.kill_all()
        for fd in (self.slots_r, self.slots_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.board.release()
        self.board_map.close()
        self.lock_file.close()


def _actor_count(ex: Any) -> int:
    n = 0
    while True:
        try:
            ex.actor_path(n)
        except ValueError:
            return n
        n += 1


def _reap(pid: int) -> int:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def supported() -> bool:
    return hasattr(os, "fork")
