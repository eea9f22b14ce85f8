"""Stage 2, alphabet: the numbers of the default-order execution's trace: events, actors,
accesses, resources ``(object, key)``, and the pairs of steps of different actors that are
dependent (conflicting accesses to one resource: at least one write).

The stage ends within the run's time budget, as capture does (runner.stage_deadline): counting
stops at the deadline, and the stage says how far it got, its pair count then a lower bound."""

from __future__ import annotations

import time
from typing import Any

from chaossloth import _core, runner
from chaossloth.stages.context import Context


class Alphabet:
    name = "alphabet"
    title = "Alphabet: events, resources, dependent pairs"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None

    def run(self, ctx: Context) -> None:
        assert ctx.default_run is not None, "stage 1 runs first"
        with runner.stage_deadline("the alphabet (stage 2)") as budget:
            alpha = count(ctx.default_run.trace or [], deadline=budget[0] if budget else None)
        ctx.alphabet = alpha
        if "counted" not in alpha:
            ctx.printer.say(
                f"{alpha['events']} events, {alpha['resources']} resources, "
                f"{alpha['dependent_pairs']} dependent pairs of steps across actors"
            )
            return
        assert budget is not None, "counting stops at a deadline only"
        ctx.printer.say(
            f"{alpha['events']} events; counting stopped at the time limit of {budget[1]:g}s, "
            f"counted from {runner.budget_origin_words()}, after {alpha['counted']} of them: "
            f"{alpha['resources']} resources so far, at least "
            f"{alpha['dependent_pairs']} dependent pairs of steps across actors"
        )


def count(trace: list[Any], deadline: float | None = None) -> dict[str, int]:
    """Stage 2's numbers from one execution's trace.  With `deadline` (time.monotonic()),
    counting stops there: ``counted`` (only then) is the number of steps whose dependents
    were counted, ``dependent_pairs`` a lower bound, and ``actors``/``accesses``/``resources``
    those of the steps read before it stopped.

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
    clock = time.monotonic
    read_all = True
    for i, ev in enumerate(trace):
        if deadline is not None and clock() >= deadline:
            read_all = False
            break
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
    counted = 0
    for i, ev in enumerate(trace if read_all else ()):
        # a pair is counted once per step of it whose turn came: a partial count is at least
        # half the pairs touching the counted steps (twice // 2 is a lower bound)
        if deadline is not None and clock() >= deadline:
            break
        deps = 0
        for obj, key, kind, _site_id in ev.accesses:
            keys = masks[obj]
            side = 1 if kind != read else 0  # a write meets accessors, a read meets writers
            if key == whole:
                deps |= any_key[obj][side]
            else:
                deps |= keys[key][side] | keys.get(whole, _NONE)[side]
        twice += (deps & ~by_actor[ev.actor]).bit_count()
        counted += 1
    n_resources = sum(len(keys) for keys in masks.values())
    out = {
        "events": len(trace),
        "actors": len(by_actor),
        "accesses": n_acc,
        "resources": n_resources,
        "dependent_pairs": twice // 2,
    }
    if counted < len(trace):
        out["counted"] = counted
    return out


_NONE = (0, 0)


def _union(xs: Any) -> int:
    out = 0
    for x in xs:
        out |= x
    return out
