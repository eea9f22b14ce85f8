"""Stage 4, collision window: the workload on the *stock* asyncio loop with jitter (see
:mod:`chaossloth.jitter`): its natural failure rate and the width of its collision window.

When strict virtual time found no failing schedule but the stock loop failed, the race needs a
timer to fire out of deadline order (as an I/O of unknown latency would): this stage then
re-runs stage 3 with relaxed timers, and says so (``rerun`` in the JSON's stage entry).
"""

from __future__ import annotations

from chaossloth import jitter
from chaossloth.stages import collapse
from chaossloth.stages.context import Context


class CollisionWindow:
    name = "collision window"
    title = "Collision window: failure rate on the stock loop"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None if ctx.config.telemetry else "skipped"

    def run(self, ctx: Context) -> None:
        pr, cfg = ctx.printer, ctx.config
        t = jitter.measure(
            ctx.program.factory, judge=ctx.oracle, seed=cfg.seed, budget=cfg.telemetry_budget
        )
        ctx.result.telemetry = t
        if t.error:
            pr.say(t.error)
        else:
            r = t.rate
            pr.say(
                f"natural failure rate on the stock loop: {t.failures}/{t.runs} runs "
                f"(estimate {100 * r['estimate']:.1f}%, 95% CI {100 * r['low']:.1f}%"
                f"-{100 * r['high']:.1f}%)"
            )
            pr.say(t.sentence)
        if ctx.failing is None and cfg.timers == "strict" and not t.error and t.failures:
            pr.rerun(
                collapse.Collapse.name,
                "no schedule failed with strict timers, but the stock loop did: exploring "
                "again with relaxed timers (any pending timer may fire at any point)",
            )
            ctx.config = cfg.replace(timers="relaxed")
            ctx.result.timers = "relaxed"
            ctx.failing = collapse.explore(ctx)
