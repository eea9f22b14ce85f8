"""Stage 3, collapse: explores the workload's schedules with the runner (default ``auto``: DPOR
within the budget, then sampling), one execution per class of equivalent schedules for DPOR.
The failing schedule kept is the one with the fewest deviations from the default order, so the
story is the shortest."""

from __future__ import annotations

from chaossloth import runner
from chaossloth.errors import InputError, NondeterminismError
from chaossloth.runner import ExecutionResult
from chaossloth.stages.context import IO_TYPES, Context, input_problem_of


class Collapse:
    name = "collapse"
    title = "Collapse: explore the distinct schedules"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None

    def run(self, ctx: Context) -> None:
        ctx.failing = explore(ctx)


def explore(ctx: Context) -> ExecutionResult | None:
    """Explores under ctx.config, fills the result's counts, says what it found and returns the
    minimal failing execution (or None).  Stage 4 calls it again when it re-runs this stage."""
    cfg, res, pr = ctx.config, ctx.result, ctx.printer
    try:
        ex = runner.explore(
            ctx.program.factory,
            config=cfg.replace(time_limit=cfg.time_budget()),
            oracle=ctx.oracle,
            progress=ctx.progress,
        )
    except NondeterminismError as exc:
        raise InputError(f"the workload is nondeterministic: {exc}") from None
    res.executions = ex.executions
    res.failing_executions = ex.failing_executions
    res.distinct_traces = ex.distinct_traces
    res.sleep_blocked = ex.sleep_blocked
    res.complete = bool(ex.complete)
    res.explore_seconds = ex.explore_seconds
    strategies = "+".join(p.get("strategy", "?") for p in ex.phases) or cfg.strategy
    pr.say(
        f"{ex.executions} executions ({strategies}), {ex.distinct_traces} distinct traces, "
        + (f"{ex.sleep_blocked} sleep-set blocked, " if ex.sleep_blocked else "")
        + f"{ex.failing_executions} failing; "
        + (
            "complete: every schedule covered"
            if res.complete
            else (
                "stopped at the first failure"
                if ex.failed and cfg.stop_on_failure
                else "incomplete: budget reached"
            )
        )
    )
    failing = ex.minimal_failure
    if failing is not None and failing.failure and failing.failure.type_name in IO_TYPES:
        raise InputError(input_problem_of(failing.failure, cfg.max_steps) or "I/O")
    if failing is not None:
        res.verdict = "fail"
        res.deviations = failing.deviations
        res.schedule_steps = len(failing.steps)
        f = failing.failure
        res.failure = (
            {
                "kind": f.kind,
                "type": f.type_name,
                "message": f.message,
                "task": f.task,
                "traceback": f.traceback,
            }
            if f is not None
            else None
        )
        pr.say(
            f"minimal failing schedule: {len(failing.steps)} steps, "
            f"{failing.deviations} deviation(s) from the default order"
        )
    return failing
