"""Stage 2's counts (stages/alphabet.count) against the all-pairs definition, on random traces,
including whole-object accesses and one heavily shared object."""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from chaossloth import _core
from chaossloth.stages.alphabet import count


class _Ev(NamedTuple):
    actor: int
    accesses: list[tuple[int, int, int, int]]


def _reference(trace: list[Any]) -> dict[str, int]:
    """Every pair of accesses of one object: overlapping keys, a write, two actors."""
    whole = int(_core.KEY_WHOLE)
    accs = [
        (i, ev.actor, obj, key, kind)
        for i, ev in enumerate(trace)
        for obj, key, kind, _ in ev.accesses
    ]
    dependent = set()
    for x in range(len(accs)):
        i, a, o, k, kd = accs[x]
        for y in range(x + 1, len(accs)):
            j, b, o2, k2, kd2 = accs[y]
            if o != o2 or a == b or i == j:
                continue
            if (k == k2 or whole in (k, k2)) and _core.WRITE in (kd, kd2):
                dependent.add((min(i, j), max(i, j)))
    return {
        "events": len(trace),
        "actors": len({ev.actor for ev in trace}),
        "accesses": len(accs),
        "resources": len({(o, k) for _, _, o, k, _ in accs}),
        "dependent_pairs": len(dependent),
    }


def test_count_matches_all_pairs() -> None:
    rng = random.Random(11)
    whole = int(_core.KEY_WHOLE)
    for _ in range(300):
        n_actors = rng.randint(1, 6)
        trace = []
        for _ in range(rng.randint(0, 30)):
            accesses = []
            for _ in range(rng.randint(0, 5)):
                obj = rng.choice([1, 1, 1, 2, 3])
                key = whole if rng.random() < 0.15 else rng.randint(0, 3)
                kind = _core.WRITE if rng.random() < 0.35 else _core.READ
                accesses.append((obj, key, int(kind), 0))
            trace.append(_Ev(rng.randrange(n_actors), accesses))
        assert count(trace) == _reference(trace)
