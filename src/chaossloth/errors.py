"""The exceptions ChaosSloth raises at its users.

Every error a user can meet derives from :class:`ChaosSlothError`; the names below are imported
by the runner, the CLI and the pytest plugin, so they are stable.  Several also derive from the
builtin that stock asyncio would raise in the same situation, so code written against stock
asyncio keeps catching them.
"""

from __future__ import annotations

from typing import Any


class ChaosSlothError(Exception):
    """Base of every ChaosSloth error."""


class DeadlockError(ChaosSlothError):
    """No step is enabled (nothing ready, no timer pending) while tasks still wait.

    ``blocked`` lists, for each waiting task, ``(task name, "file:line" or None, what it waits
    for)``; ``tasks`` holds the task objects in the same order.
    """

    def __init__(
        self,
        message: str,
        blocked: list[tuple[str, str | None, str]] | None = None,
        tasks: list[Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.blocked = list(blocked or [])
        self.tasks = list(tasks or [])


class StepBudgetExceeded(ChaosSlothError):
    """An execution ran more steps than its budget (a livelock, or a budget set too low)."""

    def __init__(self, message: str, steps: int | None = None) -> None:
        super().__init__(message)
        self.steps = steps


class UnsupportedOperation(ChaosSlothError, NotImplementedError):
    """A loop method that does real I/O (or signals) was called on the controlled loop."""


class NondeterminismError(ChaosSlothError, RuntimeError):
    """The program did something the controlled loop cannot make reproducible (another thread
    scheduling callbacks, wall-clock dependence detected by a replay, ...)."""


class ScheduleDivergedError(NondeterminismError):
    """A prescribed step (replay, or DPOR's prefix) was not enabled when its turn came.

    The program did not behave the same way under the same schedule, so the execution says
    nothing about the program: it is a :class:`NondeterminismError` (catch that one for both).
    ``step`` is the index of the step, ``expected`` the actor id the schedule prescribed and
    ``enabled`` the actor ids that were enabled instead.
    """

    def __init__(
        self,
        message: str,
        step: int | None = None,
        expected: int | None = None,
        enabled: list[int] | None = None,
    ) -> None:
        super().__init__(message)
        self.step = step
        self.expected = expected
        self.enabled = list(enabled or [])


class InputError(ChaosSlothError, ValueError):
    """Bad user input (arguments, files, options); the CLI exits with status 2."""


__all__ = [
    "ChaosSlothError",
    "DeadlockError",
    "InputError",
    "NondeterminismError",
    "ScheduleDivergedError",
    "StepBudgetExceeded",
    "UnsupportedOperation",
]
