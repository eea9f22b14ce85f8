"""capture/sync.py: asyncio's synchronisation recorded as accesses, behaviour unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from conftest import run_in_step

from chaossloth import _core
from chaossloth.capture import sync

R, W, WHOLE = _core.READ, _core.WRITE, _core.KEY_WHOLE


IDS: dict[str, int | None] = {}


def recorded(fn: Callable[[], Any], **objs: Any) -> tuple[Any, set[tuple[int, int, int]]]:
    """Runs fn in one open step; the canonical ids of `objs` land in IDS."""

    def keep_ids() -> None:
        IDS.clear()
        IDS.update({k: _core.hooks_object_id(o) for k, o in objs.items()})

    value, ex = run_in_step(fn, keep_ids)
    return value, {(a[0], a[1], a[2]) for a in ex.trace()[0].accesses}


def finish(coro: Any) -> Any:
    """Runs a coroutine that must not suspend."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("suspended")


def test_uninstall_restores_the_originals_exactly() -> None:
    before = {(c, n): c.__dict__.get(n) for c, m in sync.SPEC.items() for n in m}
    with sync.installed():
        with sync.installed():  # nesting only counts
            assert asyncio.Lock.__dict__["acquire"] is not before[(asyncio.Lock, "acquire")]
        assert sync.is_installed()
    after = {(c, n): c.__dict__.get(n) for c, m in sync.SPEC.items() for n in m}
    assert after == before
    assert not sync.is_installed()


def test_fast_paths_that_never_yield_are_recorded() -> None:
    with sync.installed():
        lock = asyncio.Lock()
        q: asyncio.Queue[int] = asyncio.Queue()
        q.put_nowait(1)
        ev = asyncio.Event()
        ev.set()

        def body() -> Any:
            return finish(lock.acquire()), finish(q.get()), finish(ev.wait()), lock.locked()

        value, acc = recorded(body, lock=lock, q=q, ev=ev)
    assert value == (True, 1, True, True)
    assert (IDS["lock"], WHOLE, W) in acc
    assert (IDS["lock"], WHOLE, R) in acc
    # a get from a FIFO queue with an item and nobody waiting writes its head, not all of it
    assert (IDS["q"], hash(sync._HEAD) % 2**64, W) in acc
    assert (IDS["q"], WHOLE, W) not in acc
    # a wait that finds the event set reads whether it is set, nothing else of it
    assert (IDS["ev"], hash(sync._IS_SET) % 2**64, R) in acc
    assert (IDS["ev"], WHOLE, R) not in acc and (IDS["ev"], WHOLE, W) not in acc


def test_recording_future_records_state_changes_and_observations() -> None:
    loop = asyncio.new_event_loop()
    try:
        fut = sync.RecordingFuture(loop=loop)

        def body() -> Any:
            fut.set_result(5)
            it = fut.__await__()  # awaiting a done future never yields
            try:
                next(it)
            except StopIteration as stop:
                return stop.value
            raise AssertionError("yielded")

        value, acc = recorded(body, fut=fut)
        assert value == 5
        # the completion writes the state keys (what done() and f._result observe) and the
        # callbacks; the await of the done future reads the state key
        state, callbacks = (hash(k) % 2**64 for k in (sync._STATE, sync._CALLBACKS))
        assert (IDS["fut"], state, W) in acc and (IDS["fut"], hash("_result") % 2**64, W) in acc
        assert (IDS["fut"], callbacks, W) in acc and (IDS["fut"], state, R) in acc
        assert (IDS["fut"], WHOLE, W) not in acc and (IDS["fut"], WHOLE, R) not in acc
    finally:
        loop.close()


async def _workload() -> Any:
    log: list[Any] = []
    lock = asyncio.Lock()
    cond = asyncio.Condition()
    sem = asyncio.BoundedSemaphore(2)
    ev = asyncio.Event()
    q: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
    pq: asyncio.PriorityQueue[int] = asyncio.PriorityQueue()
    barrier = asyncio.Barrier(2)

    async def worker(i: int) -> None:
        async with lock:
            log.append(("lock", i))
            await asyncio.sleep(0)
        async with sem:
            log.append(("sem", i, sem.locked()))
            await asyncio.sleep(0)
        await q.put(i)
        await ev.wait()
        pos = await barrier.wait()
        log.append(("barrier", pos))
        async with cond:
            cond.notify_all()

    async def consumer() -> None:
        for _ in range(2):
            log.append(("got", await q.get()))
            q.task_done()
        ev.set()

    async def blocked() -> None:
        async with lock:
            await asyncio.sleep(10)

    for x in (3, 1, 2):
        pq.put_nowait(x)
    t = asyncio.create_task(blocked())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(lock.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    t.cancel()
    await asyncio.gather(t, waiter, return_exceptions=True)
    await asyncio.gather(worker(0), worker(1), consumer())
    await q.join()
    with pytest.raises(ValueError):
        sem.release()
        sem.release()
        sem.release()
    log.append([pq.get_nowait() for _ in range(3)])
    log.append((lock.locked(), q.empty(), q.qsize(), ev.is_set(), t.cancelled()))
    return log


def test_behaviour_is_unchanged() -> None:
    plain = asyncio.run(_workload())
    with sync.installed():
        wrapped = asyncio.run(_workload())
    assert wrapped == plain


def test_recording_task_runs_like_a_task() -> None:
    async def child(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        t = sync.RecordingTask(child(4), loop=loop)
        f = sync.RecordingFuture(loop=loop)
        loop.call_soon(f.set_result, "f")
        c = sync.RecordingTask(asyncio.sleep(5), loop=loop)
        await asyncio.sleep(0)
        c.cancel()
        r = await asyncio.gather(t, f, c, return_exceptions=True)
        return r[0], r[1], type(r[2]).__name__, t.done(), c.cancelled()

    assert asyncio.run(main()) == (8, "f", "CancelledError", True, True)
