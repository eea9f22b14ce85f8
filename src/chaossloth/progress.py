"""The progress line of long explorations, on a terminal.

``runner.explore(..., progress=line)`` calls ``line`` with a :class:`~chaossloth.runner.Progress`
every ~0.1 s and once at the end. :class:`ProgressLine` turns these into one line that rewrites
itself (``\\r``) on its stream:

    dpor: 12408 executions, 4127/s, 3 failing, 3.0s elapsed, budget 10s

Decisions:

* Shown only when the stream is a terminal (a pipe or a file gets nothing, so logs and reports
  stay clean), and only once the exploration has run for more than ``delay`` (1 s): short runs
  never flash a line.
* Elapsed time is the line's own, from the first report (minus the time the runner says had
  already passed): the runner's ``elapsed`` restarts with each phase of ``auto`` (dpor, then
  pct), while the executions it reports are cumulative.
* The line never wraps (a wrapped line cannot be rewritten with ``\\r``): it is cut to the
  terminal's width. Clearing overwrites it with spaces, so no escape sequences are needed.
* Whatever else is written to the terminal must clear the line first: :class:`ClearingWriter`
  wraps the stdout stream the stage printer writes to, so the stage that follows the
  exploration starts on a clean line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Self, TextIO

DELAY = 1.0
MIN_INTERVAL = 0.1


def is_terminal(stream: Any) -> bool:
    """True if `stream` is an interactive terminal (and not a dumb one)."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False
    return tty and os.environ.get("TERM") != "dumb"


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def _limit(s: float) -> str:
    return f"{s:g}s" if s < 60 else _seconds(s)


def format_budget(max_executions: int | None, time_limit: float | None) -> str:
    parts = []
    if max_executions:
        parts.append(f"{max_executions} executions")
    if time_limit:
        parts.append(_limit(time_limit))
    return "budget " + " or ".join(parts) if parts else "no budget"


def format_line(
    strategy: str,
    executions: int,
    failing: int,
    elapsed: float,
    max_executions: int | None,
    time_limit: float | None,
) -> str:
    """The progress line's text (without the leading carriage return)."""
    rate = executions / elapsed if elapsed > 0 else 0.0
    return (
        f"{strategy}: {executions} executions, {rate:.0f}/s, {failing} failing, "
        f"{_seconds(elapsed)} elapsed, {format_budget(max_executions, time_limit)}"
    )


def _width(stream: Any) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return max(20, columns) if columns > 0 else 80  # 0: a terminal that does not say


class ProgressLine:
    """A callable for ``runner.explore(progress=...)`` that keeps one self-overwriting line on
    `stream`.

    `enabled` defaults to whether `stream` is a terminal; `budget` (max executions, seconds)
    overrides the budget the runner reports (the runner reports the current phase's share);
    `clock` and `width` are for tests."""

    def __init__(
        self,
        stream: TextIO,
        *,
        enabled: bool | None = None,
        delay: float = DELAY,
        min_interval: float = MIN_INTERVAL,
        budget: tuple[int | None, float | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        width: int | None = None,
    ) -> None:
        self.stream = stream
        self.enabled = is_terminal(stream) if enabled is None else enabled
        self.delay = delay
        self.min_interval = min_interval
        self.budget = budget
        self.clock = clock
        self.width = width
        self._t0: float | None = None
        self._last_draw: float | None = None
        self._shown = 0  # characters of the line now on the terminal (0: nothing shown)
        self._closed = False

    @property
    def visible(self) -> bool:
        return self._shown > 0

    def __call__(self, p: Any) -> None:
        if not self.enabled or self._closed:
            return
        now = self.clock()
        if self._t0 is None:
            self._t0 = now - max(0.0, float(p.elapsed))
        elapsed = now - self._t0
        if elapsed < self.delay:
            return
        if self._last_draw is not None and now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        budget = self.budget
        max_exec, limit = budget if budget is not None else (p.max_executions, p.time_limit)
        text = format_line(p.strategy, p.executions, p.failing, elapsed, max_exec, limit)
        width = self.width if self.width is not None else _width(self.stream)
        text = text[: max(1, width - 1)]
        pad = " " * max(0, self._shown - len(text))
        self._write("\r" + text + pad)
        self._shown = len(text)

    def clear(self) -> None:
        """Erases the line (if shown) and leaves the cursor at the start of the empty line."""
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def close(self) -> None:
        """Clears the line; later reports draw nothing."""
        self.clear()
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, never fail
            self._closed = True
            self._shown = 0


class ClearingWriter:
    """A text stream that clears `line` before anything is written to `out`, so that output on
    the same terminal never lands after a half-drawn progress line."""

    def __init__(self, out: TextIO, line: ProgressLine) -> None:
        self.out = out
        self.line = line

    def write(self, text: str) -> int:
        if text:
            self.line.clear()
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


__all__ = ["ClearingWriter", "ProgressLine", "format_budget", "format_line", "is_terminal"]
