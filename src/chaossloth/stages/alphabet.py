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
    """Stage 2's numbers from one execution's trace.

    Two steps of different actors are dependent when they access overlapping resources (one
    object, equal keys or either key whole) and one of the accesses writes.  Each resource keeps
    two sets of steps as bit masks (Python ints): the steps that write it and the steps that
    access it, and each object the unions of those over its keys.  A step's dependents are then
    the union of the masks its accesses select (a read: the writers of its key and of the whole
    object, or of any key for a whole read; a write: the accessors likewise), less its actor's
    own steps; each dependent pair is found once from each end.  The cost is the accesses times
    the trace's length in words, never the accesses of a shared object squared (a thousand tasks
    that all write one counter, or touch every key of one cache)."""
    whole = int(_core.KEY_WHOLE)
    read = int(_core.READ)
    # object -> key -> [writers, accessors] (masks of step indexes)
    masks: dict[int, dict[int, list[int]]] = {}
    by_actor: dict[int, int] = {}
    n_acc = 0
    for i, ev in enumerate(trace):
        bit = 1 << i
        by_actor[ev.actor] = by_actor.get(ev.actor, 0) | bit
        for obj, key, kind, _site_id in ev.accesses:
            m = masks.setdefault(obj, {}).setdefault(key, [0, 0])
            if kind != read:
                m[0] |= bit
            m[1] |= bit
            n_acc += 1
    # object -> [writers of any key, accessors of any key]
    any_key = {
        obj: [_union(m[0] for m in keys.values()), _union(m[1] for m in keys.values())]
        for obj, keys in masks.items()
    }
    twice = 0  # each dependent pair counted from both of its steps
    for i, ev in enumerate(trace):
        deps = 0
        for obj, key, kind, _site_id in ev.accesses:
            keys = masks[obj]
            side = 1 if kind != read else 0  # a write meets accessors, a read meets writers
            if key == whole:
                deps |= any_key[obj][side]
            else:
                deps |= keys[key][side] | keys.get(whole, _NONE)[side]
        twice += (deps & ~by_actor[ev.actor]).bit_count()
    n_resources = sum(len(keys) for keys in masks.values())
    return {
        "events": len(trace),
        "actors": len(by_actor),
        "accesses": n_acc,
        "resources": n_resources,
        "dependent_pairs": twice // 2,
    }


_NONE = (0, 0)


def _union(xs: Any) -> int:
    out = 0
    for x in xs:
        out |= x
    return out
