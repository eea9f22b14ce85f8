"""ControlledLoop behaves exactly like stock asyncio.

Every program below runs on three loops (a parametrised fixture, as in uvloop's suite):
``stock`` -- asyncio's own SelectorEventLoop with only its clock made virtual (every scheduling
decision is BaseEventLoop._run_once), ``controlled`` -- ControlledLoop in plain fifo, and
``controlled+explorer`` -- ControlledLoop with a fifo Explorer attached (every step through the
engine).  The observable behaviour -- the program's log of callback/task order and values, its
result or exception, and the exception-handler calls -- must be identical to the stock run's.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from test_loop_support import LOOP_KINDS, VirtualClockStockLoop, observe

Program = Callable[[list[Any]], Coroutine[Any, Any, Any]]
PROGRAMS: dict[str, Program] = {}


def program(fn: Program) -> Program:
    PROGRAMS[fn.__name__] = fn
    return fn


_reference_cache: dict[str, dict[str, Any]] = {}


def reference(name: str) -> dict[str, Any]:
    if name not in _reference_cache:
        _reference_cache[name] = observe(VirtualClockStockLoop, PROGRAMS[name])
    return _reference_cache[name]


# ----------------------------------------------------------------------- tasks


@program
async def tasks_interleave(log: list[Any]) -> Any:
    async def worker(i: int) -> int:
        for k in range(3):
            log.append((i, k))
            await asyncio.sleep(0)
        return i * 10

    ts = [asyncio.create_task(worker(i)) for i in range(4)]
    log.append("created")
    return [await t for t in ts]


@program
async def task_cancel_while_sleeping(log: list[Any]) -> Any:
    async def sleeper() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError as exc:
            log.append(("cancelled", exc.args))
            raise

    t = asyncio.create_task(sleeper())
    await asyncio.sleep(0)
    log.append(t.cancel("bye"))
    try:
        await t
    except asyncio.CancelledError:
        log.append("outer saw cancel")
    log.append((t.cancelled(), t.done()))
    return asyncio.get_running_loop().time()


@program
async def task_cancel_before_start_and_uncancel(log: list[Any]) -> Any:
    async def never() -> None:
        log.append("ran")

    t = asyncio.create_task(never())
    t.cancel()
    await asyncio.sleep(0)
    log.append((t.cancelled(), t.cancelling()))

    async def swallow() -> str:
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            cur = asyncio.current_task()
            assert cur is not None
            log.append(("cancelling", cur.cancelling(), cur.uncancel()))
        return "survived"

    t2 = asyncio.create_task(swallow())
    await asyncio.sleep(0)
    t2.cancel()
    return await t2


@program
async def task_exception_propagates(log: list[Any]) -> Any:
    async def boom() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    t = asyncio.create_task(boom())
    try:
        await t
    except ValueError as exc:
        log.append(str(exc))
    log.append(type(t.exception()).__name__)
    raise KeyError("main fails")


@program
async def unretrieved_task_exception(log: list[Any]) -> Any:
    async def boom() -> None:
        raise RuntimeError("nobody looks")

    t = asyncio.create_task(boom())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    log.append(t.done())
    del t
    gc.collect()
    await asyncio.sleep(0)
    return "done"


# --------------------------------------------------------------------- futures


@program
async def future_callbacks(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    for i in range(3):
        fut.add_done_callback(lambda f, i=i: log.append(("cb", i, f.result())))
    removed = fut.add_done_callback
    removed(log.append)
    log.append(fut.remove_done_callback(log.append))
    loop.call_soon(fut.set_result, 42)
    log.append(await fut)
    f2 = loop.create_future()
    loop.call_later(0.1, f2.set_exception, OSError("io"))
    try:
        await f2
    except OSError as exc:
        log.append(("raised", str(exc), loop.time()))
    f3 = loop.create_future()
    f3.cancel("why")
    try:
        await f3
    except asyncio.CancelledError as exc:
        log.append(("f3", exc.args))
    return fut.result()


@program
async def future_already_done_and_chaining(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    done.set_result("ready")
    log.append(await done)

    async def waiter(f: asyncio.Future[int], n: int) -> None:
        log.append(("wait", n))
        log.append(("got", n, await f))

    f = loop.create_future()
    ws = [asyncio.create_task(waiter(f, n)) for n in range(3)]
    await asyncio.sleep(0)
    f.set_result(7)
    log.append("set")
    await asyncio.gather(*ws)
    return None


# ------------------------------------------------------------------------ sleep


@program
async def sleeps_and_virtual_time(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def s(d: float, tag: str) -> None:
        await asyncio.sleep(d)
        log.append((tag, loop.time() - t0))

    await asyncio.gather(s(0.3, "c"), s(0.1, "a"), s(0.2, "b"), s(0.1, "a2"), s(0, "z"))
    await asyncio.sleep(3600)
    log.append(("hour", loop.time() - t0))
    return await asyncio.sleep(0.5, result="res")


# ----------------------------------------------------------------------- gather


@program
async def gather_variants(log: list[Any]) -> Any:
    async def ok(i: int) -> int:
        await asyncio.sleep(0.01 * (3 - i))
        log.append(("ok", i))
        return i

    async def bad(i: int) -> int:
        await asyncio.sleep(0)
        raise ValueError(f"bad{i}")

    log.append(await asyncio.gather(ok(0), ok(1), ok(2)))
    res = await asyncio.gather(ok(0), bad(1), ok(2), return_exceptions=True)
    log.append([repr(r) for r in res])
    try:
        await asyncio.gather(ok(1), bad(2))
    except ValueError as exc:
        log.append(("first error", str(exc)))
    await asyncio.sleep(1)
    log.append(await asyncio.gather())
    return "end"


@program
async def gather_cancelled(log: list[Any]) -> Any:
    async def child(i: int) -> None:
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            log.append(("child cancelled", i))
            raise

    g = asyncio.gather(child(0), child(1), child(2))
    await asyncio.sleep(0)
    g.cancel()
    try:
        await g
    except asyncio.CancelledError:
        log.append("gather cancelled")

    async def inner_cancel() -> None:
        t = asyncio.current_task()
        assert t is not None
        await asyncio.sleep(0)
        t.cancel()
        await asyncio.sleep(0)

    res = await asyncio.gather(inner_cancel(), child(9), return_exceptions=True)
    log.append([type(r).__name__ for r in res])
    return None


# ------------------------------------------------------------------------- wait


@program
async def wait_modes(log: list[Any]) -> Any:
    async def job(d: float, fail: bool = False) -> float:
        await asyncio.sleep(d)
        if fail:
            raise ValueError(d)
        return d

    def names(s: set[asyncio.Task[Any]], ts: list[asyncio.Task[Any]]) -> list[int]:
        return sorted(ts.index(t) for t in s)

    for mode in (asyncio.FIRST_COMPLETED, asyncio.FIRST_EXCEPTION, asyncio.ALL_COMPLETED):
        ts = [
            asyncio.create_task(job(0.3)),
            asyncio.create_task(job(0.1)),
            asyncio.create_task(job(0.2, fail=True)),
        ]
        done, pending = await asyncio.wait(ts, return_when=mode)
        log.append((mode, names(done, ts), names(pending, ts)))
        for t in pending:
            t.cancel()
        await asyncio.gather(*ts, return_exceptions=True)
    ts = [asyncio.create_task(job(0.5)), asyncio.create_task(job(0.05))]
    done, pending = await asyncio.wait(ts, timeout=0.1)
    log.append(("timeout", names(done, ts), names(pending, ts)))
    await asyncio.gather(*ts)
    return asyncio.get_running_loop().time()


@program
async def wait_for_variants(log: list[Any]) -> Any:
    async def slow() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            log.append("slow cancelled")
            raise
        return "slow"

    try:
        await asyncio.wait_for(slow(), 0.5)
    except TimeoutError:
        log.append(("timeout", asyncio.get_running_loop().time()))
    log.append(await asyncio.wait_for(asyncio.sleep(0.1, "quick"), 1))
    log.append(await asyncio.wait_for(asyncio.sleep(0, "none"), None))

    async def outer() -> None:
        await asyncio.wait_for(slow(), 10)

    t = asyncio.create_task(outer())
    await asyncio.sleep(0.2)
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        log.append("outer cancelled")
    return None


@program
async def timeout_context_managers(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(0.2) as cm:
            log.append(("deadline", cm.when()))
            await asyncio.sleep(1)
    except TimeoutError:
        log.append(("expired", cm.expired(), loop.time()))
    async with asyncio.timeout(None) as cm2:
        cm2.reschedule(loop.time() + 0.5)
        await asyncio.sleep(0.1)
    log.append(("not expired", cm2.expired()))
    try:
        async with asyncio.timeout_at(loop.time() + 0.3):
            try:
                async with asyncio.timeout(1):
                    await asyncio.sleep(2)
            except TimeoutError:
                log.append("inner")
    except TimeoutError:
        log.append(("outer", loop.time()))
    async with asyncio.timeout(-1) if False else asyncio.timeout(5):
        pass
    try:
        async with asyncio.timeout(0):
            await asyncio.sleep(0)
    except TimeoutError:
        log.append("zero timeout")
    return None


@program
async def shield_semantics(log: list[Any]) -> Any:
    async def inner() -> str:
        await asyncio.sleep(0.2)
        log.append("inner finished")
        return "inner"

    inner_task = asyncio.create_task(inner())

    async def outer() -> str:
        return await asyncio.shield(inner_task)

    t = asyncio.create_task(outer())
    await asyncio.sleep(0.1)
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        log.append("outer cancelled")
    log.append(await inner_task)
    return None


# -------------------------------------------------------------------- TaskGroup


@program
async def taskgroup_semantics(log: list[Any]) -> Any:
    async def ok(i: int) -> int:
        await asyncio.sleep(0.01 * i)
        log.append(("ok", i))
        return i

    async def fail(d: float) -> None:
        await asyncio.sleep(d)
        raise ValueError(f"fail {d}")

    async def victim() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            log.append("victim cancelled")
            raise

    async with asyncio.TaskGroup() as tg:
        ts = [tg.create_task(ok(i)) for i in range(3)]
    log.append([t.result() for t in ts])
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(victim())
            tg.create_task(fail(0.1))
            tg.create_task(fail(0.1))
    except* ValueError as eg:
        log.append(sorted(str(e) for e in eg.exceptions))

    async def body() -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(victim())
            await asyncio.sleep(10)

    t = asyncio.create_task(body())
    await asyncio.sleep(0.5)
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        log.append("body cancelled")
    return None


# ------------------------------------------------------------- synchronisation


@program
async def lock_contention(log: list[Any]) -> Any:
    lock = asyncio.Lock()
    counter = {"n": 0}

    async def worker(i: int) -> None:
        for _ in range(2):
            async with lock:
                v = counter["n"]
                log.append(("in", i, lock.locked()))
                await asyncio.sleep(0)
                counter["n"] = v + 1

    async def cancelled_waiter() -> None:
        async with lock:
            log.append("never")

    ts = [asyncio.create_task(worker(i)) for i in range(3)]
    cw = asyncio.create_task(cancelled_waiter())
    await asyncio.sleep(0)
    cw.cancel()
    await asyncio.gather(*ts, cw, return_exceptions=True)
    return counter["n"], lock.locked()


@program
async def event_semantics(log: list[Any]) -> Any:
    ev = asyncio.Event()

    async def waiter(i: int) -> None:
        log.append(("waiting", i))
        await ev.wait()
        log.append(("woke", i, ev.is_set()))

    ts = [asyncio.create_task(waiter(i)) for i in range(3)]
    await asyncio.sleep(0)
    ev.set()
    ev.clear()
    await asyncio.gather(*ts)
    log.append(ev.is_set())
    ev.set()
    await ev.wait()
    return "ok"


@program
async def condition_semantics(log: list[Any]) -> Any:
    cond = asyncio.Condition()
    items: list[int] = []

    async def consumer(i: int) -> None:
        async with cond:
            await cond.wait_for(lambda: len(items) > 0)
            log.append(("consumed", i, items.pop(0)))

    async def plain_waiter() -> None:
        async with cond:
            await cond.wait()
            log.append("plain woke")

    cs = [asyncio.create_task(consumer(i)) for i in range(3)]
    pw = asyncio.create_task(plain_waiter())
    await asyncio.sleep(0)
    for v in range(3):
        async with cond:
            items.append(v)
            cond.notify(1)
        await asyncio.sleep(0)
    async with cond:
        cond.notify_all()
    await asyncio.gather(*cs, pw)
    return items


@program
async def semaphore_semantics(log: list[Any]) -> Any:
    sem = asyncio.Semaphore(2)

    async def worker(i: int) -> None:
        async with sem:
            log.append(("enter", i, sem.locked()))
            await asyncio.sleep(0.1)
            log.append(("leave", i))

    await asyncio.gather(*(worker(i) for i in range(5)))
    bs = asyncio.BoundedSemaphore(1)
    await bs.acquire()
    bs.release()
    try:
        bs.release()
    except ValueError as exc:
        log.append(str(exc))
    return sem._value


@program
async def barrier_semantics(log: list[Any]) -> Any:
    barrier = asyncio.Barrier(3)

    async def party(i: int) -> None:
        await asyncio.sleep(0.01 * i)
        pos = await barrier.wait()
        log.append(("through", i, pos))

    await asyncio.gather(*(party(i) for i in range(3)))
    b2 = asyncio.Barrier(2)

    async def stuck() -> None:
        try:
            await b2.wait()
        except asyncio.BrokenBarrierError:
            log.append("broken")

    t = asyncio.create_task(stuck())
    await asyncio.sleep(0)
    await b2.abort()
    await t
    return barrier.n_waiting, b2.broken


@program
async def queue_semantics(log: list[Any]) -> Any:
    q: asyncio.Queue[int] = asyncio.Queue(maxsize=2)

    async def producer() -> None:
        for i in range(5):
            await q.put(i)
            log.append(("put", i, q.qsize()))

    async def consumer() -> None:
        while True:
            v = await q.get()
            log.append(("got", v))
            await asyncio.sleep(0)
            q.task_done()

    c = asyncio.create_task(consumer())
    await producer()
    await q.join()
    log.append("joined")
    c.cancel()
    await asyncio.gather(c, return_exceptions=True)
    pq: asyncio.PriorityQueue[tuple[int, str]] = asyncio.PriorityQueue()
    for item in [(3, "c"), (1, "a"), (2, "b")]:
        pq.put_nowait(item)
    log.append([pq.get_nowait() for _ in range(3)])
    lq: asyncio.LifoQueue[int] = asyncio.LifoQueue(maxsize=1)
    lq.put_nowait(1)
    try:
        lq.put_nowait(2)
    except asyncio.QueueFull:
        log.append("full")
    log.append(lq.get_nowait())
    try:
        lq.get_nowait()
    except asyncio.QueueEmpty:
        log.append("empty")
    return q.empty()


# ----------------------------------------------------------- loop callbacks


@program
async def callback_ordering(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    now = loop.time()

    def cb(tag: Any) -> None:
        log.append(tag)
        if tag == "s1":
            loop.call_soon(cb, "s1-child")
            loop.call_later(0, cb, "s1-later0")
        if tag == "t1":
            loop.call_soon(cb, "t1-child")

    loop.call_later(0.2, cb, "t2")
    loop.call_at(now + 0.1, cb, "t1")
    for i in range(6):  # equal deadlines: stock heapq order
        loop.call_at(now + 0.1, cb, ("eq", i))
    loop.call_later(-1, cb, "negative")
    loop.call_soon(cb, "s1")
    loop.call_soon(cb, "s2")
    h = loop.call_soon(cb, "cancelled")
    h.cancel()
    th = loop.call_later(0.15, cb, "cancelled timer")
    th.cancel()
    log.append((h.cancelled(), th.cancelled()))
    await asyncio.sleep(0.3)
    return loop.time() - now


@program
async def many_cancelled_timers(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    now = loop.time()
    handles = [loop.call_at(now + 1 + (i % 7) * 0.01, log.append, i) for i in range(150)]
    for i, h in enumerate(handles):
        if i % 5:
            h.cancel()
    await asyncio.sleep(0)  # an iteration with > 100 timers, most cancelled: heap rebuilt
    for i in range(20):
        loop.call_at(now + 1.03, log.append, ("late", i))
    await asyncio.sleep(2)
    return len(log)


@program
async def callback_errors_and_handlers(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()

    def bad() -> None:
        raise ZeroDivisionError("in callback")

    loop.call_soon(bad)
    loop.call_later(0.1, bad)
    await asyncio.sleep(0.2)
    loop.call_exception_handler({"message": "custom report"})
    loop.call_exception_handler({"message": "with exc", "exception": KeyError("k")})
    log.append(loop.get_exception_handler() is not None)

    calls: list[str] = []

    def broken_handler(lp: Any, ctx: dict[str, Any]) -> None:
        calls.append(ctx["message"])
        raise RuntimeError("handler broke")

    old = loop.get_exception_handler()
    loop.set_exception_handler(broken_handler)
    loop.call_soon(bad)
    await asyncio.sleep(0)
    loop.set_exception_handler(old)
    log.append(calls)
    return None


@program
async def handle_api(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    h = loop.call_soon(log.append, "h", context=ctx)
    th = loop.call_later(0.5, log.append, "th")
    log.append((h._context is ctx, th.when() - loop.time(), h.cancelled()))
    th.cancel()
    th.cancel()
    log.append(th.cancelled())
    await asyncio.sleep(1)
    try:
        loop.call_later(None, log.append)  # type: ignore[arg-type]
    except TypeError as exc:
        log.append(str(exc))
    try:
        loop.call_at(None, log.append)  # type: ignore[arg-type]
    except TypeError as exc:
        log.append(str(exc))
    return None


# ------------------------------------------------------------------ async gens


@program
async def async_generators(log: list[Any]) -> Any:
    async def agen(tag: str) -> Any:
        try:
            for i in range(10):
                yield i
                await asyncio.sleep(0)
        finally:
            log.append(("finally", tag))

    g = agen("explicit")
    log.append(await g.__anext__())
    await g.aclose()
    log.append([x async for x in agen("exhausted")][:3])
    leftover = agen("leftover")  # closed by shutdown_asyncgens when the runner ends
    log.append(await leftover.__anext__())
    asyncio.get_running_loop()._keep = leftover  # type: ignore[attr-defined]
    return "agen"


# -------------------------------------------------------------- executors, ctx


@program
async def executor_results(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    log.append(await loop.run_in_executor(None, sum, [1, 2, 3]))
    log.append(await asyncio.to_thread(lambda a, b=0: a * b, 6, b=7))

    def fails() -> None:
        raise ValueError("in executor")

    try:
        await loop.run_in_executor(None, fails)
    except ValueError as exc:
        log.append(str(exc))
    return None


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="default")


@program
async def contextvars_propagation(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    VAR.set("main")

    async def child(v: str) -> str:
        log.append(("child sees", VAR.get()))
        VAR.set(v)
        await asyncio.sleep(0)
        return VAR.get()

    log.append(await asyncio.create_task(child("c1")))
    log.append(("main still", VAR.get()))
    ctx = contextvars.Context()
    ctx.run(VAR.set, "in ctx")
    done = loop.create_future()
    loop.call_soon(lambda: done.set_result(VAR.get()), context=ctx)
    log.append(await done)
    log.append(await asyncio.to_thread(VAR.get))
    log.append(await asyncio.create_task(child("c2"), context=ctx))
    log.append(ctx[VAR])
    return VAR.get()


@pytest.fixture(params=list(LOOP_KINDS))
def loop_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_behaviour_as_stock(name: str, loop_kind: str) -> None:
    ref = reference(name)
    assert ref["log"] or ref["handled"], "the reference run observed nothing"
    got = observe(LOOP_KINDS[loop_kind], PROGRAMS[name])
    assert got == ref


# ---------------------------------------------------------- loop-level tests


def _loop(kind: str) -> asyncio.AbstractEventLoop:
    return LOOP_KINDS[kind]()


def test_stop_semantics(loop_kind: str) -> None:
    loop = _loop(loop_kind)
    log: list[str] = []

    def a() -> None:
        log.append("a")
        loop.stop()
        loop.call_soon(log.append, "after-stop")

    loop.call_soon(a)
    loop.call_soon(log.append, "same-iteration")
    loop.run_forever()
    assert log == ["a", "same-iteration"]
    loop.stop()  # stop() before run_forever: one iteration, then return
    loop.run_forever()
    assert log == ["a", "same-iteration", "after-stop"]
    assert not loop.is_running()
    loop.close()
    assert loop.is_closed()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_soon(log.append, "x")


def test_run_until_complete_and_errors(loop_kind: str) -> None:
    loop = _loop(loop_kind)

    async def value() -> int:
        await asyncio.sleep(0.1)
        return 5

    assert loop.run_until_complete(value()) == 5

    async def nested() -> None:
        inner = asyncio.sleep(0)
        try:
            loop.run_until_complete(inner)
        finally:
            inner.close()

    coro = nested()
    with pytest.raises(RuntimeError, match="already running"):
        loop.run_until_complete(coro)
    loop.close()
    late = value()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.run_until_complete(late)
    late.close()


def test_plain_stock_asyncio_run_agrees_on_untimed_programs() -> None:
    """Against the unmodified stock loop too, for programs whose order no wall time affects."""
    import chaossloth

    for name in ("tasks_interleave", "lock_contention", "queue_semantics", "event_semantics"):
        log_stock: list[Any] = []
        res_stock = asyncio.run(PROGRAMS[name](log_stock))
        log_ours: list[Any] = []
        res_ours = chaossloth.run(PROGRAMS[name](log_ours))
        assert (log_ours, res_ours) == (log_stock, res_stock), name


def test_default_exception_handler_logs_like_stock(
    loop_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    def bad() -> None:
        raise ZeroDivisionError("logged")

    async def main() -> None:
        asyncio.get_running_loop().call_soon(bad)
        await asyncio.sleep(0)

    records = {}
    for kind in ("stock", loop_kind):
        caplog.clear()
        with (
            caplog.at_level("ERROR", logger="asyncio"),
            asyncio.Runner(loop_factory=LOOP_KINDS[kind]) as runner,
        ):
            runner.run(main())
        records[kind] = [
            (r.levelname, r.getMessage().splitlines()[0], r.exc_info[0] if r.exc_info else None)
            for r in caplog.records
        ]
    assert records["stock"] and records[loop_kind] == records["stock"]
    assert records["stock"][0][1].startswith("Exception in callback")
