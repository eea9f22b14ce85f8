"""Stage 1, capture: the workload twice in the default order (fifo = stock asyncio's order) on
the controlled loop, every step's reads, writes and await site recorded.

A workload that does not end within the step budget in that order is an input problem, not a
livelock report: the stock loop would run as long on it (a livelock is reported only when the
default order terminates and some other schedule does not).  Which of the two it is cannot be
known at the budget, so the message says what the steps show: one actor taking a large share of
them is a loop ("never terminates, or is longer than --max-steps"), steps spread over many
actors a long workload ("raise --max-steps").  Two default-order runs that take different steps
mean the program is nondeterministic, which no schedule can pin down.

The stage ends within the run's time budget (runner.stage_deadline: --time-limit counted from
the command's start): the watchdog stops a run still going at the deadline, and the second run
is not started when what is left cannot fit it (SECOND_RUN_SHARE).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

from chaossloth import report as rp
from chaossloth import runner
from chaossloth.capture import importer
from chaossloth.errors import InputError
from chaossloth.stages.context import Context, input_problem_of, run_once

#: at the step budget, the default order is "a loop" when one actor took at least this share of
#: the steps; below it the steps are spread over many actors: a long workload
LOOP_SHARE = 0.1
#: the second run is not started when less than this share of the first run's time is left:
#: without the detailed record (the trace's objects, the await sites) it has taken as little
#: as about 60% of the first; a second run that fits less tightly than predicted is stopped
#: at the deadline by the watchdog all the same
SECOND_RUN_SHARE = 0.5


class Capture:
    name = "capture"
    title = "Capture: record two default-order runs"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None

    def run(self, ctx: Context) -> None:
        pr = ctx.printer
        with runner.stage_deadline("capture (stage 1)", runner.MIN_EXECUTION_SECONDS) as budget:
            started = time.monotonic()
            first = run_once(ctx, detailed=True)
            took = time.monotonic() - started
            failure = first.failure
            if failure is not None and failure.kind == "livelock":
                raise InputError(step_budget_message(first.steps))
            problem = input_problem_of(failure, ctx.config.max_steps)
            if problem:
                raise InputError(problem)
            if budget is not None and time.monotonic() + SECOND_RUN_SHARE * took > budget[0]:
                raise InputError(_second_run_message(took, budget))
            second = run_once(ctx, detailed=False)
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


def step_budget_message(steps: list[Any]) -> str:
    """The input error of a default order still running at the step budget (`steps`: its
    steps, each with its actor and name): a loop when one actor took LOOP_SHARE of them or
    more (it may still end: "or is longer"), else a long workload; the figure to raise."""
    n = len(steps)
    by_actor = Counter(s.actor for s in steps)
    actor, top = by_actor.most_common(1)[0] if by_actor else (None, 0)
    head = f"in the default (stock asyncio) order it is still running after {n:,} steps"
    if n and top >= LOOP_SHARE * n:
        name = next(s.name for s in steps if s.actor == actor)
        return (
            f"the workload never terminates, or is longer than the step budget: {head}, {top:,} "
            f"of them by {name} (a loop that awaits); raise --max-steps if it is merely long"
        )
    return (
        f"the workload is long: {head} (the step budget), spread over {len(by_actor):,} tasks and callbacks, "
        f"none taking more than {top:,} of them; raise --max-steps for it to finish, or shrink "
        "it"
    )


def _second_run_message(took: float, budget: tuple[float, float]) -> str:
    deadline, seconds = budget
    left = max(deadline - time.monotonic(), 0.0)
    # what the stage needs: the time used so far (the first run's included) and the second run
    need = math.ceil(seconds - left + took + 0.5)
    return (
        f"capture (stage 1) would run past the time limit of {seconds:g}s, counted from "
        f"{runner.budget_origin_words()}: the default-order run took {took:.1f}s, the check "
        f"that a second run takes the same steps needs at least half as long again, and "
        f"{left:.1f}s are left; the workload is long: raise --time-limit to {need} or more"
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
