"""Stage 4, collision window: the workload on the *stock* asyncio loop with jitter (see
:mod:`chaossloth.jitter`): its natural failure rate and the width of its collision window.

When strict virtual time found no failing schedule but the stock loop failed, the race needs a
timer to fire out of deadline order (as an I/O of unknown latency would): this stage then
re-runs stage 3 with relaxed timers, and says so (``rerun`` in the JSON's stage entry).

A failure seen on the stock loop is a failure: when no explored schedule fails (after that
re-run), the stock loop's first failure (its exception and traceback in user code) is the
verdict's evidence, ``complete`` is False, and an exploration that claimed complete is reported
as a capture gap (``stock_loop_failure`` and ``capture_gap`` in the JSON).
"""

from __future__ import annotations

from chaossloth import jitter, runner
from chaossloth.stages import collapse
from chaossloth.stages.context import Context, one_line


class CollisionWindow:
    name = "collision window"
    title = "Collision window: failure rate on the stock loop"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None if ctx.config.telemetry else "skipped"

    def run(self, ctx: Context) -> None:
        pr, cfg = ctx.printer, ctx.config
        budget = runner.budget_deadline()
        t = jitter.measure(
            ctx.program.factory,
            judge=ctx.oracle,
            seed=cfg.seed,
            budget=cfg.telemetry_budget,
            width=cfg.telemetry_width,
            # a run the controlled loop ended within the step budget is no livelock here
            max_iterations=2 * cfg.max_steps,
            deadline=budget[0] if budget is not None else None,
        )
        ctx.result.telemetry = t
        if t.error:
            pr.say(t.error)
        else:
            pr.say(t.rate_sentence())
            pr.say(t.sentence)
        if ctx.failing is None and cfg.timers == "strict" and not t.error and t.failures:
            pr.rerun(
                collapse.Collapse.name,
                "no schedule failed with strict timers, but the stock loop did: exploring "
                "again with relaxed timers (any pending timer may fire at any point)",
            )
            ctx.config = cfg.replace(timers="relaxed")
            ctx.result.timers = "relaxed"
            with collapse.saved_when_interrupted(ctx):
                ctx.failing = collapse.explore(ctx)
        if ctx.failing is None and not t.error and t.first_failure is not None:
            stock_loop_evidence(ctx, t)


def stock_loop_evidence(ctx: Context, t: jitter.Telemetry) -> None:
    """No explored schedule failed but the stock loop did: that failure is the verdict's
    evidence (exit 1, ``complete`` False); when the exploration claimed complete, the miss is a
    capture gap and is reported as one."""
    res, pr = ctx.result, ctx.printer
    f = t.first_failure
    assert f is not None
    claimed_complete = res.complete
    res.verdict = "fail"
    res.hazard = f.kind if f.kind in ("deadlock", "livelock") else "exception"
    res.failure = {
        "kind": f.kind,
        "type": f.type_name,
        "message": f.message,
        "task": f.task,
        "traceback": f.traceback,
    }
    res.stock_loop_failure = dict(f.to_json(), runs=t.runs, failures=t.failures)
    res.complete = False
    if claimed_complete:
        res.incomplete_reason = (
            "the stock asyncio loop failed although the exploration covered every schedule it "
            "could tell apart: capture missed a dependency"
        )
        res.capture_gap = {"found_by": "stock loop", "message": collapse.GAP_PLEASE, "steps": None}
        why = f"{collapse.GAP_PLEASE}."
    else:
        res.incomplete_reason = (
            "the stock asyncio loop failed and the exploration stopped at its budget before "
            "reaching a failing schedule"
        )
        why = (
            "ChaosSloth's exploration did not reach this failure within its budget (raise "
            "--max-executions/--time-limit), or capture missed a dependency."
        )
    pr.say(f"the stock loop failed: {f.type_name}: {one_line(f.message)}. {why}")
