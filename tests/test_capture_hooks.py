"""The C access hooks: what they record, and that they record nothing without an explorer."""

from __future__ import annotations

import gc
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

from conftest import run_in_step

from chaossloth import _core
from chaossloth.capture import sites
from chaossloth.capture.importer import _register_file
from chaossloth.capture.instrument import compile_instrumented, hook_namespace

R, W, WHOLE = _core.READ, _core.WRITE, _core.KEY_WHOLE


def h(x: Any) -> int:
    """The engine's key for x: its hash as an unsigned 64-bit value."""
    return hash(x) & (2**64 - 1)


IDS: dict[int, int | None] = {}


def cid(obj: Any) -> int | None:
    """The canonical id the hooks gave obj in the last recorded() run."""
    return IDS.get(id(obj))


def recorded(fn: Callable[[], Any], *objs: Any) -> tuple[Any, list[tuple[int, int, int, int]]]:
    """Runs fn inside one open step; returns its value and the step's accesses
    (object, key, kind, site).  The canonical ids of `objs` are kept for cid()."""

    def keep_ids() -> None:
        IDS.clear()
        IDS.update({id(o): _core.hooks_object_id(o) for o in objs})

    value, ex = run_in_step(fn, keep_ids)
    accesses = [tuple(a) for a in ex.trace()[0].accesses]
    return value, accesses  # type: ignore[return-value]


def load(source: str, name: str) -> dict[str, Any]:
    filename = f"<hooks {name}>"
    ns: dict[str, Any] = {"__name__": name}
    ns.update(hook_namespace())
    _register_file(filename)
    exec(compile_instrumented(textwrap.dedent(source), filename), ns)  # noqa: S102
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
        _core.sa(3, o, "x", 11)
        _core.si(4, d, ("k", 1), 12)
        _core.di(d, ("k", 1), 13)

    _, acc = recorded(body, o, d)
    order = _core.ORDER_KEY
    # the first stores insert x and ("k", 1): writes of the holders' insertion order too;
    # the second ones update in place, and the deletion keeps the others' order
    assert acc == [
        (cid(o), h("x"), W, 7),
        (cid(o), order, W, 7),
        (cid(o), h("x"), R, 8),
        (cid(d), h(("k", 1)), W, 9),
        (cid(d), order, W, 9),
        (cid(d), h(("k", 1)), R, 10),
        (cid(o), h("x"), W, 11),
        (cid(d), h(("k", 1)), W, 12),
        (cid(d), h(("k", 1)), W, 13),
    ]
    assert cid(o) != cid(d)


def test_unsafe_keys_are_whole_and_user_hash_is_never_called() -> None:
    calls: list[str] = []

    class K:
        def __hash__(self) -> int:
            calls.append("hash")
            return 1

    d: dict[Any, int] = {}
    k = K()
    calls.clear()
    _, acc = recorded(lambda: _core.si(1, d, k, 3), d, k)
    # the dict whole; the key, whose uninstrumented __hash__ may read its state, as a value
    assert acc == [(cid(k), WHOLE, R, 3), (cid(d), WHOLE, W, 3)]
    assert calls == ["hash"]  # only dict.__setitem__ hashed it, the hook did not
    _, acc = recorded(lambda: _core.contains((1, k), d, 4), d, k)
    assert acc == [(cid(k), WHOLE, R, 4), (cid(d), WHOLE, R, 4)]


def test_module_attribute_is_its_globals_entry() -> None:
    mod = types.ModuleType("m_hooks")
    mod.value = 1  # type: ignore[attr-defined]
    _, acc = recorded(lambda: _core.ga(mod, "value", 1), mod.__dict__, mod)
    assert acc == [(cid(mod.__dict__), h("value"), R, 1)]
    assert cid(mod) == cid(mod.__dict__)


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
    cell = inc.__closure__[inc.__code__.co_freevars.index("n")]
    _, acc = recorded(lambda: (s.handle("audit"), inc()), s, s.sessions, s.items, ns, cell)
    g = cid(ns)
    kinds = {(a[0], a[1], a[2]) for a in acc}
    assert (cid(s.sessions), h("audit"), R) in kinds  # .get narrowed to the key
    assert (cid(s.sessions), h("audit"), W) in kinds
    assert (cid(s.items), WHOLE, W) in kinds  # append: a mutator
    assert (g, h("hits"), R) in kinds and (g, h("hits"), W) in kinds
    assert (cid(cell), _core.CELL_KEY, R) in kinds and (cid(cell), _core.CELL_KEY, W) in kinds
    # calling an instrumented method does not write the whole receiver
    assert (cid(s), WHOLE, W) not in kinds
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
    _, acc = recorded(lambda: ns["f"](q), q)
    kinds = {(a[0], a[1], a[2]) for a in acc}
    assert (cid(q), WHOLE, W) in kinds
    assert (cid(q), WHOLE, R) in kinds


def test_objects_are_kept_alive_until_reset() -> None:
    """Objects that cannot be weakly referenced are held (weak-referenceable ones never are:
    tests/test_capture_lifetime.py)."""

    class O:
        __slots__ = ("x",)

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


def test_canonical_ids_are_stable_across_executions() -> None:
    """The same program reaching its objects in a different order names them alike."""
    ns = load(
        """
        class S:
            def __init__(self):
                self.sessions = {}
                self.counters = {}
        def touch(s, order):
            for name in order:
                getattr_ = s.sessions if name == 's' else s.counters
                getattr_['k'] = 1
        """,
        "m_canon",
    )
    runs = []
    for order in ("sc", "cs"):

        def body(order: str = order) -> tuple[Any, Any]:
            s = ns["S"]()  # the first event of each execution: the common prefix
            ns["touch"](s, order)
            return _core.hooks_object_id(s.sessions), _core.hooks_object_id(s.counters)

        ids, _ = recorded(body)
        runs.append(ids)
    assert None not in runs[0]
    assert runs[0] == runs[1]
    assert runs[0][0] != runs[0][1]


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
