"""Stage 2, alphabet: the numbers of the default-order execution's trace: events, actors,
accesses, resources ``(object, key)``, and the pairs of steps of different actors that are
dependent (conflicting accesses to one resource: at least one write)."""

from __future__ import annotations

from typing import Any

from chaossloth import _core
from chaossloth.stages.context import Context


class Alphabet:
    name = "alphabet"
    title = "Alphabet: events, resources, dependent pairs"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None

    def run(self, ctx: Context) -> None:
        assert ctx.default_run is not None, "stage 1 runs first"
        alpha = count(ctx.default_run.trace or [])
        ctx.alphabet = alpha
        ctx.printer.say(
            f"{alpha['events']} events, {alpha['resources']} resources, "
            f"{alpha['dependent_pairs']} dependent pairs of steps across actors"
        )


def count(trace: list[Any]) -> dict[str, int]:
    """Stage 2's numbers from one execution's trace."""
    by_object: dict[int, list[tuple[int, int, int, int]]] = {}
    n_acc = 0
    for i, ev in enumerate(trace):
        for obj, key, kind, _site_id in ev.accesses:
            by_object.setdefault(obj, []).append((i, ev.actor, key, kind))
            n_acc += 1
    whole = int(_core.KEY_WHOLE)
    resources = set()
    dependent: set[tuple[int, int]] = set()
    for obj, accs in by_object.items():
        for _, _, key, _ in accs:
            resources.add((obj, key))
        for x in range(len(accs)):
            i, a, k, kd = accs[x]
            for y in range(x + 1, len(accs)):
                j, b, k2, kd2 = accs[y]
                if a == b or i == j:
                    continue
                if (k == k2 or k == whole or k2 == whole) and _conflicts(kd, kd2):
                    dependent.add((min(i, j), max(i, j)))
    actors = {ev.actor for ev in trace}
    return {
        "events": len(trace),
        "actors": len(actors),
        "accesses": n_acc,
        "resources": len(resources),
        "dependent_pairs": len(dependent),
    }


def _conflicts(k1: int, k2: int) -> bool:
    return k1 != _core.READ or k2 != _core.READ
