"""Stage 6, synthesize: lock synthesis (ordered locks that remove the hazard).  Not implemented
yet: the stage says so (the whole pipeline lists it under ``not_implemented`` in the JSON)."""

from __future__ import annotations

from chaossloth.stages.context import Context


class Synthesize:
    name = "synthesis"
    title = "Synthesize ordered locks"
    implemented = False

    def skip_reason(self, ctx: Context) -> str | None:
        return "not implemented yet" if ctx.full else "not run by check"

    def run(self, ctx: Context) -> None:  # pragma: no cover - always skipped
        raise NotImplementedError("lock synthesis (stage 6) is not implemented yet")
