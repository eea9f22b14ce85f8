"""The engine's memory bounds seen from Python.  Event.clock: the actor-indexed vector clock as a
lazy read-only sequence over a copy of the execution's happens-before, equal to the tuple it
replaces, outliving the execution.  The distinct-trace count: exact up to ``exact_traces``
fingerprints, then a fixed-size estimate that says so (``traces_estimated``)."""

from __future__ import annotations

import random

from chaossloth import _core


def _record(ex: _core.Explorer, n_actors: int, steps: list[tuple[int, int, int]]) -> None:
    """One execution: steps of (actor index, object, kind), each step scheduled by nothing."""
    root = ex.intern(None, 0)
    actors = [root] + [ex.intern(root, i) for i in range(n_actors - 1)]
    assert ex.begin() is True
    for a, obj, kind in steps:
        ex.choose([actors[a]])
        ex.step_begin(actors[a], _core.SCHEDULED_BY_NONE)
        ex.access(obj, 0, kind, 0)
        ex.step_end()
    ex.end(_core.OUTCOME_OK)


def _naive_clocks(n_actors: int, steps: list[tuple[int, int, int]]) -> list[tuple[int, ...]]:
    """Actor-indexed clocks from the transitive closure of dependency (same actor, or the
    same object with a write)."""
    n = len(steps)
    before: list[set[int]] = []
    for b in range(n):
        s: set[int] = set()
        for a in range(b):
            (xa, oa, ka), (xb, ob, kb) = steps[a], steps[b]
            if xa == xb or (oa == ob and _core.WRITE in (ka, kb)):
                s |= before[a] | {a}
        before.append(s)
    out = []
    for b in range(n):
        # as wide as the actors that have stepped so far (ids are interned in order)
        clock = [0] * (max(a for a, _, _ in steps[: b + 1]) + 1)
        for x in before[b] | {b}:
            clock[steps[x][0]] += 1
        out.append(tuple(clock))
    return out


def test_clocks_equal_the_naive_closure_and_behave_as_tuples() -> None:
    rng = random.Random(7)
    for _ in range(20):
        n_actors = rng.randint(2, 40)
        steps = [
            (rng.randrange(n_actors), rng.randrange(6), rng.choice([_core.READ, _core.WRITE]))
            for _ in range(rng.randint(1, 120))
        ]
        ex = _core.Explorer("fifo")
        _record(ex, n_actors, steps)
        trace = ex.trace()
        want = _naive_clocks(n_actors, steps)
        for ev, w in zip(trace, want):
            c = ev.clock
            assert isinstance(c, _core.Clock)
            assert len(c) == len(w)
            assert c == w and w == c
            assert (c != w) is False
            assert tuple(c) == w and list(c) == list(w)
            assert c[-1] == w[-1] and c[1:5] == w[1:5] and c[::-3] == w[::-3]
            assert hash(c) == hash(w)
            assert repr(c) == repr(w)
        assert trace[0].clock != trace[-1].clock or want[0] == want[-1]


def test_clock_outlives_the_execution_and_checks_indices() -> None:
    ex = _core.Explorer("random", max_executions=2)
    _record(ex, 3, [(0, 1, _core.WRITE), (1, 1, _core.READ), (2, 2, _core.WRITE)])
    trace = ex.trace()
    _record(ex, 3, [(2, 2, _core.WRITE)])  # the next execution reuses the engine's trace
    del ex
    assert trace[1].clock == (1, 1)
    assert trace[2].clock == (0, 0, 1)
    for bad in (3, -4):
        try:
            trace[1].clock[bad]
        except IndexError:
            pass
        else:
            raise AssertionError(f"index {bad} accepted")
    try:
        trace[1].clock["a"]  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("a str index accepted")


def _conflicting_run(ex: _core.Explorer) -> None:
    """Three actors of three steps each, every step writing one resource: 1680 orders."""
    root = ex.intern(None, 0)
    actors = [root, ex.intern(root, 0), ex.intern(root, 1)]
    while ex.begin():
        left = dict.fromkeys(actors, 3)
        while any(left.values()):
            enabled = [a for a in actors if left[a]]
            a = enabled[ex.choose(enabled)]
            ex.step_begin(a, _core.SCHEDULED_BY_NONE)
            ex.access(1, 0, _core.WRITE, 0)
            ex.step_end()
            left[a] -= 1
        ex.end(_core.OUTCOME_OK)


def test_distinct_traces_become_an_estimate_past_exact_traces() -> None:
    exact = _core.Explorer("random", seed=3, max_executions=3000, count_traces=True)
    _conflicting_run(exact)
    sketch = _core.Explorer(
        "random", seed=3, max_executions=3000, count_traces=True, exact_traces=10
    )
    _conflicting_run(sketch)
    st, sk = exact.stats(), sketch.stats()
    assert st["traces_estimated"] is False and sk["traces_estimated"] is True
    assert st["distinct_traces"] > 300
    assert abs(sk["distinct_traces"] - st["distinct_traces"]) <= st["distinct_traces"] / 50
