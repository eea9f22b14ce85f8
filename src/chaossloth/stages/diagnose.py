"""Stage 5, diagnose: replays the minimal failing schedule with its trace, asks the engine for
its findings (``_core.diagnose``) and words them with source lines (:mod:`chaossloth.diagnosis`,
:mod:`chaossloth.report`); names the hazard and draws the Mermaid diagram of the schedule."""

from __future__ import annotations

from chaossloth import diagnosis
from chaossloth import report as rp
from chaossloth.diagnosis import Detailed
from chaossloth.runner import ExecutionResult
from chaossloth.stages.context import Context, one_line, run_once


class Diagnose:
    name = "diagnosis"
    title = "Diagnose: name the hazard, explain the schedule"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None if ctx.failing is not None else "nothing to diagnose"

    def run(self, ctx: Context) -> None:
        failing, res, pr = ctx.failing, ctx.result, ctx.printer
        assert failing is not None, "skipped without a failing schedule"
        detailed = _detailed_replay(ctx, failing)
        ctx.detailed = detailed
        res.findings = diagnosis.diagnose(detailed, failing)
        res.hazard = diagnosis.classify(failing.failure, res.findings)
        head = rp.HAZARD_TITLE[res.hazard]
        pr.say(f"hazard: {head}")
        if res.failure is not None:
            who = f" in {res.failure['task']}" if res.failure.get("task") else ""
            first_line, *rest = str(res.failure["message"]).rstrip().split("\n")
            pr.say(f"failure{who}: {res.failure['type']}: {one_line(first_line)}")
            for more in rest:  # a deadlock lists each waiting task on a line of its own
                pr.say(f"  {more.strip()}")
        for fd in res.findings[:3]:
            pr.say(fd.text)
        res.mermaid = rp.mermaid(
            diagnosis.diagram_steps(detailed, diagnosis.finding_objects(detailed)),
            title=f"{head}: {one_line(res.failure_message.split(chr(10))[0])[:80]}"
            if res.failure
            else head,
            highlight=res.findings[0] if res.findings else None,
        )


def _detailed_replay(ctx: Context, failing: ExecutionResult) -> Detailed:
    """The failing execution with its trace and the explorer that ran it, for diagnosis: the
    exploration's own detailed re-run when it has one, else a replay of its schedule."""
    if failing.explorer is not None and failing.trace is not None:
        return Detailed(failing, failing.explorer)
    r = run_once(ctx, schedule=failing.schedule, actor_paths=failing.actor_paths, detailed=True)
    return Detailed(r, r.explorer)
