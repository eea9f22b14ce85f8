"""The program's own output, captured per run of it, as pytest captures a test's.

An exploration runs the program hundreds of times: its prints would fill the terminal (a
scenario that prints 100 MB once wrote 629 MB), interleaved with the report.  While the program
runs (:func:`captured`, around every execution and every stock-loop run of stage 4),
``sys.stdout`` and ``sys.stderr`` are one bounded buffer of that run: the first
:data:`KEEP` characters are kept, the rest counted.  The report shows the output of the
execution it reports (the failing schedule's replay), once.  Output written to the file
descriptors themselves (``os.write(1, ...)``, a C library's printf) and by handlers that hold the
original streams (a ``logging.StreamHandler`` made before the run) is not captured.

A program that closes ``sys.stdout`` closes its run's buffer only: its later prints raise
``ValueError`` as they would, and the report is written to the real stream.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator

#: characters of a run's output kept (the rest is counted)
KEEP = 64 * 1024
#: False under the pytest plugin, which leaves the test's output to pytest's own capture
ENABLED = True


class RunOutput(io.TextIOBase):
    """The stdout and stderr of one run of the program: bounded, never a file descriptor."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._kept = 0
        #: characters written in all
        self.written = 0

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "backslashreplace"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        self.written += n
        room = KEEP - self._kept
        if room > 0:
            part = s[:room]
            self._parts.append(part)
            self._kept += len(part)
        return n

    def text(self) -> str:
        """What the run wrote, as kept."""
        return "".join(self._parts)

    @property
    def truncated(self) -> int:
        """Characters written beyond what was kept."""
        return self.written - self._kept


@contextlib.contextmanager
def captured() -> Iterator[RunOutput | None]:
    """``sys.stdout`` and ``sys.stderr`` are one RunOutput while the block runs; the streams
    that were there before are put back after it, whatever the program rebound them to.  With
    capture off (ENABLED), nothing is redirected and the block gets None."""
    if not ENABLED:
        yield None
        return
    out = RunOutput()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        yield out
    finally:
        sys.stdout, sys.stderr = saved
