"""Stage 1, capture: the workload twice in the default order (fifo = stock asyncio's order) on
the controlled loop, every step's reads, writes and await site recorded.

A workload that does not terminate in that order is an input problem ("never terminates"), not
a livelock report: the stock loop would hang on it too (a livelock is reported only when the
default order terminates and some other schedule does not).  Two default-order runs that take
different steps mean the program is nondeterministic, which no schedule can pin down.
"""

from __future__ import annotations

from typing import Any

from chaossloth import report as rp
from chaossloth.capture import importer
from chaossloth.errors import InputError
from chaossloth.stages.context import Context, input_problem_of, run_once


class Capture:
    name = "capture"
    title = "Capture: record two default-order runs"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None

    def run(self, ctx: Context) -> None:
        pr = ctx.printer
        first = run_once(ctx, detailed=True)
        second = run_once(ctx, detailed=False)
        problem = input_problem_of(first.failure, ctx.config.max_steps)
        if problem:
            raise InputError(problem)
        if [s.name for s in first.steps] != [s.name for s in second.steps]:
            raise InputError(_nondeterministic_message(first, second))
        ctx.default_run = first
        arguments = ctx.program.arguments_line()
        if arguments is not None:
            pr.say(arguments)
        tasks = {s.name for s in first.steps}
        n_sites = sum(1 for s in (first.await_sites or []) if s is not None)
        pr.say(
            f"default order: {len(first.steps)} steps by {len(tasks)} actors, "
            f"{sum(len(ev.accesses) for ev in first.trace or [])} accesses, "
            f"{n_sites} steps ending at an await; "
            + ("fails" if first.failed else "passes")
            + " in the stock order"
        )
        ctx.result.instrumented = ctx.program.instrumented_modules()
        pr.say(rp.instrumented_line(ctx.result.instrumented))
        shallow = sorted(importer.shallow_resets.items())
        if shallow:
            pr.say(
                "reset only shallowly between executions (deepcopy cannot copy them: the items "
                "they hold keep their own state): "
                + ", ".join(f"{name} ({why})" for name, why in shallow[:5])
                + (f" and {len(shallow) - 5} more" if len(shallow) > 5 else "")
            )


def _nondeterministic_message(a: Any, b: Any) -> str:
    sa, sb = [s.name for s in a.steps], [s.name for s in b.steps]
    i = next((k for k, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
    first = sa[i] if i < len(sa) else "the end"
    second = sb[i] if i < len(sb) else "the end"
    return (
        "the workload is nondeterministic: two runs in the same (default) order diverged at "
        f"step {i} ({first} vs {second}). It depends on something outside the schedule "
        "(wall-clock time, unseeded random, I/O, threads, hash order of strings)."
    )
