"""Property: a generated small program behaves identically instrumented and not.

Programs mix attribute, subscript, global and closure-cell reads and writes, augmented
assignments, deletes, unpacking, mutator and pure method calls, comprehensions and lambdas;
every statement runs under ``try`` so that raised exceptions are part of the compared outcome.
"""

from __future__ import annotations

from typing import Any

from conftest import exec_source, run_in_step
from hypothesis import given, settings
from hypothesis import strategies as st

KEYS = st.sampled_from(["'x'", "'y'", "'z'", "('t', 1)"])
IDX = st.sampled_from(["-1", "0", "1", "5"])
ATTR = st.sampled_from(["a", "b"])


def exprs() -> st.SearchStrategy[str]:
    leaf = st.one_of(
        st.integers(-3, 9).map(str),
        st.just("o.a"),
        KEYS.map(lambda k: f"d[{k}]"),
        IDX.map(lambda i: f"l[{i}]"),
        st.just("G"),
        st.just("c"),
        st.just("bump()"),
        st.just("len(d)"),
        KEYS.map(lambda k: f"d.get({k}, 0)"),
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: f"({t[0]} + {t[1]})"),
            st.tuples(inner, inner).map(lambda t: f"({t[0]} if {t[1]} else 0)"),
        ),
        max_leaves=3,
    )


def stmts() -> st.SearchStrategy[str]:
    e = exprs()
    return st.one_of(
        st.tuples(ATTR, e).map(lambda t: f"o.{t[0]} = {t[1]}"),
        e.map(lambda x: f"o.a += {x}"),
        st.tuples(KEYS, e).map(lambda t: f"d[{t[0]}] = {t[1]}"),
        st.tuples(KEYS, e).map(lambda t: f"d[{t[0]}] += {t[1]}"),
        KEYS.map(lambda k: f"del d[{k}]"),
        ATTR.map(lambda a: f"del o.{a}"),
        e.map(lambda x: f"l.append({x})"),
        st.tuples(IDX, e).map(lambda t: f"l[{t[0]}] = {t[1]}"),
        st.tuples(IDX, e).map(lambda t: f"l[{t[0]}] *= {t[1]}"),
        e.map(lambda x: f"G += {x}"),
        e.map(lambda x: f"G = {x}"),
        st.just("bump()"),
        st.tuples(KEYS, e).map(lambda t: f"d.setdefault({t[0]}, {t[1]})"),
        KEYS.map(lambda k: f"log.append(d.pop({k}, None))"),
        KEYS.map(lambda k: f"log.append({k} in d)"),
        st.just("first, *rest = l; log.append(rest)"),
        st.tuples(KEYS, e, e).map(lambda t: f"o.b, d[{t[0]}] = {t[1]}, {t[2]}"),
        st.integers(0, 4).map(lambda n: f"log.append([v * 2 for v in l if v > {n}])"),
        st.just("log.append((lambda: c + G)())"),
        st.tuples(IDX, IDX).map(lambda t: f"l[{t[0]}:{t[1]}] = [c]"),
        st.just("l.sort(); l.reverse()"),
        st.just("x = y = d[sorted(d, key=str)[0]] if d else 0; log.append(x)"),
    )


def _exec(source: str, filename: str, instrumented: bool) -> dict[str, Any]:
    return exec_source(source, filename, instrumented, "generated")


def _outcome(ns: dict[str, Any], filename: str) -> tuple[Any, ...]:
    try:
        return ("ok", repr(ns["run"]()))
    except Exception as exc:  # the outcome compared  # noqa: BLE001
        return ("raised", type(exc).__name__, str(exc))


def _recording(fn: Any) -> Any:
    return run_in_step(fn)[0]


def program(body: list[str]) -> str:
    lines = "\n".join(
        f"    try:\n        {s}\n    except Exception as e:\n        log.append(type(e).__name__)"
        for s in body
    )
    return f"""
G = 0
class O:
    pass
def run():
    global G
    o = O()
    o.a = 1
    d = {{'x': 1, 'y': 2}}
    l = [1, 2, 3]
    c = 0
    log = []
    def bump():
        nonlocal c
        c += 1
        return c
{lines}
    return G, sorted(vars(o).items()), sorted(d.items(), key=str), l, c, log
"""


@settings(max_examples=60, deadline=None)
@given(st.lists(stmts(), min_size=1, max_size=8))
def test_generated_programs_behave_identically(body: list[str]) -> None:
    src = program(body)
    filename = "<generated>"
    want = _outcome(_exec(src, filename, False), filename)
    got = _outcome(_exec(src, filename, True), filename)
    assert got == want, src
    rec: Any = _recording(lambda: _outcome(_exec(src, filename, True), filename))
    assert rec == want, src
