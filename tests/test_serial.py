"""The serializability oracle: snapshots, serial outcomes, and verdicts on concurrent outcomes."""

from __future__ import annotations

import asyncio

import pytest

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
