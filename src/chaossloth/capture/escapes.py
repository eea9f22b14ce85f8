"""The calls by which a program could end or steer the verifier's own process, contained.

The program runs in ChaosSloth's process.  A call that ends that process (``os._exit``,
``os.abort``), signals it (``os.kill`` of its own pid or group, ``os.killpg``,
``signal.raise_signal``, ``signal.pthread_kill``) or changes what it does on a signal or at exit
(``signal.signal``, ``atexit.register``) would otherwise decide the verdict: ``os._exit(0)`` is
the exit status CI reads as "no failing schedule".  While a program is loaded (:func:`begin` ..
:func:`end`, with the rest of its capture):

- a call that would end or signal the process is not made: it is recorded (the first one, with
  the program's file and line) and raises :class:`ProcessEnding`, a BaseException so that an
  ``except Exception`` of the program's does not swallow it.  The run of the program that made
  it ends there, and the verifier reports the call as one input error (exit 2,
  :func:`raise_if_called`), whatever the program did with the exception: the record, not the
  exception, decides.  A signal 0 (a liveness probe) and a signal to another process are the
  real calls;
- ``signal.signal`` and ``signal.getsignal`` use a table of the program's own: its handlers are
  kept and returned, never installed (no signal is delivered to the program while it is
  verified; the user's Ctrl-C stays the verifier's);
- ``atexit.register`` keeps the program's exit handlers in a list of its own, dropped when the
  program is released: the verifier's exit is not the program's.

A call from ChaosSloth's own code (a ``--jobs`` worker ending with ``os._exit``) is the real
one.  Nested programs (stage 7 loads the patched copy while the original is loaded) share one
installation, counted.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from typing import Any

from chaossloth.errors import InputError


class ProcessEnding(BaseException):
    """Raised in the program in place of a call that would end or signal the verifier's
    process; the call is reported by :func:`raise_if_called`."""


_real = {
    "_exit": os._exit,
    "abort": os.abort,
    "kill": os.kill,
    "killpg": os.killpg,
    "raise_signal": signal.raise_signal,
    "pthread_kill": signal.pthread_kill,
    "signal": signal.signal,
    "getsignal": signal.getsignal,
    "register": atexit.register,
    "unregister": atexit.unregister,
}
_getframe = sys._getframe

#: the first process-ending call the program made, described, until raise_if_called reports it
_called: str | None = None
#: how many programs are loaded (begin .. end)
_depth = 0
#: the program's signal handlers, by signal number (signal.signal while loaded)
_handlers: dict[int, Any] = {}
#: the program's exit handlers (atexit.register while loaded)
_exit_handlers: list[Any] = []


def tool_frame(frame: Any) -> bool:
    """Whether `frame` runs ChaosSloth's own code (a module of the chaossloth package): the
    functions that replace the program's view of the process (here, capture.entropy,
    capture.threads) are the real ones for it."""
    name = frame.f_globals.get("__name__")
    return type(name) is str and (name == "chaossloth" or name.startswith("chaossloth."))


def _caller() -> tuple[bool, str]:
    """Whether the caller of the replaced function is ChaosSloth's own code, and its
    ``file:line``."""
    frame = _getframe(2)
    return tool_frame(frame), f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _refuse(call: str, where: str) -> ProcessEnding:
    global _called
    if _called is None:
        _called = (
            f"{where}: the program called {call}, which would end or signal ChaosSloth's own "
            "process (the program runs inside it): a scenario ends by returning or raising "
            "(sys.exit is reported as the execution's failure)"
        )
    return ProcessEnding(call)


def _exit(status: int) -> None:
    ours, where = _caller()
    if ours:
        _real["_exit"](status)
    raise _refuse(f"os._exit({status!r})", where)


def _abort() -> None:
    ours, where = _caller()
    if ours:
        _real["abort"]()
    raise _refuse("os.abort()", where)


def _own_group(pgid: int) -> bool:
    try:
        return pgid == 0 or pgid == os.getpgrp()
    except OSError:  # pragma: no cover - getpgrp does not fail on POSIX
        return False


def _kill(pid: int, sig: int) -> None:
    ours, where = _caller()
    targets_us = pid == os.getpid() or pid == 0 or (pid < -1 and _own_group(-pid)) or pid == -1
    if ours or sig == 0 or not targets_us:
        _real["kill"](pid, sig)
        return
    raise _refuse(f"os.kill({pid}, {_signal_name(sig)})", where)


def _killpg(pgid: int, sig: int) -> None:
    ours, where = _caller()
    if ours or sig == 0 or not _own_group(pgid):
        _real["killpg"](pgid, sig)
        return
    raise _refuse(f"os.killpg({pgid}, {_signal_name(sig)})", where)


def _raise_signal(sig: int) -> None:
    ours, where = _caller()
    if ours:
        _real["raise_signal"](sig)
        return
    raise _refuse(f"signal.raise_signal({_signal_name(sig)})", where)


def _pthread_kill(thread_id: int, sig: int) -> None:
    ours, where = _caller()
    if ours or sig == 0:
        _real["pthread_kill"](thread_id, sig)
        return
    raise _refuse(f"signal.pthread_kill({thread_id}, {_signal_name(sig)})", where)


def _signal_name(sig: Any) -> str:
    try:
        return signal.Signals(sig).name
    except (ValueError, TypeError):
        return repr(sig)


def _signal(signalnum: Any, handler: Any) -> Any:
    ours, _ = _caller()
    if ours:
        return _real["signal"](signalnum, handler)
    # the real function's checks (a valid signal number, a callable or SIG_DFL/SIG_IGN), without
    # installing anything: getsignal validates the number, the handler is checked here
    previous = _program_handler(signalnum)
    if not callable(handler) and handler not in (signal.SIG_DFL, signal.SIG_IGN):
        raise TypeError(
            "signal handler must be signal.SIG_IGN, signal.SIG_DFL, or a callable object"
        )
    _handlers[int(signalnum)] = handler
    return previous


def _program_handler(signalnum: Any) -> Any:
    """The handler the program set for `signalnum`, or the one installed (a ValueError for
    an invalid number, as the real getsignal raises)."""
    real = _real["getsignal"](signalnum)
    return _handlers.get(int(signalnum), real)


def _getsignal(signalnum: Any) -> Any:
    ours, _ = _caller()
    if ours:
        return _real["getsignal"](signalnum)
    return _program_handler(signalnum)


def _register(func: Any, *args: Any, **kwargs: Any) -> Any:
    ours, _ = _caller()
    if ours:
        return _real["register"](func, *args, **kwargs)
    if not callable(func):
        raise TypeError("the first argument must be callable")
    _exit_handlers.append(func)
    return func


def _unregister(func: Any) -> None:
    _exit_handlers[:] = [f for f in _exit_handlers if f != func]
    _real["unregister"](func)


_REPLACED: tuple[tuple[Any, str, Any], ...] = (
    (os, "_exit", _exit),
    (os, "abort", _abort),
    (os, "kill", _kill),
    (os, "killpg", _killpg),
    (signal, "raise_signal", _raise_signal),
    (signal, "pthread_kill", _pthread_kill),
    (signal, "signal", _signal),
    (signal, "getsignal", _getsignal),
    (atexit, "register", _register),
    (atexit, "unregister", _unregister),
)
for _module, _name, _replacement in _REPLACED:
    _replacement.__name__ = _replacement.__qualname__ = _name
    _replacement.__module__ = _module.__name__
    _replacement.__doc__ = _real[_name].__doc__


def begin() -> None:
    """A program starts loading: the calls above are contained until the matching end."""
    global _depth
    _depth += 1
    if _depth == 1:
        for module, name, replacement in _REPLACED:
            setattr(module, name, replacement)


def end() -> None:
    """A program is released; the last one puts the real functions back and drops the
    program's signal and exit handlers."""
    global _depth
    if _depth == 0:
        return
    _depth -= 1
    if _depth == 0:
        for module, name, _ in _REPLACED:
            setattr(module, name, _real[name])
        _handlers.clear()
        _exit_handlers.clear()


def take() -> str | None:
    """The report of the first process-ending call the program made since the last one was
    taken, or None."""
    global _called
    message, _called = _called, None
    return message


def raise_if_called() -> None:
    """Raises the InputError that reports the first process-ending call the program made
    since the last report, if it made one."""
    message = take()
    if message is not None:
        raise InputError(message)
