"""A set of objects hashed by identity iterates in an order of addresses, which changes between
executions of one schedule; an instrumented loop over one walks it in the order of the objects'
canonical ids instead (ext/hooks.c, "setorder"), and keeps the set iterator's contract."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, exec_source, run_in_step

from chaossloth import _core

SOURCE = """
class Client:
    pass

def loop_over(s):
    return [c for c in s]

def for_loop(s):
    out = []
    for c in s:
        out.append(c)
    return out

def grow_while_iterating(s):
    for c in s:
        s.add(Client())

def mixed(s):
    return [x for x in s]

def as_list(s):
    return list(s)

def as_tuple(s):
    return list(tuple(s))

def by_tie(s):
    return sorted(s, key=lambda c: 0)

def numbered(s):
    return [c for _, c in enumerate(s)]

def zipped(s):
    return [c for c, _ in zip(s, range(1000))]

def mapped(s):
    return list(map(lambda c: c, s))

def filtered(s):
    return list(filter(None, s))

def min_of_none(s):
    return [min(s, key=lambda c: 0)]
"""


def _ns() -> dict[str, Any]:
    return exec_source(SOURCE, "/tmp/cs_set_order.py", True, "cs_set_order")


def _run_in_canonical_order(call: Any, objs: list[Any]) -> tuple[Any, list[Any]]:
    """call()'s result in a step of an explored execution, and `objs` sorted by the canonical
    ids that execution gave them."""
    ids: dict[int, int] = {}

    def ids_of() -> None:
        ids.update({id(c): _core.hooks_object_id(c) for c in objs})

    got, _ = run_in_step(call, before_detach=ids_of)
    return got, sorted(objs, key=lambda c: ids[id(c)])


@pytest.mark.parametrize("fn", ["loop_over", "for_loop"])
def test_a_loop_walks_a_set_of_objects_in_canonical_order(fn: str) -> None:
    ns = _ns()
    clients = [ns["Client"]() for _ in range(40)]
    s = set(clients)
    got, canonical = _run_in_canonical_order(lambda: ns[fn](s), clients)
    assert sorted(got, key=id) == sorted(clients, key=id)  # every item, once
    assert got == canonical
    assert ns[fn](frozenset(s)) == list(frozenset(s))  # no explorer: the set's own order


@pytest.mark.parametrize(
    "fn", ["as_list", "as_tuple", "by_tie", "numbered", "zipped", "mapped", "filtered"]
)
def test_a_builtin_that_iterates_a_set_of_objects_walks_it_in_canonical_order(fn: str) -> None:
    """list(tasks), sorted(clients, key=...) (ties keep the input order), zip, map...: the
    sequence of a for loop over the set (async-lru's cache_close cancels list(self.__tasks))."""
    ns = _ns()
    clients = [ns["Client"]() for _ in range(40)]
    s = set(clients)
    got, canonical = _run_in_canonical_order(lambda: ns[fn](s), clients)
    assert got == canonical
    assert ns[fn](frozenset(s)) == list(frozenset(s))  # no explorer: the set's own order


def test_min_of_a_set_of_objects_with_equal_keys_is_the_first_in_canonical_order() -> None:
    ns = _ns()
    clients = [ns["Client"]() for _ in range(10)]
    got, canonical = _run_in_canonical_order(lambda: ns["min_of_none"](set(clients)), clients)
    assert got == canonical[:1]


def test_a_set_that_changes_size_raises_as_the_set_iterator_does() -> None:
    ns = _ns()
    s = {ns["Client"](), ns["Client"]()}
    with pytest.raises(RuntimeError, match="Set changed size during iteration"):
        run_in_step(lambda: ns["grow_while_iterating"](s))


def test_items_with_a_hash_of_their_own_keep_the_set_order() -> None:
    ns = _ns()
    s = {"b", "a", ns["Client"](), 3}
    got, _ = run_in_step(lambda: ns["mixed"](s))
    assert got == list(s)


BROADCAST = """
import asyncio

class Client:
    def __init__(self, name):
        self.name = name
        self.inbox = []

    async def send(self, msg):
        await asyncio.sleep(0)
        self.inbox.append(msg)

class Hub:
    def __init__(self):
        self.clients = set()

    async def broadcast(self, msg):
        for c in self.clients:
            asyncio.get_running_loop().create_task(c.send(msg))
        await asyncio.sleep(0)

async def main():
    hub = Hub()
    for n in "abcd":
        hub.clients.add(Client(n))
    await asyncio.gather(hub.broadcast(1), hub.broadcast(2))
    await asyncio.sleep(0.1)
    assert all(len(c.inbox) == 2 for c in hub.clients)
"""


def test_a_broadcast_over_a_set_of_clients_is_explored(tmp_path: Path) -> None:
    """Each execution started the clients' tasks in another order: exit 2 from DPOR's replay
    check ("started other work")."""
    (tmp_path / "hub.py").write_text(textwrap.dedent(BROADCAST))
    for jobs in ("1", "2"):
        r = cli("check", "hub.py", "--scenario", "main", "--no-telemetry", "--no-database",
                "--jobs", jobs, cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        assert "PASS" in r.stdout and "complete" in r.stdout, r.stdout


POP_SOURCE = """
class Conn:
    pass

def pop_one(idle):
    return idle.pop()

def take_all(idle):
    out = []
    while idle:
        out.append(idle.pop())
    return out
"""


def test_set_pop_takes_the_first_item_in_canonical_order() -> None:
    """A pool's idle set handed out its connections in an order of addresses."""
    ns = exec_source(POP_SOURCE, "/tmp/cs_set_pop.py", True, "cs_set_pop")
    conns = [ns["Conn"]() for _ in range(30)]
    ids: dict[int, int] = {}

    def ids_of() -> None:
        ids.update({id(c): _core.hooks_object_id(c) for c in conns})

    got, _ = run_in_step(lambda: ns["take_all"](set(conns)), before_detach=ids_of)
    assert got == sorted(conns, key=lambda c: ids[id(c)])
    with pytest.raises(KeyError, match="pop from an empty set"):
        run_in_step(lambda: ns["pop_one"](set()))
    mixed = {1, "a", ns["Conn"]()}
    got, _ = run_in_step(lambda: ns["take_all"](set(mixed)))
    assert sorted(map(id, got)) == sorted(map(id, mixed))
