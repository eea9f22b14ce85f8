"""Property: the serializability oracle's memoized search gives the verdict of trying every
serial order (brute force), on generated classes and call sets (K <= 5).

A generated class interprets small programs: each operation reads and writes integer fields,
appends to a log, stores into a dict (whose insertion order a later operation can observe),
keeps C objects the state key cannot represent (a SimpleNamespace, a bytearray), awaits, raises,
and returns an identity-free value, the shared log, a fresh list or dict (with a cycle), or a
tuple holding both. Calls with the same
operation and argument have one signature (interchangeable). The outcomes judged are the
concurrent execution's (stock asyncio, gather), every serial order's with results swapped
between calls, and perturbed ones; the search and the brute force must agree on each.
"""

from __future__ import annotations

import asyncio
import itertools
import types
from collections.abc import Hashable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chaossloth.serial import Call, SerialOracle, snapshot

INSTR = st.one_of(
    st.tuples(st.just("read"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("write"), st.sampled_from(["a", "b"]), st.integers(0, 2)),
    st.tuples(st.just("log"), st.integers(0, 2)),
    st.tuples(st.just("key"), st.sampled_from(["x", "y"])),
    st.tuples(st.just("unkey"), st.sampled_from(["x", "y"])),
    st.just(("first key",)),
    st.just(("opaque",)),
    st.just(("await",)),
    st.tuples(st.just("raise if"), st.integers(0, 3)),
)
RETURN = st.sampled_from(["reg", "none", "log", "fresh", "pair", "first key", "boxed", "nested"])
OPERATION = st.tuples(st.lists(INSTR, min_size=1, max_size=5), RETURN)


def make_class(ops: list[tuple[list[tuple[Any, ...]], str]]) -> type:
    class Generated:
        def __init__(self) -> None:
            self.a = 0
            self.b = 0
            self.log: list[int] = []
            self.d: dict[str, int] = {}
            self.opaque: Any = None

        async def op(self, i: int, arg: int) -> Any:
            instrs, ret = ops[i]
            reg = arg
            for ins in instrs:
                kind = ins[0]
                if kind == "read":
                    reg = getattr(self, ins[1])
                elif kind == "write":
                    setattr(self, ins[1], reg + ins[2])
                elif kind == "log":
                    self.log.append(reg + ins[1])
                elif kind == "key":
                    self.d[ins[1]] = reg
                elif kind == "unkey":
                    self.d.pop(ins[1], None)
                elif kind == "first key":
                    reg = len(next(iter(self.d), ""))  # the dict's insertion order, observed
                    reg += 1 if next(iter(self.d), "") == "y" else 0
                elif kind == "opaque":
                    self.opaque = (
                        types.SimpleNamespace(v=reg) if reg % 2 else bytearray([reg % 256])
                    )
                elif kind == "await":
                    await asyncio.sleep(0)
                elif reg == ins[1]:  # raise if
                    raise ValueError(reg)
            if ret == "reg":
                return reg
            if ret == "log":
                return self.log
            if ret == "fresh":
                return [reg]
            if ret == "boxed":  # a tuple holding a list: matched by trying every assignment
                return ([reg], self.log)
            if ret == "nested":  # private, with a cycle
                box: dict[str, Any] = {"v": [reg]}
                box["me"] = box
                return box
            if ret == "pair":
                return (reg, self.a)
            if ret == "first key":
                return next(iter(self.d), None)
            return None

    return Generated


def brute_force(cls: type, calls: list[Call], observed: Hashable) -> bool:
    """Every order of the calls, run one after another on a fresh object."""
    for perm in itertools.permutations(range(len(calls))):

        async def serial(perm: tuple[int, ...] = perm) -> tuple[Any, list[Any]]:
            obj = cls()
            by_index: list[Any] = [None] * len(calls)
            for i in perm:
                try:
                    by_index[i] = await obj.op(*calls[i].args)
                except Exception as exc:  # noqa: BLE001 - a raising call is an outcome
                    by_index[i] = exc
            return obj, by_index

        obj, by_index = asyncio.run(serial())
        if snapshot(obj, by_index) == observed:
            return True
    return False


def concurrent(cls: type, calls: list[Call]) -> tuple[Any, list[Any]]:
    async def go() -> tuple[Any, list[Any]]:
        obj = cls()
        rs = await asyncio.gather(*(obj.op(*c.args) for c in calls), return_exceptions=True)
        return obj, list(rs)

    return asyncio.run(go())


def serial_outcome(cls: type, calls: list[Call], order: list[int]) -> tuple[Any, list[Any]]:
    async def go() -> tuple[Any, list[Any]]:
        obj = cls()
        by_index: list[Any] = [None] * len(calls)
        for i in order:
            try:
                by_index[i] = await obj.op(*calls[i].args)
            except Exception as exc:  # noqa: BLE001 - a raising call is an outcome
                by_index[i] = exc
        return obj, by_index

    return asyncio.run(go())


@settings(max_examples=80, deadline=None)
@given(
    ops=st.lists(OPERATION, min_size=1, max_size=3),
    picks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1)), min_size=1, max_size=5),
    data=st.data(),
)
def test_search_agrees_with_every_order(
    ops: list[tuple[list[tuple[Any, ...]], str]],
    picks: list[tuple[int, int]],
    data: st.DataObject,
) -> None:
    cls = make_class(ops)
    calls = [Call("op", (i % len(ops), arg)) for i, arg in picks]
    oracle = SerialOracle(cls, calls, asyncio.run)
    judged: list[tuple[Any, list[Any]]] = [concurrent(cls, calls)]
    order = data.draw(st.permutations(range(len(calls))))
    obj, results = serial_outcome(cls, calls, list(order))
    judged.append((obj, results))
    swap = data.draw(st.permutations(range(len(calls))))
    judged.append((obj, [results[j] for j in swap]))  # results handed to other calls
    obj2, results2 = serial_outcome(cls, calls, list(order))
    obj2.a += data.draw(st.integers(0, 1))  # a state no order may reach
    judged.append((obj2, results2))
    for obj, results in judged:
        observed = snapshot(obj, results)
        expected = brute_force(cls, calls, observed)
        assert (oracle.check(obj, results) is None) is expected
    # a serial order's own outcome is always serializable
    assert oracle.check(*judged[1]) is None
