"""Insertion order: dicts, and the namespaces kept in dicts (instance and class attributes,
module globals), iterate in the order their keys were inserted, so two tasks inserting
different keys commute in content but not in order (``list(d)``, ``popitem()``, ``vars(obj)``,
``json.dumps`` tell the orders apart).  The hooks record an insertion as a write of the
holder's order key as well as of the key (ext/hooks.c, "insertion order"); an update of a
present key and a deletion write their key only.

Each program has two tasks, each inserting (or updating, or deleting) one key after a yield;
DPOR must reach the outcomes brute force reaches, and the executions it needs say whether the
two steps were ordered (2) or independent (1).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_loop_model import load

from chaossloth import runner

_TWO_TASKS = """
import asyncio, collections, json

class Box:
    pass

class Defaults:
    a = 0
    b = 0

{setup}

async def one(s, k):
    await asyncio.sleep(0)
{op}

async def main(box):
    s = make()
    await asyncio.gather(one(s, "a"), one(s, "b"))
    box["final"] = {observe}
"""

#: name -> (setup defining make(), the operation on s and k, what the end observes,
#: executions DPOR needs)
CASES: dict[str, tuple[str, str, str, int]] = {
    "dict store": ("def make(): return {}", "    s[k] = 1", "tuple(s)", 2),
    "dict setdefault": (
        "def make(): return {}",
        "    s.setdefault(k, []).append(1)",
        "tuple(s)",
        2,
    ),
    "defaultdict lookup": (
        "def make(): return collections.defaultdict(list)",
        "    s[k].append(1)",
        "tuple(s)",
        2,
    ),
    "defaultdict lookup, object keys": (
        (
            "class Key:\n    def __init__(self, n):\n        self.n = n\n\n"
            "KEYS = {'a': Key('a'), 'b': Key('b')}\n\n"
            "def make(): return collections.defaultdict(int)"
        ),
        "    s[KEYS[k]]",
        "tuple(key.n for key in s)",
        2,
    ),
    "Counter increment": (
        "def make(): return collections.Counter()",
        "    s[k] += 1",
        "tuple(s)",
        2,
    ),
    "OrderedDict store": (
        "def make(): return collections.OrderedDict()",
        "    s[k] = 1",
        "tuple(s)",
        2,
    ),
    "popitem after stores": ("def make(): return {}", "    s[k] = 1", "s.popitem()", 2),
    "json of a results dict": ("def make(): return {}", "    s[k] = 2", "json.dumps(s)", 2),
    "new attributes": ("def make(): return Box()", "    setattr(s, k, 1)", "tuple(vars(s))", 2),
    "attributes through __dict__": (
        "def make(): return Box()",
        "    s.__dict__[k] = 1",
        "tuple(vars(s))",
        2,
    ),
    "attributes shadowing class defaults": (
        "def make(): return Defaults()",
        "    if k == 'a':\n        s.a = 1\n    else:\n        s.b = 1",
        "tuple(vars(s))",
        2,
    ),
    # updates and deletions keep the other keys' order: the two steps are independent
    "dict updates": ("def make(): return {'a': 0, 'b': 0}", "    s[k] = 1", "tuple(s.items())", 1),
    "dict deletions": (
        "def make(): return {'a': 0, 'b': 0, 'c': 0}",
        "    del s[k]",
        "tuple(s)",
        1,
    ),
    "attribute updates": (
        "def make():\n    b = Box()\n    b.a = b.b = 0\n    return b",
        "    if k == 'a':\n        s.a = 1\n    else:\n        s.b = 1",
        "tuple(vars(s).items())",
        1,
    ),
}

_GLOBALS = """
import asyncio

async def put_a():
    global ga
    await asyncio.sleep(0)
    ga = 1

async def put_b():
    global gb
    await asyncio.sleep(0)
    gb = 1

async def bump_a():
    global ea
    await asyncio.sleep(0)
    ea += 1

async def bump_b():
    global eb
    await asyncio.sleep(0)
    eb += 1

ea = eb = 0
last = 0

async def main(box):
    if box["mode"] == "insert":
        await asyncio.gather(put_a(), put_b())
    else:
        await asyncio.gather(bump_a(), bump_b())
    box["final"] = tuple(k for k in globals() if k in ("ga", "gb", "ea", "eb"))
"""


def _explore(module: Any, strategy: str, **box_init: Any) -> tuple[set[Any], int]:
    seen: set[Any] = set()
    holder: list[dict[str, Any]] = [{}]

    def factory() -> Any:
        holder[0] = dict(box_init)
        return module.main(holder[0])

    def on_execution(r: runner.ExecutionResult) -> None:
        seen.add((r.outcome, holder[0].get("final")))

    res = runner.explore(
        factory,
        strategy=strategy,
        stop_on_failure=False,
        detail_failure=False,
        on_execution=on_execution,
    )
    assert res.complete
    return seen, res.executions


@pytest.mark.parametrize("name", sorted(CASES))
def test_insertions_order_each_other_and_updates_do_not(name: str) -> None:
    setup, op, observe, needed = CASES[name]
    module = load(_TWO_TASKS.format(setup=setup, op=op, observe=observe))
    brute, _ = _explore(module, "exhaustive")
    dpor, executions = _explore(module, "dpor")
    assert dpor == brute
    assert len(brute) == needed  # each order of two insertions is its own outcome
    assert executions == needed


@pytest.mark.parametrize(("mode", "needed"), [("insert", 2), ("update", 1)])
def test_new_globals_order_each_other_and_updates_do_not(mode: str, needed: int) -> None:
    module = load(_GLOBALS)
    brute, _ = _explore(module, "exhaustive", mode=mode)
    dpor, executions = _explore(module, "dpor", mode=mode)
    assert dpor == brute
    assert len(brute) == needed
    assert executions == needed
