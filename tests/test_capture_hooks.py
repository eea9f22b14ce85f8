"""The C access hooks: what they record, and that they record nothing without an explorer."""

from __future__ import annotations

import gc
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

from chaossloth import _core
from chaossloth.capture import sites
from chaossloth.capture.importer import _register_file
from chaossloth.capture.instrument import compile_instrumented, hook_namespace

R, W, WHOLE = _core.READ, _core.WRITE, _core.KEY_WHOLE


def h(x: Any) -> int:
    """The engine's key for x: its hash as an unsigned 64-bit value."""
    return hash(x) & (2**64 - 1)


def recorded(fn: Callable[[], Any]) -> tuple[Any, list[tuple[int, int, int, int]]]:
    """Runs fn inside one open step; returns its value and the step's accesses
    (object, key, kind, site)."""
    ex = _core.Explorer("fifo")
    assert ex.begin()
    ex.step_begin(ex.intern(None, 0), -1)
    _core.hooks_attach(ex)
    try:
        value = fn()
    finally:
        _core.hooks_attach(None)
        ex.step_end()
    accesses = [tuple(a) for a in ex.trace()[0].accesses]
    ex.end(0)
    return value, accesses  # type: ignore[return-value]


def load(source: str, name: str) -> dict[str, Any]:
    filename = f"<hooks {name}>"
    ns: dict[str, Any] = {"__name__": name}
    ns.update(hook_namespace())
    _register_file(filename)
    exec(compile_instrumented(textwrap.dedent(source), filename), ns)
    return ns


def test_no_explorer_records_nothing_and_works() -> None:
    d: dict[str, int] = {}
    _core.si(1, d, "a", 0)
    assert _core.gi(d, "a", 0) == 1
    assert _core.contains("a", d, 0) is True
    assert not _core.hooks_active()


def test_attribute_and_subscript_resources() -> None:
    class O:
        pass

    o = O()
    d: dict[Any, int] = {}

    def body() -> None:
        _core.sa(1, o, "x", 7)
        _core.ga(o, "x", 8)
        _core.si(2, d, ("k", 1), 9)
        _core.gi(d, ("k", 1), 10)
        _core.di(d, ("k", 1), 11)

    _, acc = recorded(body)
    assert acc == [
        (id(o), h("x"), W, 7),
        (id(o), h("x"), R, 8),
        (id(d), h(("k", 1)), W, 9),
        (id(d), h(("k", 1)), R, 10),
        (id(d), h(("k", 1)), W, 11),
    ]


def test_unsafe_keys_are_whole_and_user_hash_is_never_called() -> None:
    calls: list[str] = []

    class K:
        def __hash__(self) -> int:
            calls.append("hash")
            return 1

    d: dict[Any, int] = {}
    k = K()
    calls.clear()
    _, acc = recorded(lambda: _core.si(1, d, k, 3))
    assert acc == [(id(d), WHOLE, W, 3)]
    assert calls == ["hash"]  # only dict.__setitem__ hashed it, the hook did not
    _, acc = recorded(lambda: _core.gi(d, (1, k), 4) if False else _core.contains((1, k), d, 4))
    assert acc == [(id(d), WHOLE, R, 4)]


def test_module_attribute_is_its_globals_entry() -> None:
    mod = types.ModuleType("m_hooks")
    mod.value = 1  # type: ignore[attr-defined]
    _, acc = recorded(lambda: _core.ga(mod, "value", 1))
    assert acc == [(id(mod.__dict__), h("value"), R, 1)]


def test_instrumented_module_records_globals_cells_and_methods() -> None:
    ns = load(
        """
        hits = 0
        class S:
            def __init__(self):
                self.sessions = {}
                self.items = []
            def handle(self, cid):
                global hits
                cur = self.sessions.get(cid, 0)
                self.sessions[cid] = cur + 1
                self.items.append(cid)
                hits += 1
                return cid in self.sessions
        def counter():
            n = 0
            def inc():
                nonlocal n
                n += 1
                return n
            return inc
        """,
        "m_rec",
    )
    s = ns["S"]()
    inc = ns["counter"]()
    _, acc = recorded(lambda: (s.handle("audit"), inc()))
    g = id(ns)
    cell = inc.__closure__[inc.__code__.co_freevars.index("n")]
    kinds = {(a[0], a[1], a[2]) for a in acc}
    assert (id(s.sessions), h("audit"), R) in kinds  # .get narrowed to the key
    assert (id(s.sessions), h("audit"), W) in kinds
    assert (id(s.items), WHOLE, W) in kinds  # append: a mutator
    assert (g, h("hits"), R) in kinds and (g, h("hits"), W) in kinds
    assert (id(cell), _core.CELL_KEY, R) in kinds and (id(cell), _core.CELL_KEY, W) in kinds
    # calling an instrumented method does not write the whole receiver
    assert (id(s), WHOLE, W) not in kinds
    for a in acc:
        assert sites.get(a[3]).filename == "<hooks m_rec>"


def test_unknown_method_of_uninstrumented_object_is_a_write() -> None:
    ns = load(
        """
        def f(q):
            q.frobnicate()
            return q.keys()
        """,
        "m_unknown",
    )

    class Q(dict):
        def frobnicate(self) -> None:
            pass

    q = Q()
    _, acc = recorded(lambda: ns["f"](q))
    kinds = {(a[0], a[1], a[2]) for a in acc}
    assert (id(q), WHOLE, W) in kinds
    assert (id(q), WHOLE, R) in kinds


def test_objects_are_kept_alive_until_reset() -> None:
    class O:
        pass

    def body() -> int:
        o = O()
        _core.ga(o, "__class__", 1)
        return sys.getrefcount(o)

    ex = _core.Explorer("fifo")
    assert ex.begin()
    ex.step_begin(ex.intern(None, 0), -1)
    _core.hooks_attach(ex)
    o = O()
    _core.ga(o, "__class__", 1)
    _core.ga(o, "__class__", 2)
    before = sys.getrefcount(o)
    assert _core.hooks_stats()["kept_alive"] >= 1
    _core.hooks_reset()
    gc.collect()
    assert sys.getrefcount(o) == before - 1  # one reference per object, not per access
    _core.hooks_attach(None)
    ex.step_end()
    ex.end(0)


def test_verbose_log_names_resources() -> None:
    ns = load(
        """
        class S:
            def __init__(self):
                self.counters = {}
            def bump(self, cid):
                self.counters[cid] = self.counters.get(cid, 0) + 10
        """,
        "m_log",
    )
    s = ns["S"]()
    _core.hooks_log(True)
    try:
        recorded(lambda: s.bump("audit"))
    finally:
        log = _core.hooks_log(False)
    names = [sites.resource_name(e[4], e[5]) for e in log]
    assert "self.counters['audit']" in names
    assert "self.counters" in names  # the attribute read itself
