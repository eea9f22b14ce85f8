"""Stage 5, diagnose: replays the minimal failing schedule with its trace, asks the engine for
its findings (``_core.diagnose``) and words them with source lines (:mod:`chaossloth.diagnosis`,
:mod:`chaossloth.report`); names the hazard and draws the Mermaid diagram of the schedule."""

from __future__ import annotations

import re

from chaossloth import causes, diagnosis
from chaossloth import report as rp
from chaossloth.capture import importer
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
        trace = detailed.result.trace or []
        paths = detailed.result.actor_paths or failing.actor_paths

        def rerun(schedule: list[int]) -> ExecutionResult:
            return run_once(ctx, schedule=schedule, actor_paths=paths, guided=True, detailed=False)

        found, done = causes.find_causes(trace, detailed.explorer, rerun)
        res.findings = diagnosis.diagnose(detailed, failing, found, _scenario_code(ctx))
        res.hazard = diagnosis.classify(failing.failure, res.findings)
        res.reversals = dict(done.to_json(), passing=len(found))
        res.uninstrumented = _uninstrumented(failing, detailed)
        head = rp.HAZARD_TITLE[res.hazard]
        if res.uninstrumented and res.hazard == "exception":
            # no access pattern explains the failure, and part of it ran unseen: no guess
            pr.say(f"hazard: unknown: {rp.uninstrumented_line(res.uninstrumented)}")
        else:
            pr.say(f"hazard: {head}")
            if res.uninstrumented:
                pr.say(rp.uninstrumented_line(res.uninstrumented))
        if res.failure is not None:
            who = f" in {res.failure['task']}" if res.failure.get("task") else ""
            first_line, *rest = str(res.failure["message"]).rstrip().split("\n")
            pr.say(f"failure{who}: {res.failure['type']}: {one_line(first_line)}")
            for more in rest:  # a deadlock lists each waiting task on a line of its own
                pr.say(f"  {more.strip()}")
        for fd in res.findings[:3]:
            pr.say(fd.text)
        res.timeline = diagnosis.timeline(detailed, res.findings, found)
        pr.say(f"the failing schedule, step by step ({len(res.timeline)} steps):")
        for line in rp.timeline_lines(res.timeline):
            pr.say(line)
        if done.stopped is not None:
            pr.say(
                f"reversal test: {done.tried} of {done.races} races reversed"
                f" ({'the limit' if done.stopped == 'limit' else 'the time cap'} was reached)"
            )
        if not found and failing.failure is not None and failing.failure.kind != "deadlock":
            if res.executions and res.failing_executions == res.executions:
                pr.say("every schedule explored fails: the findings come from its shape alone")
            else:
                pr.say(
                    f"no single swap of two dependent steps makes it pass ({done.tried} tried): the"
                    " failure needs several reorderings together"
                )
        res.mermaid = rp.mermaid(
            diagnosis.diagram_steps(detailed, diagnosis.finding_objects(detailed)),
            title=f"{head}: {one_line(res.failure_message.split(chr(10))[0])[:80]}"
            if res.failure
            else head,
            highlight=res.findings[0] if res.findings else None,
        )


def _scenario_code(ctx: Context) -> tuple[str, int, int] | None:
    """The file and line span of the scenario function (its nested functions included)."""
    prog = ctx.program
    fn = getattr(prog.module, prog.scenario, None) if prog.scenario and prog.module else None
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    lines: list[int] = []
    todo = [code]
    while todo:
        c = todo.pop()
        lines += [ln for _s, _e, ln in c.co_lines() if ln is not None]
        todo += [k for k in c.co_consts if isinstance(k, type(code))]
    return (code.co_filename, min(lines), max(lines)) if lines else None


def _detailed_replay(ctx: Context, failing: ExecutionResult) -> Detailed:
    """The failing execution with its trace and the explorer that ran it, for diagnosis: the
    exploration's own detailed re-run when it has one, else a replay of its schedule."""
    if failing.explorer is not None and failing.trace is not None:
        return Detailed(failing, failing.explorer)
    r = run_once(ctx, schedule=failing.schedule, actor_paths=failing.actor_paths, detailed=True)
    return Detailed(r, r.explorer)


_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+', re.MULTILINE)


def _uninstrumented(failing: ExecutionResult, detailed: Detailed) -> list[str]:
    """The uninstrumented user or library modules the failing schedule runs through: the
    frames of the failure's traceback and the await sites of its steps."""
    files: list[str] = []
    if failing.failure is not None:
        files += _FRAME.findall(failing.failure.traceback)
    for site in detailed.result.await_sites or []:
        if site is not None:
            files.append(site[0])
    return importer.uninstrumented_modules(files)
