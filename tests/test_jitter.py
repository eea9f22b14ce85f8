"""Stock-loop telemetry: fast-forward clock, injected delays, offsets, failure rate, window."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from chaossloth import jitter


class Racy:
    """Fails when the second call reads before the first one writes (100 µs later)."""

    def __init__(self) -> None:
        self.value = 0

    async def bump(self) -> None:
        v = self.value
        await asyncio.sleep(100e-6)
        self.value = v + 1


async def racy_trial() -> None:
    r = Racy()
    await asyncio.gather(r.bump(), r.bump())
    assert r.value == 2, "lost update"


async def passing_trial() -> None:
    r = Racy()
    await r.bump()
    await r.bump()
    assert r.value == 2


def test_stock_loop_runs_and_judges() -> None:
    assert not jitter.run_on_stock_loop(passing_trial).failed
    r = jitter.run_on_stock_loop(racy_trial)
    assert r.failed and "lost update" in r.reason


def test_fast_forward_clock_skips_idle_time() -> None:
    async def long_sleep() -> None:
        await asyncio.sleep(5.0)

    t0 = time.perf_counter()
    r = jitter.run_on_stock_loop(long_sleep)
    real = time.perf_counter() - t0
    assert not r.failed
    assert r.duration >= 5.0
    assert real < r.duration  # the five seconds were not waited for


def test_offsets_separate_the_collision_window() -> None:
    near = jitter.run_on_stock_loop(racy_trial, offset=20e-6)
    far = jitter.run_on_stock_loop(racy_trial, offset=1e-3)
    assert near.failed and not far.failed


def test_jitter_is_seeded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The injected delays come from the seed alone."""
    drawn: list[float] = []
    real_draw = jitter.JitterLoop._draw

    def recording_draw(self: jitter.JitterLoop) -> float:
        drawn.append(real_draw(self))
        return drawn[-1]

    monkeypatch.setattr(jitter.JitterLoop, "_draw", recording_draw)

    def delays(seed: int) -> list[float]:
        drawn.clear()
        jitter.run_on_stock_loop(racy_trial, seed=seed, jitter=150e-6)
        return list(drawn)

    first = delays(1)
    assert len(first) >= 4 and all(0 <= d <= 150e-6 for d in first)
    assert delays(1) == first
    assert delays(2) != first


def test_deadlock_on_stock_loop_is_a_failure_not_a_hang() -> None:
    async def deadlock() -> None:
        a, b = asyncio.Lock(), asyncio.Lock()

        async def one(x: asyncio.Lock, y: asyncio.Lock) -> None:
            async with x:
                await asyncio.sleep(0)
                async with y:
                    pass

        await asyncio.gather(one(a, b), one(b, a))

    r = jitter.run_on_stock_loop(deadlock)
    assert r.failed and "deadlock" in r.reason


def test_livelock_on_stock_loop_is_bounded() -> None:
    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    r = jitter.run_on_stock_loop(spin)
    assert r.failed and "livelock" in r.reason


def test_real_io_is_refused() -> None:
    async def io() -> None:
        a, b = socket.socketpair()
        try:
            a.setblocking(False)
            await asyncio.get_running_loop().sock_recv(a, 1)
        finally:
            a.close()
            b.close()

    tel = jitter.measure(io)
    assert tel.error and "real I/O" in tel.error


def test_measure_reports_rate_and_window() -> None:
    tel = jitter.measure(racy_trial, seed=1)
    assert tel.runs >= 10 and 0 < tel.failures <= tel.runs
    assert 0.0 <= tel.rate["low"] <= tel.rate["estimate"] <= tel.rate["high"] <= 1.0
    w = tel.window
    assert w["low_seconds"] <= w["estimate_seconds"] <= w["high_seconds"]
    # the race bites while the second call reads before the first writes: 100 µs after start
    assert 50e-6 < w["estimate_seconds"] < 200e-6
    assert "collide" in tel.sentence
    assert tel.to_json()["collision_window"]["failing_offsets"] > 0


def test_measure_on_a_correct_program_sees_no_collision() -> None:
    tel = jitter.measure(passing_trial, seed=1)
    assert tel.failures == 0 and not any(tel.offset_failed)
    assert "no collision" in tel.sentence


# -- threads: waiting for an executor job is not a deadlock -----------------------------------


def _blocking_work(x: int) -> int:
    time.sleep(0.002)  # a real blocking call, done in a worker thread
    return x * 2


async def to_thread_trial() -> None:
    """A correct program: two tasks each hand blocking work to a thread, under a lock."""
    lock = asyncio.Lock()
    total: list[int] = []

    async def worker(x: int) -> None:
        v = await asyncio.to_thread(_blocking_work, x)
        async with lock:
            total.append(v)
        w = await asyncio.get_running_loop().run_in_executor(None, _blocking_work, v)
        async with lock:
            total.append(w)

    await asyncio.gather(worker(1), worker(2))
    assert sorted(total) == [2, 4, 4, 8], total


def test_waiting_for_a_thread_is_not_a_deadlock() -> None:
    r = jitter.run_on_stock_loop(to_thread_trial)
    assert not r.failed, r.reason
    tel = jitter.measure(to_thread_trial, seed=1)
    assert tel.runs >= jitter.MIN_RUNS and tel.failures == 0, tel.first_failure


def test_thread_completions_arrive_in_submission_order() -> None:
    """Two jobs submitted in order complete, as the loop sees them, in that order, however fast
    the threads are: the second job here finishes first in real time."""

    def slow() -> str:
        time.sleep(0.02)
        return "slow"

    def fast() -> str:
        return "fast"

    async def trial() -> list[str]:
        seen: list[str] = []

        async def job(f: object) -> None:
            seen.append(await asyncio.to_thread(f))  # type: ignore[arg-type]

        await asyncio.gather(job(slow), job(fast))
        return seen

    orders = set()
    for seed in range(3):
        r = jitter.run_on_stock_loop(trial, seed=seed, judge=lambda v: orders.add(tuple(v)))
        assert not r.failed, r.reason
    assert orders == {("slow", "fast")}


def test_a_timer_does_not_fire_while_a_job_is_pending() -> None:
    """A job's work takes no virtual time: a timeout around it (far longer than nothing) does
    not fire, however long the thread takes in real time."""

    def slow() -> str:
        time.sleep(0.3)  # longer than any short real-time slice a loop might give a thread
        return "done"

    async def trial() -> str:
        return await asyncio.wait_for(asyncio.to_thread(slow), timeout=1e-3)

    r = jitter.run_on_stock_loop(trial, judge=lambda v: v == "done")
    assert not r.failed, r.reason


def test_a_thread_that_never_finishes_is_stuck_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(jitter, "THREAD_WAIT", 0.05)
    release = threading.Event()

    async def trial() -> None:
        await asyncio.to_thread(release.wait)

    try:
        r = jitter.run_on_stock_loop(trial)
    finally:
        release.set()
    assert r.failed and "executor job" in r.reason


def test_a_timer_rearmed_at_now_until_time_passes_ends_on_the_stock_loop() -> None:
    """Code that waits for time to pass by re-arming a timer at the current instant (a leaky
    bucket whose level drains with elapsed time: aiolimiter) ends on a real loop, whose clock
    moves while it spins; the telemetry loop's clock moves too once the loop has not idled for
    BUSY_LIMIT iterations (it reported such a run as a livelock)."""

    async def trial() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        fut = loop.create_future()

        def check() -> None:
            if loop.time() > start:
                fut.set_result(loop.time() - start)
            else:
                loop.call_at(loop.time(), check)

        loop.call_soon(check)
        return await fut

    result = jitter.run_on_stock_loop(trial, seed=1)
    assert not result.failed, result.reason
    assert 0 < result.duration < 0.1


def test_a_poll_for_a_sleeping_task_ends_on_the_stock_loop() -> None:
    """A task polling with sleep(0) for a flag that a task sleeping 2 s sets ends on a real
    loop (its clock moves while it spins); the telemetry loop's clock moves to the sleeper's
    deadline once it has not idled for BUSY_LIMIT iterations, as the controlled loop's busy-poll
    clock does (it took 10 us an iteration there, and reported a livelock after MAX_ITERATIONS
    where stage 3 had passed complete)."""

    class Conn:
        connected = False

        async def connect(self) -> None:
            await asyncio.sleep(2)
            self.connected = True

    polls: list[int] = []

    async def trial() -> None:
        conn = Conn()
        task = asyncio.ensure_future(conn.connect())
        polls.append(0)
        while not conn.connected:
            polls[-1] += 1
            await asyncio.sleep(0)
        await task

    result = jitter.run_on_stock_loop(trial, seed=1)
    assert not result.failed, result.reason
    assert 2 <= result.duration < 2.1
    assert jitter.BUSY_LIMIT < polls[-1] < jitter.MAX_ITERATIONS


def test_a_real_livelock_with_a_periodic_timer_is_still_one() -> None:
    async def spin() -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            loop.call_later(1, tick)  # a heartbeat: a deadline is always pending

        tick()
        while True:
            await asyncio.sleep(0)

    r = jitter.run_on_stock_loop(spin)
    assert r.failed and "livelock" in r.reason
