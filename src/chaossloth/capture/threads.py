"""The threads a program starts while it runs on the controlled loop, made known to that loop.

A thread the program starts may complete a future through ``call_soon_threadsafe`` (the
canonical idiom, ``run_coroutine_threadsafe``, ``wrap_future`` of a thread pool's future): an
external event the controlled loop waits for when nothing else is ready (loop.py, "External
events").  While a controlled loop runs (its run_forever calls :func:`begin` .. :func:`end`),
``threading.Thread.start`` tells the loop running in the starting thread, if it is a
controlled one, about the thread it started; a thread started by ChaosSloth's own code, or
with no controlled loop running in the starting thread, is not told of.  Nested runs (a loop
run inside another thread's step) share one installation, counted.  Stage 4's stock loop
(jitter.py) is told the same way, and both loops decide when to stop waiting for the threads
with :class:`Settling`.
"""

from __future__ import annotations

import asyncio.events
import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

from chaossloth.capture.escapes import tool_frame

_real_start = threading.Thread.start
_get_running_loop = asyncio.events._get_running_loop
_monotonic = time.monotonic  # the real clock: capture/entropy.py may replace time.monotonic
_getframe = sys._getframe
_depth = 0


def _start(self: threading.Thread) -> None:
    _real_start(self)
    loop: Any = _get_running_loop()
    started = getattr(loop, "_cs_thread_started", None)
    if started is None:
        return
    if not tool_frame(_getframe(1)):
        started(self)


_start.__name__ = _start.__qualname__ = "start"
_start.__module__ = "threading"
_start.__doc__ = _real_start.__doc__


#: how long a loop sleeps between two looks at the threads it waits for (seconds)
POLL = 0.0002
#: consecutive looks, with POLL sleeps between them, on which every thread that has not sent
#: must be seen waiting: one woken in C (a queue's get that took an item) still shows the
#: waiting frame until it takes the GIL and runs again
LOOKS = 3
#: how long a thread that is only seen still (see Settling) must stay still before a loop
#: with nothing else to run, no timer pending, calls the wait for it over (seconds)
CONFIRM = 0.5


class Settling:
    """One idle wait of a loop for the threads the program started: settled once every one of
    them that is alive has sent an event during the wait, or the ones that have not are seen
    waiting on LOOKS looks in a row.  A thread waits when its Python frame shows it
    (:func:`blocked`), or when it is *still*: in an untimed futex wait with its CPU time
    unchanged since the previous look -- blocked in a C call made from its own code (a
    ``queue.SimpleQueue.get()``, a ``Lock.acquire()``) that no frame shows (_waits_untimed).
    What it waits for may be a thread outside the program's (a C library's own), so with
    `confirm` (the wait before a deadlock verdict) stillness counts only once it has lasted
    CONFIRM seconds; an event that comes after a wait settled is delivered at a later idle
    point, and the controlled loop calls that placement incomplete.
    ``still_only``: the last look counted a thread as waiting by its stillness alone."""

    def __init__(self, threads: Iterable[threading.Thread], *, confirm: bool = False) -> None:
        self.threads = list(threads)
        self.confirm = confirm
        self.looks = 0
        self.still_only = False
        self._cpu: dict[int, int] = {}
        self._still_since: dict[int, float] = {}

    def settled(self, sent: set[int | None]) -> bool:
        """One look, `sent` the idents of the threads that sent an event so far."""
        unsent = [t for t in self.threads if t.is_alive() and t.ident not in sent]
        if not unsent:
            return True
        now = _monotonic()
        waiting, still_only = True, False
        for t in unsent:
            still = self._still(t, now)
            if blocked(t):
                continue
            if still and (not self.confirm or now - self._still_since[t.ident] >= CONFIRM):  # type: ignore[index]
                still_only = True
                continue
            waiting = False
        self.looks = self.looks + 1 if waiting else 0
        self.still_only = still_only
        return self.looks >= LOOKS

    def _still(self, thread: threading.Thread, now: float) -> bool:
        ident = thread.ident
        if ident is None:
            return False
        cpu = _cpu_ns(thread)
        before = self._cpu.get(ident)
        if cpu is None:
            self._cpu.pop(ident, None)
            return False
        self._cpu[ident] = cpu
        if before != cpu or not _waits_untimed(thread):
            self._still_since.pop(ident, None)
            return False
        self._still_since.setdefault(ident, now)
        return True


def _cpu_ns(thread: threading.Thread) -> int | None:
    """The CPU time `thread` has used (nanoseconds), or None where that cannot be read."""
    try:
        return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))  # type: ignore[arg-type]
    except (OSError, AttributeError, TypeError, OverflowError):
        return None


#: the futex system call's number, by machine (Linux); elsewhere no thread is ever still
_FUTEX = {"x86_64": 202, "aarch64": 98, "riscv64": 98, "ppc64le": 221, "s390x": 238}.get(
    os.uname().machine if hasattr(os, "uname") else ""
)


def _waits_untimed(thread: threading.Thread) -> bool:
    """Linux: the thread sleeps (state S) in a futex wait with no timeout: a lock, semaphore
    or condition of C code (``SimpleQueue.get()``, ``Lock.acquire()``) that only another
    thread's release ends.  A timed wait (``get(timeout=)``, the GIL's), a ``time.sleep``, a
    socket's read or a disk's are not: time or the outside world ends those by themselves."""
    if _FUTEX is None:
        return False
    base = f"/proc/self/task/{thread.native_id}/"
    try:
        with open(base + "stat", "rb") as f:
            stat = f.read()
        with open(base + "syscall", "rb") as f:
            call = f.read().split()
    except OSError:
        return False
    end = stat.rindex(b")")
    if stat[end + 2 : end + 3] != b"S" or len(call) < 5:
        return False
    try:
        return int(call[0]) == _FUTEX and int(call[4], 16) == 0
    except ValueError:  # "running", or fields this parser does not know
        return False


def blocked(thread: threading.Thread) -> bool:
    """Whether `thread` waits for something that has not happened yet, so that it sends
    nothing until another thread (the loop's, through the program) acts: its innermost Python
    frame is a ``threading.Condition.wait`` not yet notified (under ``Event.wait``,
    ``Queue.get``, ``Future.result``, ``Semaphore.acquire``), a join of a live thread, an idle
    thread-pool worker with nothing queued, or a ``select``.  A thread blocked in a C call made
    from its own code is seen by Settling's stillness instead."""
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    if frame is None:
        return False
    code = frame.f_code
    where = (code.co_filename.rsplit("/", 1)[-1].rsplit("\\", 1)[-1], code.co_name)
    try:
        if where == ("threading.py", "wait"):
            waiter = frame.f_locals.get("waiter")
            return waiter is not None and waiter.locked()
        if where == ("threading.py", "_wait_for_tstate_lock"):
            lock = frame.f_locals.get("lock")
            return lock is not None and lock.locked()
        if where == ("thread.py", "_worker"):
            queue = frame.f_locals.get("work_queue")
            return queue is not None and queue.empty()
    except Exception:  # noqa: BLE001 - a frame mid-change: not known to wait
        return False
    return where == ("selectors.py", "select")


def begin() -> None:
    global _depth
    _depth += 1
    if _depth == 1:
        threading.Thread.start = _start  # type: ignore[method-assign]


def end() -> None:
    global _depth
    if _depth == 0:
        return
    _depth -= 1
    if _depth == 0:
        threading.Thread.start = _real_start  # type: ignore[method-assign]
