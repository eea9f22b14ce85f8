"""A generator of small asyncio programs, as real Python source, for differential testing of
the explorers (dpor against exhaustive enumeration).

A program is 2-3 worker tasks started by ``main(box)``; each worker runs a short straight-line
list of operations on shared state (attributes of ``s``, keys of ``d``) and asyncio primitives
(Lock, Event, Condition, Semaphore, Queue), with awaits (``sleep(0)``, ``sleep(d)``), child tasks
it creates and awaits, and timeouts (``wait_for``).  Every value a worker reads is appended to its
own ``seen`` list, so the *outcome* of an execution is: the final shared state, what each task
observed, each worker's result or exception, and whether the execution deadlocked.

``main`` stores the shared state in the ``box`` dict the harness passes, so the outcome can be
read even when the execution deadlocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

ATTRS = ("x", "y")
KEYS = ("a", "b")
SLEEPS = ("0.01", "0.02")
TIMEOUTS = ("0.005", "0.015", "0.03")

# Operation tuples: (kind, *params).  Bodies (lock, sem) hold a list of simple operations.
SIMPLE_RW = ("read_attr", "write_attr", "read_key", "write_key", "incr_attr", "sleep0")


@dataclass
class Program:
    workers: list[list[tuple[Any, ...]]]
    children: list[list[tuple[Any, ...]]] = field(default_factory=list)

    def source(self) -> str:
        return render(self)

    def describe(self) -> str:
        return self.source()


def _simple_ops(rw_only: bool) -> st.SearchStrategy[tuple[Any, ...]]:
    base = [
        st.tuples(st.just("read_attr"), st.sampled_from(ATTRS)),
        st.tuples(st.just("write_attr"), st.sampled_from(ATTRS), st.integers(1, 3)),
        st.tuples(st.just("read_key"), st.sampled_from(KEYS)),
        st.tuples(st.just("write_key"), st.sampled_from(KEYS), st.integers(1, 3)),
        st.tuples(st.just("incr_attr"), st.sampled_from(ATTRS)),
        st.just(("sleep0",)),
    ]
    if rw_only:
        return st.one_of(*base)
    return st.one_of(
        *base,
        st.tuples(st.just("sleep"), st.sampled_from(SLEEPS)),
        st.just(("event_set",)),
        st.just(("event_clear",)),
        st.tuples(st.just("put"), st.integers(1, 3)),
    )


def _blocking_ops() -> st.SearchStrategy[tuple[Any, ...]]:
    body = st.lists(_simple_ops(False), min_size=1, max_size=2)
    return st.one_of(
        st.tuples(st.just("lock"), body),
        st.tuples(st.just("sem"), body),
        st.just(("event_wait",)),
        st.just(("get",)),
        st.just(("cond_notify",)),
        st.just(("cond_wait",)),
        st.tuples(
            st.just("wait_for"),
            st.sampled_from(("event", "get", "sleep", "lock")),
            st.sampled_from(TIMEOUTS),
        ),
    )


@st.composite
def programs(draw: Any, rw_only: bool = False, max_ops: int = 3) -> Program:
    """A program of 2-3 workers, each with 1..max_ops operations."""
    n_workers = draw(st.integers(2, 3))
    if n_workers == 3:
        max_ops = min(max_ops, 2)
    op = _simple_ops(rw_only) if rw_only else st.one_of(_simple_ops(False), _blocking_ops())
    workers: list[list[tuple[Any, ...]]] = []
    children: list[list[tuple[Any, ...]]] = []
    for _ in range(n_workers):
        ops = draw(st.lists(op, min_size=1, max_size=max_ops))
        if not rw_only and draw(st.booleans()) and draw(st.booleans()):
            child_ops = draw(st.lists(_simple_ops(False), min_size=1, max_size=2))
            pos = draw(st.integers(0, len(ops)))
            ops.insert(pos, ("spawn", len(children)))
            children.append(child_ops)
        workers.append(ops)
    if not rw_only and draw(st.integers(0, 3)) != 0:
        _make_live(workers, children, draw(st.sampled_from(TIMEOUTS)))
    return Program(workers, children)


_SIGNAL = {"event_wait": "event_set", "get": "put", "cond_wait": "cond_notify"}


def _kinds(ops: list[tuple[Any, ...]]) -> set[str]:
    out = set()
    for op in ops:
        out.add(op[0])
        if op[0] in ("lock", "sem"):
            out |= _kinds(op[1])
    return out


def _make_live(
    workers: list[list[tuple[Any, ...]]], children: list[list[tuple[Any, ...]]], timeout: str
) -> None:
    """Most programs should terminate: a plain wait with no possible signal in another task
    becomes a timed wait (or a notify, for conditions).  Some programs keep their deadlocks."""
    for i, ops in enumerate(workers):
        others: set[str] = set()
        for j, other in enumerate(workers):
            if j != i:
                others |= _kinds(other)
        for c in children:
            others |= _kinds(c)
        for k, op in enumerate(ops):
            sig = _SIGNAL.get(op[0])
            if sig is None or sig in others:
                continue
            if op[0] == "event_wait":
                ops[k] = ("wait_for", "event", timeout)
            elif op[0] == "get":
                ops[k] = ("wait_for", "get", timeout)
            else:
                ops[k] = ("cond_notify",)


# ------------------------------------------------------------------ rendering

_PRIMS = "s, d, lock, ev, cond, sem, q, seen"


def _render_ops(ops: list[tuple[Any, ...]], indent: str, out: list[str]) -> None:
    for op in ops:
        kind = op[0]
        if kind == "read_attr":
            out.append(f"{indent}v = s.{op[1]}")
            out.append(f"{indent}seen.append(v)")
        elif kind == "write_attr":
            out.append(f"{indent}s.{op[1]} = v + {op[2]}")
        elif kind == "read_key":
            out.append(f"{indent}v = d.get({op[1]!r}, 0)")
            out.append(f"{indent}seen.append(v)")
        elif kind == "write_key":
            out.append(f"{indent}d[{op[1]!r}] = v + {op[2]}")
        elif kind == "incr_attr":
            out.append(f"{indent}s.{op[1]} += 1")
        elif kind == "sleep0":
            out.append(f"{indent}await asyncio.sleep(0)")
        elif kind == "sleep":
            out.append(f"{indent}await asyncio.sleep({op[1]})")
        elif kind == "event_set":
            out.append(f"{indent}ev.set()")
        elif kind == "event_clear":
            out.append(f"{indent}ev.clear()")
        elif kind == "put":
            out.append(f"{indent}q.put_nowait({op[1]})")
        elif kind == "event_wait":
            out.append(f"{indent}await ev.wait()")
            out.append(f"{indent}seen.append('ev')")
        elif kind == "get":
            out.append(f"{indent}v = await q.get()")
            out.append(f"{indent}seen.append(v)")
        elif kind == "lock":
            out.append(f"{indent}async with lock:")
            _render_ops(op[1], indent + "    ", out)
        elif kind == "sem":
            out.append(f"{indent}async with sem:")
            _render_ops(op[1], indent + "    ", out)
        elif kind == "cond_notify":
            out.append(f"{indent}async with cond:")
            out.append(f"{indent}    s.flag = True")
            out.append(f"{indent}    cond.notify_all()")
        elif kind == "cond_wait":
            out.append(f"{indent}async with cond:")
            out.append(f"{indent}    if not s.flag:")
            out.append(f"{indent}        await cond.wait()")
            out.append(f"{indent}    seen.append(s.flag)")
        elif kind == "wait_for":
            what, timeout = op[1], op[2]
            awaitable = {
                "event": "ev.wait()",
                "get": "q.get()",
                "sleep": "asyncio.sleep(0.02)",
                "lock": "lock.acquire()",
            }[what]
            out.append(f"{indent}try:")
            out.append(f"{indent}    r = await asyncio.wait_for({awaitable}, {timeout})")
            out.append(f"{indent}    seen.append(r)")
            if what == "lock":
                out.append(f"{indent}    lock.release()")
            out.append(f"{indent}except asyncio.TimeoutError:")
            out.append(f"{indent}    seen.append('timeout')")
        elif kind == "spawn":
            i = op[1]
            out.append(f"{indent}cs = []")
            out.append(
                f"{indent}kids.append((asyncio.create_task(child{i}(s, d, lock, ev, "
                "cond, sem, q, cs)), cs))"
            )
        else:  # pragma: no cover - the generator only makes the kinds above
            raise ValueError(kind)


def render(prog: Program) -> str:
    out = [
        '"""Generated by tests/asyncgen_programs.py."""',
        "import asyncio",
        "",
        "",
        "class S:",
        "    pass",
        "",
    ]
    for i, ops in enumerate(prog.children):
        out.append("")
        out.append(f"async def child{i}({_PRIMS}):")
        out.append("    v = 0")
        _render_ops(ops, "    ", out)
        out.append("    return v")
        out.append("")
    for i, ops in enumerate(prog.workers):
        out.append("")
        out.append(f"async def w{i}({_PRIMS}):")
        out.append("    v = 0")
        out.append("    kids = []")
        _render_ops(ops, "    ", out)
        out.append("    for t, cs in kids:")
        out.append("        r = await t")
        out.append("        seen.append(('child', r, tuple(cs)))")
        out.append("    return v")
        out.append("")
    n = len(prog.workers)
    out += [
        "",
        "async def main(box):",
        "    s = S()",
        "    s.x = 0",
        "    s.y = 0",
        "    s.flag = False",
        "    d = {'a': 0}",
        "    lock = asyncio.Lock()",
        "    ev = asyncio.Event()",
        "    cond = asyncio.Condition()",
        "    sem = asyncio.Semaphore(1)",
        "    q = asyncio.Queue()",
        f"    seen = [[] for _ in range({n})]",
        "    box['s'] = s",
        "    box['d'] = d",
        "    box['seen'] = seen",
        "    tasks = [",
    ]
    for i in range(n):
        out.append(f"        asyncio.create_task(w{i}(s, d, lock, ev, cond, sem, q, seen[{i}])),")
    out += [
        "    ]",
        "    res = []",
        "    for t in tasks:",
        "        try:",
        "            res.append(await t)",
        "        except Exception as e:",
        "            res.append('exc:' + type(e).__name__)",
        "    return res",
        "",
    ]
    return "\n".join(out)


def outcome(result: Any, box: dict[str, Any]) -> tuple[Any, ...]:
    """The observable outcome of one execution (see the module docstring)."""
    s = box.get("s")
    state = tuple(sorted(vars(s).items())) if s is not None else None
    d = box.get("d")
    keys = tuple(sorted(d.items())) if d is not None else None
    seen = tuple(tuple(x) for x in box.get("seen", ()))
    if result.outcome == "failed":
        assert result.failure is not None
        verdict: Any = (result.failure.kind, result.failure.type_name)
        value: Any = None
    else:
        verdict = result.outcome
        value = repr(result.value)
    return (verdict, state, keys, seen, value)
