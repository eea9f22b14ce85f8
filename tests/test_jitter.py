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
    """The injected delays come from the seed alone.  (Whether a run then fails also depends on
    the real time the stock loop sees, so outcomes are not compared: that would be a timing
    assertion.)"""
    drawn: list[float] = []
    real_call_later = jitter.JitterLoop.call_later

    def recording_call_later(self: jitter.JitterLoop, delay: float, *a: object, **kw: object):
        drawn.append(delay)
        return real_call_later(self, delay, *a, **kw)

    monkeypatch.setattr(jitter.JitterLoop, "call_later", recording_call_later)

    def delays(seed: int) -> list[float]:
        drawn.clear()
        jitter.run_on_stock_loop(racy_trial, seed=seed, jitter=150e-6)
        return sorted(d for d in drawn if d < 150e-6)

    first = delays(1)
    assert first and all(0 <= d < 150e-6 for d in first)
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
