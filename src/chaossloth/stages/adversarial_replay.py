"""Stage 7, adversarial replay: the patch must survive the schedules that broke the original
(:func:`verify`): the patched file loaded like the original (its project instrumented, the same
workload, arguments, oracle and invariant), the failing schedule replayed on it as a guide (the
engine's "guided" strategy: the schedule's order wherever its task can run, the next task of the
schedule where a new lock makes one wait), then the patched program explored as stage 3 does
(DPOR to completion within the budget, then sampling, plus the sentinel).  A counterexample sends
it back to synthesis one widening level up with the counterexample's resources added; a patch
that did not survive is never called verified."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from chaossloth import report as rp
from chaossloth import runner, scenario
from chaossloth.errors import InputError
from chaossloth.reasoning import repair as rr
from chaossloth.reasoning import synthesis
from chaossloth.reasoning.synthesis import Patch
from chaossloth.runner import ExecutionResult
from chaossloth.stages.collapse import explore
from chaossloth.stages.context import Context, Result
from chaossloth.stages.diagnose import Diagnose
from chaossloth.stages.synthesize import say_patch


class AdversarialReplay:
    name = "adversarial replay"
    title = "Adversarial replay of the patch"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        if not ctx.full:
            return "not run by check (chaossloth fix runs it)"
        if ctx.repair is None or ctx.repair.patch is None:
            return "no patch to verify"
        return None

    def run(self, ctx: Context) -> None:
        rep, pr, failing = ctx.repair, ctx.printer, ctx.failing
        assert rep is not None and rep.patch is not None and failing is not None
        hazards = list(ctx.hazards)
        level = 0
        while True:
            patch = rep.patch
            v = verify(ctx, patch, failing)
            rep.verification = v
            rep.attempts.append(
                {
                    "widen": synthesis.WIDEN_LEVELS[level],
                    "replay_passed": v.replay_passed,
                    "executions": v.executions,
                    "complete": v.complete,
                    "counterexample": v.counterexample,
                }
            )
            replay = (
                "the failing schedule replayed as a guide passes"
                f" ({v.replay_deviations} step(s) where a new lock made it wait)"
                if v.replay_passed
                else "the failing schedule still fails"
            )
            if v.passed:
                rep.status = "verified"
                scope = (
                    "every schedule (complete)"
                    if v.complete
                    else f"incomplete: {v.incomplete_reason or 'budget reached'}"
                )
                pr.say(f"{replay}; {v.executions} schedules of the patch pass: {scope}")
                break
            pr.say(
                f"{synthesis.WIDEN_LEVELS[level]} patch: {replay}; counterexample after "
                f"{v.executions} schedule(s): {v.counterexample}"
            )
            new = [h for h in v.hazards if h not in hazards]
            hazards += new
            if level + 1 >= len(synthesis.WIDEN_LEVELS) or not hazards:
                rep.explanation = (
                    f"no patch survived: the widest ({synthesis.WIDEN_LEVELS[level]}) still "
                    f"fails ({v.counterexample})"
                    if hazards
                    else f"the patch did not survive: {v.counterexample}"
                )
                pr.say(rep.explanation)
                break
            level += 1
            try:
                rep.propose(synthesis.synthesize(patch.path, patch.original, hazards, widen=level))
            except synthesis.Unfixable as exc:
                rep.explanation = str(exc)
                pr.say(f"no wider patch: {exc}")
                break
            rep.widen_level = level
            pr.say(f"widening: {synthesis.WIDEN_LEVELS[level]}")
            say_patch(ctx, rep.patch)
        if rep.diff:
            pr.say("patch:" if rep.verified else "patch (NOT verified):")
            for line in rep.diff.rstrip("\n").split("\n"):
                pr.say(f"  {line}")


def verify(ctx: Context, patch: Patch, failing: ExecutionResult) -> rr.Verification:
    """Stage 7 on one patch: the guided replay of `failing`, then the exploration of the
    patched program (stage 3's, with its sentinel) under ctx's config and invariant."""
    v = rr.Verification()
    tmp = tempfile.mkdtemp(prefix="chaossloth-fix-")
    try:
        path = Path(tmp) / Path(patch.path).name
        path.write_text(patch.patched, encoding="utf-8")
        cfg = ctx.config.replace(
            args=ctx.program.args,
            init_args=ctx.program.init_args,
            json_path=None,
            mermaid_path=None,
            schedule_out=None,
        )
        try:
            program = scenario.load(str(path), cfg)
        except InputError as exc:
            v.counterexample = f"the patched file does not load: {exc}"
            return v
        try:
            sub = Context(
                program=program,
                config=cfg,
                oracle=scenario.oracle_with_invariant(program, cfg.invariant),
                printer=rp.StagePrinter(None, []),  # says nothing: stage 7 words what it found
                result=Result(),
            )
            guided = runner.run_once(
                program.factory,
                schedule=failing.schedule,
                actor_paths=failing.actor_paths,
                guided=True,
                oracle=sub.oracle,
                config=cfg,
                detailed=False,
            )
            v.replay_passed = not guided.failed
            v.replay_deviations = guided.guide_deviations
            found: ExecutionResult | None
            if guided.failed:
                found = guided
                v.executions = 1
            else:
                found = explore(sub)
                v.executions = sub.result.executions + 1
                v.complete = sub.result.complete and found is None
                v.incomplete_reason = sub.result.incomplete_reason
                v.sentinel_executions = int((sub.result.sentinel or {}).get("executions", 0))
            if found is not None:
                f = found.failure
                v.counterexample = (
                    f"{f.type_name}: {f.message}" if f is not None else "a failing schedule"
                )
                sub.failing = found
                Diagnose().run(sub)
                for fd in sub.result.findings:
                    if fd.pattern not in rp.PATTERN_HAZARD:
                        continue
                    rows = [
                        patch.original_line(s.line)
                        for s in (fd.local, fd.second, fd.await_site, fd.remote)
                        if s is not None and rr.same_file(s.file, str(path))
                    ]
                    lines = tuple(r for r in rows if r is not None)
                    if lines:
                        v.hazards.append(synthesis.Hazard(fd.resource, lines, fd.hazard))
        finally:
            program.release()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return v
