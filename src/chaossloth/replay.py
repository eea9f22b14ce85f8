"""``chaossloth replay SCHEDULE_FILE``: re-executes a failing schedule from its file."""

from __future__ import annotations

import io
import time
import warnings
from typing import Any, TextIO

from chaossloth import report as rp
from chaossloth import schedule
from chaossloth.diagnosis import Detailed, diagram_steps
from chaossloth.errors import NondeterminismError
from chaossloth.runner import printable
from chaossloth.scenario import oracle_with_invariant


class ScheduleMismatch(Exception):
    """The schedule no longer fits the program (replay exit code 2)."""


def replay_file(
    path: str, out: TextIO | None, *, mermaid_path: str | None = None, repeat: int = 1
) -> int:
    """`chaossloth replay FILE`: 1 the failure reproduces (every time, with --repeat), 0 it
    passes now; raises ScheduleMismatch (exit 2) when the schedule no longer fits the program."""
    sched = schedule.read(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = schedule.load_program(sched)
    if mermaid_path:
        rp.check_output_path(mermaid_path)
    oracle = oracle_with_invariant(program, sched.program.get("invariant"))
    w = out if out is not None else io.StringIO()
    for c in caught:
        w.write(f"warning: {c.message}\n")
    t0 = time.perf_counter()
    reproduced = 0
    first_fail: Any = None
    for _ in range(repeat):
        try:
            r = schedule.replay(sched, program.factory, oracle=oracle)
        except NondeterminismError as exc:
            raise ScheduleMismatch(str(exc)) from None
        if r.failed:
            reproduced += 1
            if first_fail is None:
                first_fail = r
    secs = time.perf_counter() - t0
    n_steps = len(sched.steps)
    times = f" {reproduced}/{repeat} times" if repeat > 1 else ""
    if first_fail is not None:
        f = first_fail.failure
        w.write(f"replayed {n_steps} steps in {secs:.3f}s: the failure reproduces{times}\n")
        if f is not None:
            who = f" in {f.task}" if f.task else ""
            w.write(f"{f.kind}{who}: {f.type_name}: {f.message.rstrip()}\n")
            if f.traceback:
                w.write(f.traceback.rstrip() + "\n")
        if first_fail.output:
            more = first_fail.output_more
            w.write(
                "the program's output in the replay"
                + (f" (and {more} more characters not kept)" if more else "")
                + ":\n"
                + printable(first_fail.output.rstrip("\n"))
                + "\n"
            )
        if mermaid_path:
            rp.write_text(mermaid_path, rp.mermaid(diagram_steps(Detailed(first_fail, None))))
        w.flush()
        return 1 if reproduced == repeat else 0
    w.write(
        f"replayed {n_steps} steps in {secs:.3f}s: the schedule passes now "
        "(the failure does not reproduce)\n"
    )
    w.flush()
    return 0
