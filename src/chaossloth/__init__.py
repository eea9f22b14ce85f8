"""ChaosSloth: deterministic concurrency verification for Python asyncio."""

from __future__ import annotations

import os as _os
import sys as _sys


def _fix_hash_seed() -> None:
    """The chaossloth command (the script, or ``python -m chaossloth``) runs with
    PYTHONHASHSEED=0 unless the user set it: it re-executes itself so, before anything else
    is imported.  The order of a set of strings then is the same in every run and every
    process, so a schedule that depends on it replays (``chaossloth replay``) and two runs of
    one check explore the same schedules; a program's behaviour under other hash orders is
    not explored."""
    argv = list(getattr(_sys, "orig_argv", ()))
    if _os.name != "posix" or "PYTHONHASHSEED" in _os.environ or len(argv) < 2:
        return
    script = _os.path.basename(argv[1]) == "chaossloth"
    module = "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "chaossloth"
    if not (script or module) or _sys.argv[0] not in ("-m", argv[1]):
        return
    _os.environ["PYTHONHASHSEED"] = "0"
    try:
        _os.execv(_sys.executable, argv)
    except OSError:  # cannot re-execute: runs on with the random seed
        del _os.environ["PYTHONHASHSEED"]


_fix_hash_seed()

# first: refuses an unsupported interpreter with one message (chaossloth.compat)
from chaossloth import compat as _compat  # noqa: F401
from chaossloth.errors import (
    ChaosSlothError,
    DeadlockError,
    InputError,
    NondeterminismError,
    ScheduleDivergedError,
    StepBudgetExceeded,
    UnsupportedOperation,
)
from chaossloth.loop import ControlledLoop, EventLoopPolicy, new_event_loop, run

__version__ = "0.1.0"

__all__ = [
    "ChaosSlothError",
    "ControlledLoop",
    "DeadlockError",
    "EventLoopPolicy",
    "InputError",
    "NondeterminismError",
    "ScheduleDivergedError",
    "StepBudgetExceeded",
    "UnsupportedOperation",
    "new_event_loop",
    "run",
]
