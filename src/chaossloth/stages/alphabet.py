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

    Accesses are grouped by object and key, each key's reads apart from its writes, so the
    dependent pairs are found from the writes only: a write of key k pairs with every access of
    k and of the whole object, a whole-object write also with every read of any key.  Reads
    never pair with reads, so the cost is the number of accesses plus the (access-level)
    dependent pairs, not the square of the accesses of a shared object (the N tasks that all
    read one global or one attribute)."""
    whole = int(_core.KEY_WHOLE)
    read = int(_core.READ)
    Acc = tuple[int, int]  # (event index, actor)
    # object -> key -> (reads, writes), in trace order
    by_object: dict[int, dict[int, tuple[list[Acc], list[Acc]]]] = {}
    n_acc = 0
    for i, ev in enumerate(trace):
        for obj, key, kind, _site_id in ev.accesses:
            reads, writes = by_object.setdefault(obj, {}).setdefault(key, ([], []))
            (reads if kind == read else writes).append((i, ev.actor))
            n_acc += 1
    dependent: set[tuple[int, int]] = set()

    def pair(xs: list[Acc], ys: list[Acc]) -> None:
        for i, a in xs:
            for j, b in ys:
                if a != b and i != j:
                    dependent.add((i, j) if i < j else (j, i))

    n_resources = 0
    for keys in by_object.values():
        n_resources += len(keys)
        whole_reads, whole_writes = keys.get(whole, ([], []))
        for key, (reads, writes) in keys.items():
            pair(writes, reads)
            pair(writes, writes)
            if key != whole:
                pair(writes, whole_reads)
                pair(writes, whole_writes)
                pair(whole_writes, reads)
    actors = {ev.actor for ev in trace}
    return {
        "events": len(trace),
        "actors": len(actors),
        "accesses": n_acc,
        "resources": n_resources,
        "dependent_pairs": len(dependent),
    }
