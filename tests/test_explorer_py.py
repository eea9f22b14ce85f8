"""chaossloth._core.Explorer and the engine's analyses as seen from Python."""

from __future__ import annotations

import pytest

from chaossloth import _core


def _run(ex: _core.Explorer, program: dict[int, list[list[tuple[int, int, int]]]]) -> list[int]:
    """Runs one execution of a program of actors, each a list of steps (each a list of
    (object, key, kind) accesses), all enabled from the start. Returns the schedule."""
    pos = {a: 0 for a in program}
    while True:
        enabled = [a for a in sorted(program) if pos[a] < len(program[a])]
        if not enabled:
            break
        actor = enabled[ex.choose(enabled)]
        ex.step_begin(actor, _core.SCHEDULED_BY_NONE)
        for obj, key, kind in program[actor][pos[actor]]:
            ex.access(obj, key, kind, 0)
        ex.step_end()
        pos[actor] += 1
    return ex.schedule()


def _actors(ex: _core.Explorer, n: int) -> list[int]:
    root = ex.intern(None, 0)
    return [root] + [ex.intern(root, i) for i in range(n - 1)]


def test_constants() -> None:
    assert _core.READ != _core.WRITE
    assert _core.KEY_WHOLE == 2**64 - 1
    assert {_core.OUTCOME_OK, _core.OUTCOME_FAILED, _core.OUTCOME_ABORTED} == {0, 1, 2}
    assert _core.SCHEDULED_BY_NONE == -1
    assert _core.AFTER_ALL == -2
    assert "pct" in _core.STRATEGIES


def test_fifo_round_trip() -> None:
    ex = _core.Explorer("fifo")
    assert ex.strategy == "fifo"
    r, t = _actors(ex, 2)
    assert ex.actor_path(t) == (r, 0)
    assert ex.actor_path(r) == (None, 0)
    assert ex.intern(r, 0) == t
    assert ex.divergence() is None
    assert ex.begin() is True
    sched = _run(ex, {r: [[(1, 2, _core.WRITE)]], t: [[(1, 2, _core.READ)], []]})
    assert sched == [r, t, t]
    trace = ex.trace()
    assert [e.actor for e in trace] == [r, t, t]
    assert trace[0].scheduled_by == _core.SCHEDULED_BY_NONE
    assert isinstance(trace[0].clock, _core.Clock) and trace[0].clock == (1,)
    ex.end(_core.OUTCOME_FAILED)
    stats = ex.stats()
    assert stats["executions"] == 1 and stats["failing"] == 1
    assert stats["max_depth"] == 3
    assert ex.begin() is False


def test_trace_records_accesses_and_clocks() -> None:
    ex = _core.Explorer("fifo")
    r, t = _actors(ex, 2)
    ex.begin()
    _run(ex, {r: [[(7, -3, _core.WRITE)]], t: [[(7, -3, _core.READ), (7, _core.KEY_WHOLE, 1)]]})
    trace = ex.trace()
    assert trace[0].accesses == [(7, 2**64 - 3, _core.WRITE, 0)]
    assert [e.actor_step for e in trace] == [0, 0]
    assert len(trace[1].accesses) == 2
    assert ex.happens_before(0, 1) is True
    assert ex.dependent(0, 1) is True
    assert 0 in ex.predecessors(1)
    assert trace[1].clock[r] >= 1


def test_bad_arguments_give_one_readable_error() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        _core.Explorer("nope")
    with pytest.raises(TypeError, match="strategy must be a str"):
        _core.Explorer(3)
    with pytest.raises(ValueError, match="pct_depth"):
        _core.Explorer("pct", pct_depth=0)
    with pytest.raises(ValueError, match="seed"):
        _core.Explorer("random", seed=-1)
    with pytest.raises(ValueError, match="time_limit"):
        _core.Explorer("random", time_limit=-1.0)
    with pytest.raises(ValueError, match="replay"):
        _core.Explorer("replay")
    with pytest.raises(TypeError, match="replay"):
        _core.Explorer("replay", replay=5)
    with pytest.raises(TypeError):
        _core.Explorer("fifo", 3)  # keyword-only options
    ex = _core.Explorer("fifo")
    r = ex.intern(None, 0)
    with pytest.raises(ValueError, match="unknown parent"):
        ex.intern(99, 0)
    with pytest.raises(ValueError, match="unknown actor"):
        ex.actor_path(42)
    with pytest.raises(_core.EngineError, match="out of sequence"):
        ex.choose([r])
    ex.begin()
    with pytest.raises(ValueError, match="at least one"):
        ex.choose([])
    with pytest.raises(TypeError, match="enabled actor"):
        ex.choose(["a"])
    with pytest.raises(ValueError, match="scheduled_by"):
        ex.step_begin(r, 5)
    ex.step_begin(r, _core.SCHEDULED_BY_NONE)
    with pytest.raises(ValueError, match="kind"):
        ex.access(1, 2, 7, 0)
    ex.step_end()
    with pytest.raises(IndexError):
        ex.happens_before(0, 3)
    with pytest.raises(ValueError, match="outcome"):
        ex.end(9)


def test_choose_accepts_any_sequence_and_many_actors() -> None:
    ex = _core.Explorer("fifo")
    actors = _actors(ex, 100)
    ex.begin()
    assert ex.choose(actors) == 0
    assert ex.choose(tuple(actors)) == 0
    assert ex.choose(iter(actors[:3])) == 0


def _three_actor_program(
    ex: _core.Explorer,
) -> tuple[list[int], dict[int, list[list[tuple[int, int, int]]]]]:
    actors = _actors(ex, 3)
    step = [(1, 0, _core.READ), (1, 0, _core.WRITE)]
    return actors, {a: [step, step, step] for a in actors}


def test_random_is_reproducible_and_replayable() -> None:
    runs: list[list[list[int]]] = []
    for _ in range(2):
        ex = _core.Explorer("random", seed=1234, max_executions=8)
        _, program = _three_actor_program(ex)
        scheds = []
        while ex.begin():
            scheds.append(_run(ex, program))
            ex.end(_core.OUTCOME_OK)
        assert ex.stats()["budget_hit"] is True
        runs.append(scheds)
    assert runs[0] == runs[1]
    assert len({tuple(s) for s in runs[0]}) > 4
    for sched in runs[0]:
        rep = _core.Explorer("replay", replay=sched)
        _, program = _three_actor_program(rep)
        assert rep.begin()
        assert _run(rep, program) == sched
        rep.end(_core.OUTCOME_OK)
        assert rep.divergence() is None
        assert rep.begin() is False


def test_replay_divergence_is_reported() -> None:
    ex = _core.Explorer("replay", replay=[0, 0, 1])
    r, t = _actors(ex, 2)
    ex.begin()
    assert ex.choose([r, t]) == 0
    ex.step_begin(r, _core.SCHEDULED_BY_NONE)
    ex.step_end()
    with pytest.raises(_core.DivergedError):
        ex.choose([t])
    assert ex.divergence() == {"step": 1, "expected": r, "enabled": 1}
    ex.end(_core.OUTCOME_ABORTED)
    assert ex.stats()["aborted"] == 1

    past = _core.Explorer("replay", replay=[0])
    r = _actors(past, 1)[0]
    past.begin()
    past.choose([r])
    past.step_begin(r, _core.SCHEDULED_BY_NONE)
    past.step_end()
    with pytest.raises(_core.DivergedError):
        past.choose([r])
    assert past.divergence() == {"step": 1, "expected": None, "enabled": 1}


@pytest.mark.parametrize("strategy", ["pct", "pos"])
def test_samplers_reproducible(strategy: str) -> None:
    results = []
    for _ in range(2):
        ex = _core.Explorer(strategy, seed=9, max_executions=10, pct_depth=2)
        _, program = _three_actor_program(ex)
        scheds = []
        while ex.begin():
            scheds.append(_run(ex, program))
            ex.end(_core.OUTCOME_OK)
        results.append(scheds)
    assert results[0] == results[1]
    assert len(results[0]) == 10


def test_diagnose_lost_update() -> None:
    ex = _core.Explorer("fifo")
    _, a, b = _actors(ex, 3)
    ex.begin()
    steps = [
        (a, [(50, 7, _core.READ, 11)]),
        (b, [(50, 7, _core.READ, 21)]),
        (b, [(50, 7, _core.WRITE, 22)]),
        (a, [(99, 0, _core.READ, 0), (50, 7, _core.WRITE, 12)]),
    ]
    for actor, accs in steps:
        ex.step_begin(actor, _core.SCHEDULED_BY_NONE)
        for acc in accs:
            ex.access(*acc)
        ex.step_end()
    ex.end(_core.OUTCOME_FAILED)
    found = _core.diagnose(ex)
    assert len(found) == 1
    f = found[0]
    assert f["kind"] == "lost_update" and f["pattern"] == "R-W-W"
    assert (f["local_actor"], f["remote_actor"]) == (a, b)
    assert (f["p_event"], f["r_event"], f["c_event"]) == (0, 2, 3)
    # global indices into the execution's flattened access list
    assert (f["p_access"], f["r_access"], f["c_access"]) == (0, 2, 4)
    assert (f["p_site"], f["r_site"], f["c_site"]) == (11, 22, 12)
    assert (f["object"], f["key"]) == (50, 7)
    assert _core.diagnose(ex, ignore=[50]) == []
    assert _core.diagnose(ex, limit=0) == []
    assert _core.diagnose(ex, limit=5) == found
    with pytest.raises(TypeError, match="Explorer"):
        _core.diagnose(object())


def test_wait_for_cycle() -> None:
    edges = [(4, "l0", 1), (2, "l1", 3), (1, "l2", 2), (3, "l3", 1)]
    assert _core.wait_for_cycle(edges) == [(2, "l1", 3), (3, "l3", 1), (1, "l2", 2)]
    assert _core.wait_for_cycle(edges[:3]) is None
    assert _core.wait_for_cycle([]) is None
    with pytest.raises(TypeError, match="edge 0"):
        _core.wait_for_cycle([(1, 2)])


def test_window_estimate_recovers_a_known_window() -> None:
    import math
    import random

    rng = random.Random(5)
    true_w = 4e-4
    offsets = [math.exp(rng.uniform(math.log(1e-6), math.log(1e-1))) for _ in range(600)]
    failed = [(x < true_w) != (rng.random() < 0.05) for x in offsets]
    est = _core.window_estimate(offsets, failed, at=[true_w / 20, true_w * 20])
    assert est["lo"] <= true_w <= est["hi"]
    assert est["lo"] <= est["median"] <= est["hi"]
    assert est["estimate"] == est["median"]
    assert est["n"] == 600 and est["failures"] == sum(failed)
    assert est["p_fail"][0] > 0.8
    assert est["p_fail"][1] < 0.2
    small = _core.window_estimate(offsets[:40], failed[:40])
    assert math.log(small["hi"] / small["lo"]) > math.log(est["hi"] / est["lo"])
    with pytest.raises(ValueError, match="differ in length"):
        _core.window_estimate([0.1], [])
    with pytest.raises(ValueError, match="offsets\\[0\\]"):
        _core.window_estimate([-1.0], [1])
    with pytest.raises(TypeError, match="offsets\\[0\\]"):
        _core.window_estimate(["x"], [1])


def test_rate_estimate() -> None:
    r = _core.rate_estimate(0, 0)
    assert r["mean"] == pytest.approx(0.5)
    assert r["lo"] == pytest.approx(0.025) and r["hi"] == pytest.approx(0.975)
    r = _core.rate_estimate(3, 1000)
    assert r["lo"] < 0.003 < r["hi"] < 0.01
    with pytest.raises(ValueError, match="exceed"):
        _core.rate_estimate(5, 4)
    with pytest.raises(ValueError, match="failures"):
        _core.rate_estimate(-1, 4)
