"""ControlledLoop's errors: deadlock messages, step budgets, unsupported I/O, foreign threads,
schedule divergence, bad input; and that the loop stays closable after each."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from typing import Any

import pytest

import chaossloth
from chaossloth import _core
from chaossloth.errors import (
    ChaosSlothError,
    DeadlockError,
    InputError,
    NondeterminismError,
    ScheduleDivergedError,
    StepBudgetExceeded,
    UnsupportedOperation,
)
from chaossloth.loop import ControlledLoop

HERE = os.path.relpath(__file__)  # messages give paths relative to the current directory


def _line_of(text: str) -> int:
    with open(HERE, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return n
    raise AssertionError(text)


class Account:
    def __init__(self) -> None:
        self.lock_a = asyncio.Lock()
        self.lock_b = asyncio.Lock()


async def lock_order_deadlock() -> None:
    acct = Account()

    async def ab() -> None:
        async with acct.lock_a:
            await asyncio.sleep(0)
            async with acct.lock_b:  # AB-INNER
                pass

    async def ba() -> None:
        async with acct.lock_b:
            await asyncio.sleep(0)
            async with acct.lock_a:  # BA-INNER
                pass

    await asyncio.gather(ab(), ba(), return_exceptions=False)


def test_deadlock_names_tasks_sites_and_locks() -> None:
    with pytest.raises(DeadlockError) as info:
        chaossloth.run(lock_order_deadlock())
    msg = str(info.value)
    assert msg.startswith("deadlock: nothing can run")
    assert "3 tasks still wait" in msg
    assert f"{HERE}:{_line_of('AB-INNER')}" in msg
    assert f"{HERE}:{_line_of('BA-INNER')}" in msg
    assert "Lock.acquire() on acct.lock_b (locked)" in msg
    assert "Lock.acquire() on acct.lock_a (locked)" in msg
    assert "lock_order_deadlock.<locals>.ab()" in msg
    assert "gather() of 2 awaitables" in msg
    names = [b[0] for b in info.value.blocked]
    assert len(names) == 3 and len(info.value.tasks) == 3
    assert all(site is not None for _, site, _ in info.value.blocked)


class Ledger:
    def __init__(self) -> None:
        self.locks = {"alice": asyncio.Lock(), "bob": asyncio.Lock()}

    async def move(self, src: str, dst: str) -> None:
        async with self.locks[src]:
            await asyncio.sleep(0)
            async with self.locks[dst]:  # LEDGER-INNER
                pass


async def locks_in_containers() -> None:
    ledger = Ledger()
    await asyncio.gather(ledger.move("alice", "bob"), ledger.move("bob", "alice"))


async def locks_in_a_list() -> None:
    locks = [asyncio.Lock(), asyncio.Lock()]

    async def take(i: int, j: int) -> None:
        async with locks[i]:
            await asyncio.sleep(0)
            async with locks[j]:
                pass

    await asyncio.gather(take(0, 1), take(1, 0))


def test_deadlock_names_locks_held_in_containers() -> None:
    with pytest.raises(DeadlockError) as info:
        chaossloth.run(locks_in_containers())
    msg = str(info.value)
    assert "Lock.acquire() on self.locks['bob'] (locked)" in msg, msg
    assert "Lock.acquire() on self.locks['alice'] (locked)" in msg, msg
    assert f"{HERE}:{_line_of('LEDGER-INNER')}" in msg
    assert "0x" not in msg
    with pytest.raises(DeadlockError) as info:
        chaossloth.run(locks_in_a_list())
    msg = str(info.value)
    assert "Lock.acquire() on locks[1] (locked)" in msg, msg
    assert "Lock.acquire() on locks[0] (locked)" in msg, msg


def test_unnamed_primitive_is_described_not_blank() -> None:
    async def orphan() -> None:
        await asyncio.Event().wait()  # reachable from no name

    with pytest.raises(DeadlockError) as info:
        chaossloth.run(orphan())
    assert "Event.wait() on an unnamed Event at 0x" in str(info.value)


async def primitive_waits() -> None:
    ev = asyncio.Event()
    q: asyncio.Queue[int] = asyncio.Queue()
    cond = asyncio.Condition()
    sem = asyncio.Semaphore(0)
    barrier = asyncio.Barrier(2)
    fut = asyncio.get_running_loop().create_future()

    async def on_cond() -> None:
        async with cond:
            await cond.wait()

    async def on_task() -> None:
        await waiter_task

    waiter_task = asyncio.create_task(ev.wait())
    others = [
        asyncio.create_task(q.get()),
        asyncio.create_task(on_cond()),
        asyncio.create_task(sem.acquire()),
        asyncio.create_task(barrier.wait()),
        asyncio.create_task(on_task()),
    ]
    await fut
    del others


def test_deadlock_describes_each_primitive() -> None:
    with pytest.raises(DeadlockError) as info:
        chaossloth.run(primitive_waits())
    msg = str(info.value)
    whats = [b[2] for b in info.value.blocked]
    assert whats[0].startswith("a Future") and "nothing completes" in whats[0]
    assert "Event.wait() on ev (never set)" in msg
    assert "Queue.get() on q (0 item(s), maxsize 0)" in msg
    assert "Condition.wait() on cond" in msg
    assert "Semaphore.acquire() on sem (value 0)" in msg
    assert "Barrier.wait() on barrier (1/2 waiting)" in msg
    assert whats[-1].endswith("(Event.wait()) to finish")


def test_deadlock_without_tasks_and_loop_stays_closable() -> None:
    loop = ControlledLoop()
    fut = loop.create_future()
    with pytest.raises(DeadlockError, match="awaited future was never completed"):
        loop.run_until_complete(fut)
    assert not loop.is_running()
    # the loop still works after the error
    assert loop.run_until_complete(asyncio.sleep(1, result="again")) == "again"
    loop.close()
    assert loop.is_closed()


def test_run_forever_without_stop_is_a_deadlock() -> None:
    loop = ControlledLoop()
    loop.call_soon(lambda: None)
    with pytest.raises(DeadlockError):
        loop.run_forever()
    loop.close()


def test_waiting_on_a_timer_is_not_a_deadlock() -> None:
    async def main() -> float:
        await asyncio.sleep(10**6)
        return asyncio.get_running_loop().time()

    assert chaossloth.run(main()) == 10**6


async def spin() -> None:
    while True:
        await asyncio.sleep(0)


@pytest.mark.parametrize("strategy", ["fifo", "random"])
def test_step_budget(strategy: str) -> None:
    with pytest.raises(StepBudgetExceeded) as info:
        chaossloth.run(spin(), max_steps=100, strategy=strategy)
    assert info.value.steps == 100
    assert "100 steps" in str(info.value)
    assert "--max-steps" in str(info.value)


def test_budget_on_a_plain_loop_leaves_it_closable() -> None:
    loop = ControlledLoop(max_steps=10)
    task = loop.create_task(spin())
    with pytest.raises(StepBudgetExceeded):
        loop.run_until_complete(task)
    assert loop._cs_steps == 10
    task._log_destroy_pending = False
    loop.close()
    assert loop.is_closed()


IO_CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("add_reader", (0, print)),
    ("add_writer", (0, print)),
    ("remove_reader", (0,)),
    ("sock_recv", (None, 10)),
    ("sock_sendall", (None, b"x")),
    ("sock_connect", (None, ("localhost", 1))),
    ("sock_accept", (None,)),
    ("create_connection", (None, "localhost", 1)),
    ("create_server", (None, "localhost", 1)),
    ("create_datagram_endpoint", (None,)),
    ("create_unix_connection", (None, "/tmp/x")),
    ("create_unix_server", (None, "/tmp/x")),
    ("connect_accepted_socket", (None, None)),
    ("sendfile", (None, None)),
    ("start_tls", (None, None, None)),
    ("subprocess_exec", (None, "ls")),
    ("subprocess_shell", (None, "ls")),
    ("add_signal_handler", (2, print)),
    ("getaddrinfo", ("localhost", 80)),
    ("getnameinfo", (("127.0.0.1", 80),)),
    ("connect_read_pipe", (None, None)),
    ("connect_write_pipe", (None, None)),
]


@pytest.mark.parametrize(("name", "args"), IO_CALLS, ids=[n for n, _ in IO_CALLS])
def test_real_io_is_unsupported(name: str, args: tuple[Any, ...]) -> None:
    loop = ControlledLoop()
    with pytest.raises(UnsupportedOperation) as info:
        getattr(loop, name)(*args)
    msg = str(info.value)
    assert msg.startswith(f"loop.{name}()")
    assert "irreproducible" in msg and "in-process futures" in msg
    assert isinstance(info.value, NotImplementedError)
    loop.close()


def test_unsupported_io_through_asyncio_helpers() -> None:
    async def main() -> None:
        await asyncio.open_connection("localhost", 1)

    with pytest.raises(UnsupportedOperation, match="create_connection"):
        chaossloth.run(main())

    async def main2() -> None:
        a, b = socket.socketpair()
        try:
            await asyncio.get_running_loop().sock_recv(a, 1)
        finally:
            a.close()
            b.close()

    with pytest.raises(UnsupportedOperation, match="sock_recv"):
        chaossloth.run(main2())


def test_call_soon_threadsafe_from_another_thread_is_an_external_event() -> None:
    """Queued, and delivered when nothing else is ready, before the clock advances."""

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        seen: list[float] = []
        th = threading.Thread(
            target=lambda: loop.call_soon_threadsafe(lambda: seen.append(loop.time())),
            name="sender",
        )
        th.start()
        th.join()
        await asyncio.sleep(1)
        return seen

    assert chaossloth.run(main()) == [0.0]


def test_a_task_waiting_for_a_live_thread_is_not_deadlocked() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def work() -> None:
            time.sleep(0.05)  # the loop waits for the thread, not for its clock
            loop.call_soon_threadsafe(fut.set_result, 7)

        threading.Thread(target=work).start()
        return await asyncio.wait_for(fut, 1)

    assert chaossloth.run(main()) == 7


def test_a_thread_that_ends_without_waking_the_task_is_a_deadlock() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        threading.Thread(target=lambda: None).start()
        await fut

    with pytest.raises(DeadlockError):
        chaossloth.run(main())


def test_call_soon_threadsafe_on_the_loop_thread_is_call_soon() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        out: list[int] = []
        loop.call_soon_threadsafe(out.append, 1)
        loop.call_soon(out.append, 2)
        await asyncio.sleep(0)
        return out

    assert chaossloth.run(main()) == [1, 2]


def test_divergence_names_step_expected_and_enabled() -> None:
    async def two() -> None:
        async def w() -> None:
            await asyncio.sleep(0)

        await asyncio.gather(w(), w())

    # fifo first: learn the actor ids of this program
    ex = _core.Explorer("fifo")
    assert ex.begin()
    loop = ControlledLoop()
    loop._cs_attach(ex)
    loop.run_until_complete(two())
    sched = ex.schedule()
    loop._cs_detach()
    ex.end(_core.OUTCOME_OK)
    loop.close()
    # prescribe the root task where only the children can run
    bad = [sched[0], sched[1], sched[0]]
    ex = _core.Explorer("replay", replay=bad)
    assert ex.begin()
    loop = ControlledLoop()
    loop._cs_attach(ex)
    with pytest.raises(ScheduleDivergedError) as info:
        loop.run_until_complete(two())
    err = info.value
    assert isinstance(err, NondeterminismError)  # a diverged replay is nondeterminism
    assert err.step == 2 and err.expected == sched[0]
    assert sched[0] not in err.enabled and err.enabled
    msg = str(err)
    assert "diverged at step 2" in msg and "two()" in msg and "two.<locals>.w()" in msg
    loop._cs_detach()
    ex.end(_core.OUTCOME_ABORTED)
    for t in asyncio.all_tasks(loop):
        t._log_destroy_pending = False  # type: ignore[attr-defined]
        t.get_coro().close()
    loop.close()


def test_bad_input() -> None:
    with pytest.raises(InputError, match="timers"):
        ControlledLoop(timers="fast")
    with pytest.raises(InputError, match="max_steps"):
        ControlledLoop(max_steps=0)

    async def main() -> None:
        pass

    with pytest.raises(InputError, match="strategy"):
        chaossloth.run(main(), strategy="bogus")
    with pytest.raises(InputError, match="seed"):
        chaossloth.run(main(), seed=-1)
    with pytest.raises(ValueError, match="coroutine was expected"):
        chaossloth.run(42)  # type: ignore[arg-type]
    loop = ControlledLoop()
    with pytest.raises(TypeError, match="context"):
        loop.call_soon(print, context=42)
    with pytest.raises(TypeError, match="unexpected keyword"):
        loop.call_soon(print, ctx=None)
    loop.close()


def test_error_hierarchy() -> None:
    for cls in (
        DeadlockError,
        StepBudgetExceeded,
        UnsupportedOperation,
        ScheduleDivergedError,
        NondeterminismError,
        InputError,
    ):
        assert issubclass(cls, ChaosSlothError)
        assert getattr(chaossloth, cls.__name__) is cls
