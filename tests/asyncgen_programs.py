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

``programs(machinery=True)`` adds operations that run asyncio's own machinery, whose state is
NOT instrumented (it lives in asyncio's closures, futures and objects): ``gather`` (with or
without ``return_exceptions``) and ``TaskGroup`` (possibly nested) over "kids" that may raise
``E1``/``E2``, ``asyncio.wait`` (FIRST_COMPLETED / FIRST_EXCEPTION / ALL_COMPLETED, with or
without a timeout), ``shield`` under ``wait_for``, ``asyncio.timeout`` blocks, ``wait_for`` of a
kid, a worker cancelling a sibling, ``Condition.notify``/``wait_for``, a bounded Queue and a
``Semaphore(2)``.  Each kid appends to its own list in ``ks``; the outcome records the exception
types (in the order asyncio reports them), which tasks were pending/cancelled and the kids' lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

ATTRS = ("x", "y", "z")
KEYS = ("a", "b", "c")
SLEEPS = ("0.01", "0.02")
TIMEOUTS = ("0.005", "0.015", "0.03")
EXCS = ("E1", "E2")
WAIT_MODES = ("FIRST_COMPLETED", "FIRST_EXCEPTION", "ALL_COMPLETED")

# Operation tuples: (kind, *params).  Bodies (lock, sem) hold a list of simple operations.
SIMPLE_RW = (
    "read_attr",
    "write_attr",
    "read_key",
    "write_key",
    "pop_key",
    "incr_attr",
    "sleep0",
)


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
        st.tuples(st.just("pop_key"), st.sampled_from(KEYS)),
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


def _kid(nested: bool) -> st.SearchStrategy[tuple[Any, ...]]:
    """A kid: (ops, exception to raise at the end or None, kids of a nested TaskGroup)."""
    inner = st.lists(_kid(False), min_size=1, max_size=2) if nested else st.just([])
    return st.tuples(
        st.lists(_simple_ops(False), min_size=0, max_size=2),
        st.one_of(st.none(), st.sampled_from(EXCS)),
        st.one_of(st.just([]), inner) if nested else inner,
    )


def _machinery_ops() -> st.SearchStrategy[tuple[Any, ...]]:
    kids = st.lists(_kid(False), min_size=1, max_size=2)
    timeout = st.sampled_from(TIMEOUTS)
    return st.one_of(
        st.tuples(st.just("gather"), kids, st.booleans()),
        st.tuples(st.just("taskgroup"), st.lists(_kid(True), min_size=1, max_size=2)),
        st.tuples(
            st.just("wait"), kids, st.sampled_from(WAIT_MODES), st.one_of(st.none(), timeout)
        ),
        st.tuples(st.just("shield"), _kid(False), timeout),
        st.tuples(
            st.just("timeout"), timeout, st.lists(_simple_ops(False), min_size=1, max_size=2)
        ),
        st.tuples(st.just("timeout_kid"), timeout, _kid(False)),
        st.tuples(st.just("wait_for_kid"), _kid(False), timeout),
        st.tuples(st.just("cancel"), st.integers(1, 2)),
        st.just(("cond_notify1",)),
        st.just(("cond_wait_for",)),
        st.tuples(st.just("bput"), st.integers(1, 3)),
        st.tuples(st.just("bget"), timeout),
        st.tuples(st.just("sem2"), st.lists(_simple_ops(False), min_size=1, max_size=2)),
    )


@st.composite
def programs(
    draw: Any, rw_only: bool = False, max_ops: int = 3, machinery: bool = False
) -> Program:
    """A program of 2-3 workers, each with 1..max_ops operations (with ``machinery``, at least
    one worker runs one of asyncio's own combinators or cancels a sibling)."""
    n_workers = draw(st.integers(2, 3))
    if n_workers == 3:
        max_ops = min(max_ops, 2)
    if machinery:
        max_ops = min(max_ops, 2)
        op = st.one_of(_simple_ops(False), _blocking_ops(), _machinery_ops())
        workers = [draw(st.lists(op, min_size=1, max_size=max_ops)) for _ in range(n_workers)]
        special = draw(_machinery_ops())
        workers[0].insert(draw(st.integers(0, len(workers[0]))), special)
        if draw(st.integers(0, 3)) != 0:
            _make_live(workers, [], draw(st.sampled_from(TIMEOUTS)))
        return Program(workers, [])
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


_SIGNAL = {
    "event_wait": "event_set",
    "get": "put",
    "cond_wait": "cond_notify",
    "cond_wait_for": "cond_notify",
}
#: kinds that count as another kind's signal
_ALIAS = {"cond_notify1": "cond_notify"}


def _kid_kinds(kid: tuple[Any, ...]) -> set[str]:
    out = _kinds(kid[0])
    for k in kid[2]:
        out |= _kid_kinds(k)
    return out


def _kinds(ops: list[tuple[Any, ...]]) -> set[str]:
    out = set()
    for op in ops:
        out.add(_ALIAS.get(op[0], op[0]))
        if op[0] in ("lock", "sem", "sem2"):
            out |= _kinds(op[1])
        elif op[0] == "timeout":
            out |= _kinds(op[2])
        elif op[0] in ("gather", "taskgroup", "wait"):
            for k in op[1]:
                out |= _kid_kinds(k)
        elif op[0] in ("shield", "wait_for_kid"):
            out |= _kid_kinds(op[1])
        elif op[0] == "timeout_kid":
            out |= _kid_kinds(op[2])
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
        for k, op in enumerate(ops):
            if op[0] == "bput" and "bget" not in others:
                ops[k] = ("put", op[1])


# ------------------------------------------------------------------ rendering

_PRIMS = "s, d, lock, ev, cond, sem, q, seen"
#: what workers and kids of machinery programs get besides their own list
_ARGS = "s, d, lock, ev, cond, sem, q, qb, sem2, tasks, ks"
_CATCH = "except (Exception, asyncio.CancelledError) as e:"


class _Ctx:
    """Rendering state: the kid functions rendered so far, and the worker being rendered."""

    def __init__(self) -> None:
        self.kids: list[str] = []
        self.worker = 0
        self.n_workers = 0

    def kid(self, spec: tuple[Any, ...]) -> str:
        """Renders a kid function (appended to ``self.kids``); returns its name."""
        ops, exc, inner = spec
        n = len(self.kids)
        self.kids.append("")  # reserve the number before rendering nested kids
        body: list[str] = ["", f"async def k{n}({_ARGS}, seen):", "    v = 0"]
        if inner:
            body.append("    async with asyncio.TaskGroup() as tg:")
            for k in inner:
                call = self.call(k, body, "        ")
                body.append(f"        tg.create_task({call})")
        _render_ops(ops, "    ", body, self)
        if exc is not None:
            body.append(f"    raise {exc}()")
        body.append("    return v")
        body.append("")
        self.kids[n] = "\n".join(body)
        return f"k{n}"

    def call(self, spec: tuple[Any, ...], out: list[str], indent: str) -> str:
        """Appends to `out` the statements that give the kid a fresh list in ``ks``; returns
        the call expression."""
        name = self.kid(spec)
        out.append(f"{indent}{name}_seen = []")
        out.append(f"{indent}ks[{name!r}] = {name}_seen")
        return f"{name}({_ARGS}, {name}_seen)"


def _attr(name: str) -> str:
    """A read of attribute `name` of ``s``: ``main`` sets x and y, so z is absent until a worker
    stores it (its insertion orders ``vars(s)``, which the outcome keeps in order)."""
    return f"s.{name}" if name in ("x", "y") else f"getattr(s, {name!r}, 0)"


def _render_ops(
    ops: list[tuple[Any, ...]], indent: str, out: list[str], ctx: _Ctx | None = None
) -> None:
    for op in ops:
        kind = op[0]
        if kind == "read_attr":
            out.append(f"{indent}v = {_attr(op[1])}")
            out.append(f"{indent}seen.append(v)")
        elif kind == "write_attr":
            out.append(f"{indent}s.{op[1]} = v + {op[2]}")
        elif kind == "read_key":
            out.append(f"{indent}v = d.get({op[1]!r}, 0)")
            out.append(f"{indent}seen.append(v)")
        elif kind == "write_key":
            out.append(f"{indent}d[{op[1]!r}] = v + {op[2]}")
        elif kind == "pop_key":
            out.append(f"{indent}seen.append(d.pop({op[1]!r}, None))")
        elif kind == "incr_attr":
            out.append(f"{indent}s.{op[1]} = {_attr(op[1])} + 1")
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
        elif ctx is not None and _render_machinery(op, indent, out, ctx):
            pass
        else:  # pragma: no cover - the generator only makes the kinds above
            raise ValueError(kind)


def _render_machinery(op: tuple[Any, ...], indent: str, out: list[str], ctx: _Ctx) -> bool:
    kind = op[0]
    i2 = indent + "    "
    if kind == "gather":
        calls = [ctx.call(k, out, indent) for k in op[1]]
        out.append(f"{indent}try:")
        out.append(f"{i2}r = await asyncio.gather({', '.join(calls)}, return_exceptions={op[2]})")
        out.append(f"{i2}seen.append(('gather', tuple(_name(x) for x in r)))")
        out.append(f"{indent}{_CATCH}")
        out.append(f"{i2}seen.append(('gather-exc', type(e).__name__))")
    elif kind == "taskgroup":
        out.append(f"{indent}try:")
        out.append(f"{i2}async with asyncio.TaskGroup() as tg:")
        for k in op[1]:
            call = ctx.call(k, out, i2 + "    ")
            out.append(f"{i2}    tg.create_task({call})")
        out.append(f"{i2}seen.append('tg-ok')")
        out.append(f"{indent}except BaseExceptionGroup as eg:")
        out.append(f"{i2}seen.append(('tg', _names(eg)))")
        out.append(f"{indent}{_CATCH}")
        out.append(f"{i2}seen.append(('tg-exc', type(e).__name__))")
    elif kind == "wait":
        calls = [ctx.call(k, out, indent) for k in op[1]]
        out.append(f"{indent}ts = [{', '.join(f'asyncio.create_task({c})' for c in calls)}]")
        out.append(f"{indent}try:")
        out.append(
            f"{i2}done, pending = await asyncio.wait(ts, timeout={op[3]}, "
            f"return_when=asyncio.{op[2]})"
        )
        out.append(f"{i2}seen.append(('wait', tuple(_state(t, pending) for t in ts)))")
        out.append(f"{i2}for t in ts:")
        out.append(f"{i2}    if t in pending:")
        out.append(f"{i2}        t.cancel()")
        out.append(f"{indent}{_CATCH}")
        out.append(f"{i2}seen.append(('wait-exc', type(e).__name__))")
    elif kind == "shield":
        call = ctx.call(op[1], out, indent)
        out.append(f"{indent}t = asyncio.create_task({call})")
        out.append(f"{indent}try:")
        out.append(f"{i2}r = await asyncio.wait_for(asyncio.shield(t), {op[2]})")
        out.append(f"{i2}seen.append(('shield', r))")
        out.append(f"{indent}{_CATCH}")
        out.append(f"{i2}seen.append(('shield-exc', type(e).__name__))")
        out.append(f"{indent}try:")
        out.append(f"{i2}r = await t")
        out.append(f"{i2}seen.append(('inner', r))")
        out.append(f"{indent}{_CATCH}")
        out.append(f"{i2}seen.append(('inner-exc', type(e).__name__))")
    elif kind in ("timeout", "timeout_kid"):
        out.append(f"{indent}try:")
        out.append(f"{i2}async with asyncio.timeout({op[1]}):")
        if kind == "timeout":
            _render_ops(op[2], i2 + "    ", out, ctx)
        else:
            call = ctx.call(op[2], out, i2 + "    ")
            out.append(f"{i2}    v = await {call}")
        out.append(f"{i2}seen.append('to-ok')")
        out.append(f"{indent}{_CATCH}")
        out.append(f"{i2}seen.append(('to-exc', type(e).__name__))")
    elif kind == "wait_for_kid":
        call = ctx.call(op[1], out, indent)
        out.append(f"{indent}try:")
        out.append(f"{i2}r = await asyncio.wait_for({call}, {op[2]})")
        out.append(f"{i2}seen.append(('wf', r))")
        out.append(f"{indent}{_CATCH}")
        out.append(f"{i2}seen.append(('wf-exc', type(e).__name__))")
    elif kind == "cancel":
        j = (ctx.worker + op[1]) % ctx.n_workers
        if j == ctx.worker:
            j = (j + 1) % ctx.n_workers
        out.append(f"{indent}seen.append(('cancel', {j}, tasks[{j}].cancel()))")
    elif kind == "cond_notify1":
        out.append(f"{indent}async with cond:")
        out.append(f"{indent}    s.flag = True")
        out.append(f"{indent}    cond.notify()")
    elif kind == "cond_wait_for":
        out.append(f"{indent}async with cond:")
        out.append(f"{indent}    await cond.wait_for(lambda: s.flag)")
        out.append(f"{indent}    seen.append('cwf')")
    elif kind == "bput":
        out.append(f"{indent}await qb.put({op[1]})")
    elif kind == "bget":
        out.append(f"{indent}try:")
        out.append(f"{i2}v = await asyncio.wait_for(qb.get(), {op[1]})")
        out.append(f"{i2}seen.append(v)")
        out.append(f"{indent}except TimeoutError:")
        out.append(f"{i2}seen.append('timeout')")
    elif kind == "sem2":
        out.append(f"{indent}async with sem2:")
        _render_ops(op[1], i2, out, ctx)
    else:
        return False
    return True


def _is_machinery(prog: Program) -> bool:
    plain = {"lock", "sem", "event_wait", "get", "cond_notify", "cond_wait", "wait_for", "spawn"}
    plain |= set(SIMPLE_RW) | {"sleep", "event_set", "event_clear", "put"}
    return any(op[0] not in plain for ops in prog.workers for op in ops)


def render(prog: Program) -> str:
    if _is_machinery(prog):
        return _render_machinery_program(prog)
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


_MACHINERY_HEAD = """
class E1(Exception):
    pass


class E2(Exception):
    pass


def _name(x):
    if isinstance(x, BaseException):
        return type(x).__name__
    return x


def _names(eg):
    out = []
    for e in eg.exceptions:
        if isinstance(e, BaseExceptionGroup):
            out.append(_names(e))
        else:
            out.append(type(e).__name__)
    return tuple(out)


def _state(t, pending):
    if t in pending:
        return 'pending'
    if t.cancelled():
        return 'cancelled'
    if t.exception() is not None:
        return type(t.exception()).__name__
    return ('ok', t.result())
"""


def _render_machinery_program(prog: Program) -> str:
    ctx = _Ctx()
    ctx.n_workers = n = len(prog.workers)
    workers: list[str] = []
    for i, ops in enumerate(prog.workers):
        ctx.worker = i
        body = ["", f"async def w{i}({_ARGS}, seen):", "    v = 0"]
        _render_ops(ops, "    ", body, ctx)
        body += ["    return v", ""]
        workers += body
    out = [
        '"""Generated by tests/asyncgen_programs.py (machinery)."""',
        "import asyncio",
        "",
        "",
        "class S:",
        "    pass",
        "",
        _MACHINERY_HEAD,
        *ctx.kids,
        *workers,
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
        "    sem2 = asyncio.Semaphore(2)",
        "    q = asyncio.Queue()",
        "    qb = asyncio.Queue(maxsize=1)",
        "    ks = {}",
        f"    seen = [[] for _ in range({n})]",
        "    box['s'] = s",
        "    box['d'] = d",
        "    box['seen'] = seen",
        "    box['ks'] = ks",
        "    tasks = []",
    ]
    for i in range(n):
        out.append(f"    tasks.append(asyncio.create_task(w{i}({_ARGS}, seen[{i}])))")
    out += [
        "    res = []",
        "    for t in tasks:",
        "        try:",
        "            res.append(await t)",
        "        except (Exception, asyncio.CancelledError) as e:",
        "            res.append('exc:' + type(e).__name__)",
        "    return res",
        "",
    ]
    return "\n".join(out)


def outcome(result: Any, box: dict[str, Any]) -> tuple[Any, ...]:
    """The observable outcome of one execution (see the module docstring)."""
    s = box.get("s")
    # in insertion order: which task inserted a key first is observable (list(d), json.dumps)
    state = tuple(vars(s).items()) if s is not None else None
    d = box.get("d")
    keys = tuple(d.items()) if d is not None else None
    seen = tuple(tuple(x) for x in box.get("seen", ()))
    kids = box.get("ks")
    if kids is not None:
        seen += (tuple(sorted((k, tuple(v)) for k, v in kids.items())),)
    if result.outcome == "failed":
        assert result.failure is not None
        verdict: Any = (result.failure.kind, result.failure.type_name)
        value: Any = None
    else:
        verdict = result.outcome
        value = repr(result.value)
    return (verdict, state, keys, seen, value)
