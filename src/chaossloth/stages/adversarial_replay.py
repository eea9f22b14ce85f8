"""Stage 7, adversarial replay: re-explores the patched program to show the patch holds.  Not
implemented yet (it needs stage 6's patch): the stage says so."""

from __future__ import annotations

from chaossloth.stages.context import Context


class AdversarialReplay:
    name = "adversarial replay"
    title = "Adversarial replay of the patch"
    implemented = False

    def skip_reason(self, ctx: Context) -> str | None:
        return "not implemented yet" if ctx.full else "not run by check"

    def run(self, ctx: Context) -> None:  # pragma: no cover - always skipped
        raise NotImplementedError("adversarial replay (stage 7) is not implemented yet")
