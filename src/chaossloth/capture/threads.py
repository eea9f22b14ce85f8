"""The threads a program starts while it runs on the controlled loop, made known to that loop.

A thread the program starts may complete a future through ``call_soon_threadsafe`` (the
canonical idiom, ``run_coroutine_threadsafe``, ``wrap_future`` of a thread pool's future): an
external event the controlled loop waits for when nothing else is ready (loop.py, "External
events").  While a controlled loop runs (its run_forever calls :func:`begin` .. :func:`end`),
``threading.Thread.start`` tells the loop running in the starting thread, if it is a
controlled one, about the thread it started; a thread started by ChaosSloth's own code, or
with no controlled loop running in the starting thread, is not told of.  Nested runs (a loop
run inside another thread's step) share one installation, counted.
"""

from __future__ import annotations

import asyncio.events
import sys
import threading
from typing import Any

from chaossloth.capture.escapes import tool_frame

_real_start = threading.Thread.start
_get_running_loop = asyncio.events._get_running_loop
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
