"""Stage 6, synthesize: ordered locks that remove the diagnosed hazard
(:mod:`chaossloth.reasoning.synthesis`).  Every access-pattern finding of the failing schedule
in the program's file becomes a protected resource; the patch encloses the smallest interval of
each function that touches one in ``async with`` its locks, in rank order.  A hazard no lock
fixes (a cancellation, an order violation, a livelock) gets the reason and what would fix it
instead (``ctx.repair.status == "unfixable"``)."""

from __future__ import annotations

from pathlib import Path

from chaossloth.errors import InputError
from chaossloth.reasoning import repair as rr
from chaossloth.reasoning import synthesis
from chaossloth.scenario import file_sha256
from chaossloth.stages.context import Context


class Synthesize:
    name = "synthesis"
    title = "Synthesize ordered locks"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        if not ctx.full:
            return "not run by check (chaossloth fix runs it)"
        if ctx.failing is None:
            return "nothing to fix"
        return None

    def run(self, ctx: Context) -> None:
        res, pr = ctx.result, ctx.printer
        path = ctx.program.path
        why = rr.unfixable_reason(res.hazard, res.findings)
        if why is None and res.hazard == "deadlock":
            why = (
                "the tasks wait for each other's locks (a wait-for cycle). Take the locks in "
                "one global order everywhere (sort them by a stable key, or take both in one "
                "`async with a, b:` ordered by that key) so that no cycle can form."
            )
        hazards, elsewhere = rr.hazards_of(res.findings, path)
        if why is None and not hazards:
            why = (
                "the racing accesses are in other files ("
                + ", ".join(elsewhere)
                + "); chaossloth fix patches the program's own file only"
                if elsewhere
                else rr.unfixable_reason("exception", [])
            )
        ctx.repair = rr.Repair(status="unfixable", path=path, hazards=[h.resource for h in hazards])
        if why is not None:
            ctx.repair.explanation = why
            pr.say(f"no lock fixes this {res.hazard or 'failure'}: {why}")
            return
        source_bytes = Path(path).read_bytes()
        if file_sha256(path) != ctx.program.sha256:
            raise InputError(f"{path}: the file changed during the analysis; run it again")
        source = source_bytes.decode("utf-8")
        try:
            patch = synthesis.synthesize(path, source, hazards)
        except synthesis.Unfixable as exc:
            ctx.repair.explanation = str(exc)
            pr.say(f"no lock synthesized: {exc}")
            return
        ctx.repair.status = "unverified"
        ctx.repair.patch = patch
        ctx.repair.diff = patch.diff(rr.display_path(path))
        ctx.hazards = hazards
        say_patch(ctx, patch)


def say_patch(ctx: Context, patch: synthesis.Patch) -> None:
    pr = ctx.printer
    for lk in patch.locks:
        where = f"on each {lk.owner}" if lk.scope == "instance" else "per event loop (module)"
        pr.say(f"lock {lk.name} {where}: protects {', '.join(dict.fromkeys(lk.resources))}")
    for iv in patch.intervals:
        pr.say(
            f"{iv.function}: lines {iv.first_line}-{iv.last_line} in "
            f"`async with {', '.join(iv.locks)}`"
        )
    for copy in patch.copies:
        pr.say(f"added {copy}: an unlocked copy for callers that hold its locks")
    for note in patch.notes:
        pr.say(note)
