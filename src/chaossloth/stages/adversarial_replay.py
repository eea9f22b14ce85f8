"""Stage 7, adversarial replay: the patch must survive the schedules that broke the original
(:func:`chaossloth.reasoning.repair.verify`): the failing schedule replayed as a guide on the
patched program, then the patched program explored (DPOR to completion within the budget, then
sampling, plus the sentinel).  A counterexample sends it back to synthesis one widening level
up with the counterexample's resources added; a patch that did not survive is never called
verified."""

from __future__ import annotations

from chaossloth.reasoning import repair as rr
from chaossloth.reasoning import synthesis
from chaossloth.stages.context import Context
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
            v = rr.verify(ctx, patch, failing)
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
                rep.status = "unverified"
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
                rep.patch = synthesis.synthesize(patch.path, patch.original, hazards, widen=level)
            except synthesis.Unfixable as exc:
                rep.status = "unverified"
                rep.explanation = str(exc)
                pr.say(f"no wider patch: {exc}")
                break
            rep.widen_level = level
            rep.diff = rep.patch.diff(rr.display_path(patch.path))
            pr.say(f"widening: {synthesis.WIDEN_LEVELS[level]}")
            say_patch(ctx, rep.patch)
        if rep.diff:
            pr.say("patch:" if rep.verified else "patch (NOT verified):")
            for line in rep.diff.rstrip("\n").split("\n"):
                pr.say(f"  {line}")
