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
from chaossloth.scenario import sha256_of
from chaossloth.stages.context import Context


class Synthesize:
    name = "synthesis"
    title = "Synthesize ordered locks"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        if not ctx.full:
            return "not run by check (chaossloth fix runs it)"
        if ctx.failing is None:
            return (
                "no failing schedule to repair (the failure was seen on the stock loop only)"
                if ctx.result.failed
                else "nothing to fix"
            )
        return None

    def run(self, ctx: Context) -> None:
        res, pr = ctx.result, ctx.printer
        path = ctx.program.path
        why = rr.unfixable_reason(res.hazard, res.findings)
        hazards, elsewhere = rr.hazards_of(res.findings, path)
        ctx.repair = rr.Repair(status="unfixable", path=path, hazards=[h.resource for h in hazards])
        if why is None and res.hazard == "deadlock":
            _order_locks(ctx)
            return
        if why is None and not hazards:
            why = (
                "the racing accesses are in other files ("
                + ", ".join(elsewhere)
                + "); chaossloth fix patches the program's own file only"
                if elsewhere
                else rr.unfixable_reason("exception", [])
            )
        if why is not None:
            ctx.repair.explanation = why
            pr.say(f"no lock fixes this {res.hazard or 'failure'}: {why}")
            return
        source = _source(ctx)
        try:
            patch = synthesis.synthesize(path, source, hazards)
        except synthesis.Unfixable as exc:
            ctx.repair.explanation = str(exc)
            pr.say(f"no lock synthesized: {exc}")
            return
        ctx.repair.propose(patch)
        ctx.hazards = hazards
        say_patch(ctx, patch)


def _source(ctx: Context) -> str:
    """The program's text, as it was analysed (its hash checked)."""
    path = ctx.program.path
    data = Path(path).read_bytes()
    if sha256_of(data) != ctx.program.sha256:
        raise InputError(f"{path}: the file changed during the analysis; run it again")
    return data.decode("utf-8")


def _order_locks(ctx: Context) -> None:
    """A lock-order deadlock: the nested acquisitions where the cycle's tasks wait take both
    locks at once in one rank order (synthesis.order_acquisitions)."""
    rep, pr, path = ctx.repair, ctx.printer, ctx.program.path
    assert rep is not None
    waits = rr.wait_lines(ctx.result.findings, path)
    try:
        patch = synthesis.order_acquisitions(path, _source(ctx), waits)
    except synthesis.Unfixable as exc:
        rep.explanation = f"the tasks wait for each other's locks (a wait-for cycle), and {exc}"
        pr.say(f"no lock order synthesized: {rep.explanation}")
        return
    rep.propose(patch)
    rep.hazards = [lk.name for lk in patch.locks]
    say_patch(ctx, patch)


def say_patch(ctx: Context, patch: synthesis.Patch) -> None:
    pr = ctx.printer
    for lk in patch.locks:
        if lk.scope == "user":
            continue
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
