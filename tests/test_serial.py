"""The serializability oracle: snapshots, serial outcomes, and verdicts on concurrent outcomes."""

from __future__ import annotations

import asyncio
import itertools
import types

import pytest

from chaossloth import serial
from chaossloth.serial import MAX_CALLS, Call, SerialError, SerialOracle, snapshot


class Counter:
    def __init__(self) -> None:
        self.value = 0

    async def racy(self) -> int:
        v = self.value
        await asyncio.sleep(0)
        self.value = v + 1
        return self.value

    async def safe(self) -> int:
        self.value += 1
        await asyncio.sleep(0)
        return 0


class Holder:
    def __init__(self) -> None:
        self.conn: object | None = None

    async def get(self) -> object:
        if self.conn is None:
            c = object.__new__(Box)
            c.items = []
            await asyncio.sleep(0)
            self.conn = c
        return self.conn


class Box:
    items: list[int]


def concurrent(factory, calls):
    async def go():
        obj = factory()
        rs = await asyncio.gather(
            *(getattr(obj, c.method)(*c.args) for c in calls), return_exceptions=True
        )
        return obj, list(rs)

    return asyncio.run(go())


def test_snapshot_ignores_dict_insertion_order_but_not_contents() -> None:
    a, b = Counter(), Counter()
    a.d = {"x": 1, "y": 2}
    b.d = {"y": 2, "x": 1}
    assert snapshot(a, []) == snapshot(b, [])
    b.d["x"] = 3
    assert snapshot(a, []) != snapshot(b, [])


def test_snapshot_sees_aliasing() -> None:
    shared = Box()
    shared.items = []
    other = Box()
    other.items = []
    h1, h2 = Holder(), Holder()
    h1.conn = shared
    h2.conn = shared
    same = snapshot(h1, [shared, shared])
    different = snapshot(h2, [shared, other])
    assert same != different


def test_snapshot_handles_cycles_and_types() -> None:
    a = Counter()
    a.me = a
    a.items = [1, 1.0, True, "1", None, (1, 2), frozenset({3})]
    snapshot(a, [])  # no recursion error
    b = Counter()
    b.me = b
    b.items = [1, 1, 1, "1", None, (1, 2), frozenset({3})]
    assert snapshot(a, []) != snapshot(b, [])


def test_lost_update_is_not_serializable() -> None:
    calls = [Call("racy")] * 2
    oracle = SerialOracle(Counter, calls, asyncio.run)
    obj, rs = concurrent(Counter, calls)
    verdict = oracle.check(obj, rs)
    assert verdict is not None
    msg = str(verdict)
    assert "value=1" in msg and "value=2" in msg
    assert msg == (
        "not serializable: after racy() and racy() the object has value=1 and the calls "
        "returned [1, 1]; no serial order gives that (e.g. one after another: value=2, "
        "returning [1, 2])"
    )


def test_atomic_update_is_serializable() -> None:
    calls = [Call("safe")] * 3
    oracle = SerialOracle(Counter, calls, asyncio.run)
    obj, rs = concurrent(Counter, calls)
    assert oracle.check(obj, rs) is None
    assert oracle.serial_runs == 1  # identical calls: one serial run serves every order


def test_return_values_are_matched_per_order() -> None:
    class Seq:
        def __init__(self) -> None:
            self.n = 0

        async def take(self) -> int:
            self.n += 1
            return self.n

    calls = [Call("take")] * 2
    oracle = SerialOracle(Seq, calls, asyncio.run)
    assert len(oracle.serial_outcomes()) == 2  # [1, 2] and [2, 1]
    s = Seq()
    s.n = 2
    assert oracle.check(s, [2, 1]) is None
    assert oracle.check(s, [1, 1]) is not None


def test_different_calls_enumerate_orders() -> None:
    class Acc:
        def __init__(self) -> None:
            self.v = 1

        async def add(self, k: int) -> None:
            self.v += k

        async def mul(self, k: int) -> None:
            self.v *= k

    calls = [Call("add", (2,)), Call("mul", (3,))]
    oracle = SerialOracle(Acc, calls, asyncio.run)
    for v, ok in ((9, True), (5, True), (3, False)):
        a = Acc()
        a.v = v
        assert (oracle.check(a, [None, None]) is None) is ok
    assert oracle.serial_runs == 2  # each order of the two calls ran once


def test_double_initialisation_is_not_serializable() -> None:
    calls = [Call("get")] * 2
    oracle = SerialOracle(Holder, calls, asyncio.run)
    obj, rs = concurrent(Holder, calls)
    assert rs[0] is not rs[1]
    assert oracle.check(obj, rs) is not None


def test_raised_exceptions_are_outcomes() -> None:
    class Once:
        def __init__(self) -> None:
            self.used = False

        async def use(self) -> str:
            if self.used:
                raise RuntimeError("used twice")
            await asyncio.sleep(0)
            self.used = True
            return "ok"

    calls = [Call("use")] * 2
    oracle = SerialOracle(Once, calls, asyncio.run)
    obj, rs = concurrent(Once, calls)
    assert rs == ["ok", "ok"]
    assert oracle.check(obj, rs) is not None  # serially the second call raises
    o = Once()
    o.used = True
    assert oracle.check(o, ["ok", RuntimeError("used twice")]) is None


def test_serial_run_failure_is_reported() -> None:
    def broken_run(coro):
        coro.close()
        raise RuntimeError("loop exploded")

    oracle = SerialOracle(Counter, [Call("racy")] * 2, broken_run)
    with pytest.raises(SerialError, match="did not complete"):
        oracle.prepare()


def test_too_many_calls_refused() -> None:
    SerialOracle(Counter, [Call("racy")] * MAX_CALLS, asyncio.run)
    with pytest.raises(ValueError, match=f"at most {MAX_CALLS}"):
        SerialOracle(Counter, [Call("racy")] * (MAX_CALLS + 1), asyncio.run)


# ------------------------------------------------------------------ the search's mechanisms


class Registry:
    """Operations whose outcome depends on what the state key must tell apart."""

    def __init__(self) -> None:
        self.ns: types.SimpleNamespace | None = None
        self.d: dict[str, int] = {}
        self.n = 0
        self.seen = 0

    async def put(self, v: int) -> None:
        self.ns = types.SimpleNamespace(v=v)  # a C object: no exact state key

    async def get(self) -> int:
        assert self.ns is not None
        return self.ns.v

    async def key(self, k: str) -> None:
        self.d[k] = 0

    async def first(self) -> str:
        self.seen = len(self.d)
        return next(iter(self.d), "")  # the dict's insertion order, which snapshots do not show

    async def fresh(self) -> list[int]:
        self.n += 1
        return [self.n]

    async def boxed(self) -> tuple[list[int], list[int]]:
        self.n += 1
        self.last = [self.n]
        return ([self.n], self.last)  # shares a list with the object: every assignment tried


def serial_run(factory, calls, order):
    async def go():
        obj = factory()
        by_index = [None] * len(calls)
        for i in order:
            by_index[i] = await getattr(obj, calls[i].method)(*calls[i].args)
        return obj, by_index

    return asyncio.run(go())


def test_states_without_exact_key_are_not_merged() -> None:
    # put(1), put(2) in either order differ only inside a SimpleNamespace; only the order
    # put(2), put(1), get() gives v == 1 with get() returning 1
    calls = [Call("put", (1,)), Call("put", (2,)), Call("get")]
    oracle = SerialOracle(Registry, calls, asyncio.run)
    assert oracle.check(*serial_run(Registry, calls, [1, 0, 2])) is None
    obj, results = serial_run(Registry, calls, [1, 0, 2])
    obj.ns.v = 3
    assert oracle.check(obj, results) is not None


def test_dict_insertion_order_is_part_of_the_state() -> None:
    # key('x'), key('y') in either order give equal snapshots, but first() tells them apart
    calls = [Call("key", ("x",)), Call("key", ("y",)), Call("first")]
    oracle = SerialOracle(Registry, calls, asyncio.run)
    for order in itertools.permutations(range(3)):
        assert oracle.check(*serial_run(Registry, calls, list(order))) is None, order


@pytest.mark.parametrize("method", ["fresh", "boxed"])  # matched directly / every assignment
def test_mutable_results_may_go_to_any_call_of_their_signature(method: str) -> None:
    calls = [Call(method)] * 3
    oracle = SerialOracle(Registry, calls, asyncio.run)
    for order in itertools.permutations(range(3)):
        assert oracle.check(*serial_run(Registry, calls, list(order))) is None, order
    obj, results = serial_run(Registry, calls, [0, 1, 2])
    results[0] = [7] if method == "fresh" else ([7], results[0][1])
    assert oracle.check(obj, results) is not None
    assert oracle.serial_runs == 1  # identical calls: one serial execution serves every order


def test_distinct_fresh_results_are_matched_without_trying_assignments() -> None:
    calls = [Call("fresh")] * 12
    oracle = SerialOracle(Registry, calls, asyncio.run)
    obj, results = serial_run(Registry, calls, list(range(12))[::-1])
    assert oracle.check(obj, results) is None
    assert oracle.nodes == 12  # one node per depth, not 12! assignments
    results[3], results[4] = [5], [5]
    assert oracle.check(obj, results) is not None


def test_identical_calls_search_is_linear() -> None:
    calls = [Call("safe")] * 8
    oracle = SerialOracle(Counter, calls, asyncio.run)
    obj, rs = concurrent(Counter, calls)
    assert oracle.check(obj, rs) is None
    assert oracle.serial_runs == 1 and oracle.nodes == 8  # not 8! orders
    bad = Counter()
    bad.value = 7
    verdict = oracle.check(bad, rs)
    assert verdict is not None
    assert str(verdict) == (
        "not serializable: after 8 calls the object has value=7 and the calls returned "
        "[0, 0, 0, 0, 0, 0, 0, 0]; run one after another they give value=8 and return "
        "[0, 0, 0, 0, 0, 0, 0, 0]"
    )


def test_message_is_built_only_when_asked() -> None:
    calls = [Call("racy")] * 2
    oracle = SerialOracle(Counter, calls, asyncio.run)
    obj, rs = concurrent(Counter, calls)
    verdict = oracle.check(obj, rs)
    assert verdict is not None and verdict._message is None
    assert verdict.message.startswith("not serializable: after racy() and racy()")
    assert verdict._message is not None


def test_search_budget_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # results the fast matching does not cover: the assignments of results to calls outgrow it
    monkeypatch.setattr(serial, "MAX_SEARCH_NODES", 2000)
    calls = [Call("boxed")] * 8
    oracle = SerialOracle(Registry, calls, asyncio.run)
    obj, results = serial_run(Registry, calls, list(range(8)))
    results[0] = ([99], results[0][1])
    with pytest.raises(SerialError, match="visited more than"):
        oracle.check(obj, results)


def test_each_result_is_matched_once() -> None:
    # every serial order returns [0, 0]; the observed [0, 5] must not pass because its state does
    calls = [Call("safe")] * 2
    oracle = SerialOracle(Counter, calls, asyncio.run)
    obj, _ = concurrent(Counter, calls)
    assert oracle.check(obj, [0, 0]) is None
    assert oracle.check(obj, [0, 5]) is not None


def test_equal_states_are_searched_once() -> None:
    class Adder:
        def __init__(self) -> None:
            self.v = 0

        async def add(self, k: int) -> None:
            self.v += k

    calls = [Call("add", (k,)) for k in (1, 2, 4, 8)]
    oracle = SerialOracle(Adder, calls, asyncio.run)
    bad = Adder()
    bad.v = 14  # no order reaches it: the search visits every subset once
    assert oracle.check(bad, [None] * 4) is not None
    assert oracle.nodes == 2**4 - 1  # each proper subset of the calls once (not 4! prefixes)


class Relay:
    """Results that share objects with each other or with the state."""

    def __init__(self) -> None:
        self.box: list[int] | None = None
        self.log: list[int] = []
        self.d: dict[str, int] = {}

    async def hand(self) -> list[list[int]]:
        # the first caller's result and the second's hold the same box, which the object drops
        if self.box is None:
            self.box = [0]
            return [self.box]
        box, self.box = self.box, None
        box.append(1)
        return [box]

    async def mixed(self) -> tuple[list[int]]:
        # equal results, one holding the object's log, the other a list of its own
        if not self.log:
            self.log.append(1)
            return (self.log,)
        return ([1],)

    async def mark(self, flag: int) -> list[int]:
        # what it returns depends on whether a call ran before it
        reg = 1 if self.d else 0
        self.d["x"] = reg
        return [reg]


def test_results_sharing_an_object_are_matched() -> None:
    calls = [Call("hand")] * 2
    oracle = SerialOracle(Relay, calls, asyncio.run)
    obj, results = serial_run(Relay, calls, [0, 1])
    assert results[0][0] is results[1][0]
    assert oracle.check(obj, results) is None
    assert oracle.check(obj, results[::-1]) is None
    assert oracle.check(obj, [[[0, 1]], [[0, 1]]]) is not None  # two boxes: no order


def test_equal_results_that_differ_in_sharing_are_both_tried() -> None:
    calls = [Call("mixed")] * 2
    oracle = SerialOracle(Relay, calls, asyncio.run)
    obj, results = serial_run(Relay, calls, [0, 1])
    assert oracle.check(obj, results[::-1]) is None  # the other order hands them out so


def test_results_keep_the_signature_of_their_call() -> None:
    # mark(0), mark(0), mark(1): whichever runs first returns [0], the others [1]; the states
    # after mark(0), mark(1) and after mark(1), mark(0) are equal, but not which call got [0]
    calls = [Call("mark", (0,)), Call("mark", (0,)), Call("mark", (1,))]
    oracle = SerialOracle(Relay, calls, asyncio.run)
    obj, results = serial_run(Relay, calls, [0, 1, 2])
    assert oracle.check(obj, [results[1], results[2], results[0]]) is None  # mark(1) first
