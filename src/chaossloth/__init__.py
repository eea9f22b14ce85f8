"""ChaosSloth: deterministic concurrency verification for Python asyncio."""

from __future__ import annotations

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
