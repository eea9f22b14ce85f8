"""Stage 4's natural failure rate against programs whose rate under the documented jitter is
known analytically (see :mod:`chaossloth.jitter`: every task step is delayed by an independent
uniform delay in [0, J]; the clock is virtual, so a run is a function of the seed alone).

For each program, :func:`jitter.measure` runs over 40 seeds and its reported 95% interval must
cover the true rate for at least 36 of them.  Why 36/40: exact 95% intervals would miss on ~2 of
40 seeds on average, and miss on at most 4 with probability ~0.86; the count is deterministic
(fixed seeds, virtual time), so this does not flake -- and a model error (a wrong J, delays
applied to the wrong callbacks, a biased count) moves the interval off the true rate for most
seeds, not for a few.  The pooled count over the 40 seeds is checked against the true rate too,
a much sharper test of the same thing.  No wall clock enters: ``cost`` (the per-step CPU cost
that J's floor uses) is given, and the budget is too large to stop the runs.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, cli

from chaossloth import _core, jitter
from chaossloth.config import DEFAULTS
from chaossloth.errors import InputError

SEEDS = range(40)
COVERED_AT_LEAST = 36
COST = 50e-6  # J's floor for two workers: 2 * COST = 100 µs


def _irwin_hall_cdf(x: float, n: int) -> float:
    """P(U1 + ... + Un <= x) for independent uniforms on [0, 1]."""
    total = sum((-1) ** k * math.comb(n, k) * (x - k) ** n for k in range(math.floor(x) + 1))
    return total / math.factorial(n)


# -- the programs ------------------------------------------------------------------------------


def timer_vs_step(theta: float) -> Callable[[], Any]:
    """Worker A's first step (at delay a) arms a plain callback ``theta * J`` later (callbacks
    that are not task steps get no delay); worker B's first step (at delay b) fails if that
    callback already ran: it fails iff b > a + theta J.  The workers await nothing, so J is the
    floor, 2 * COST; P(U_b - U_a > theta) = (1 - theta)^2 / 2."""

    async def trial() -> None:
        marked: list[bool] = []
        loop = asyncio.get_running_loop()

        async def a() -> None:
            loop.call_later(theta * 2 * COST, marked.append, True)

        async def b() -> None:
            assert not marked, "B ran after A's callback"

        await asyncio.gather(a(), b())

    return trial


def lost_update_staggered() -> Callable[[], Any]:
    """Two read-sleep-write workers; B first waits 1.5 W.  Their awaits are W (A), 1.5 W and W
    (B): the median, J, is W.  A reads at a1 and writes at a1 + W + a2; B reads at
    b1 + 1.5 W + b2 (then writes later than A's read): the update is lost iff B reads before A
    writes, iff (a1 + a2) - (b1 + b2) > W / 2, with the four delays uniform on [0, W]: as
    U1 + U2 + (1 - U3) + (1 - U4) > 2.5, probability 1 - IrwinHall4(2.5) = 0.2005."""
    w = 1e-3

    async def trial() -> None:
        state = {"n": 0}

        async def bump(first: float) -> None:
            if first:
                await asyncio.sleep(first)
            v = state["n"]
            await asyncio.sleep(w)
            state["n"] = v + 1

        await asyncio.gather(bump(0.0), bump(1.5 * w))
        assert state["n"] == 2, "lost update"

    return trial


def first_steps_order() -> Callable[[], Any]:
    """Two workers with one step each; the run fails iff B's runs first: probability 1/2."""

    async def trial() -> None:
        order: list[str] = []

        async def step(name: str) -> None:
            order.append(name)

        await asyncio.gather(step("a"), step("b"))
        assert order == ["a", "b"], order

    return trial


CASES = [
    ("timer-vs-step-0.3", timer_vs_step(0.3), (1 - 0.3) ** 2 / 2),
    ("timer-vs-step-0.8", timer_vs_step(0.8), (1 - 0.8) ** 2 / 2),
    ("lost-update-staggered", lost_update_staggered(), 1 - _irwin_hall_cdf(2.5, 4)),
    ("first-steps-order", first_steps_order(), 0.5),
]


@pytest.mark.parametrize("name,trial,rate", CASES, ids=[c[0] for c in CASES])
def test_interval_covers_the_known_rate(name: str, trial: Any, rate: float) -> None:
    covered = runs = failures = 0
    for seed in SEEDS:
        tel = jitter.measure(trial, seed=seed, cost=COST, budget=600.0)
        assert not tel.error and not tel.stopped_by, (seed, tel.error, tel.stopped_by)
        r = tel.rate
        assert r["high"] - r["low"] <= tel.width  # the runs stopped at the width asked
        covered += r["low"] <= rate <= r["high"]
        runs += tel.runs
        failures += tel.failures
    assert covered >= COVERED_AT_LEAST, f"{name}: {covered}/{len(SEEDS)} intervals cover {rate}"
    pooled = _core.rate_estimate(failures, runs)
    assert pooled["lo"] <= rate <= pooled["hi"], (name, failures, runs, rate)


def test_the_jitter_is_the_workers_median_await() -> None:
    # the staggered program's awaits: W, 1.5 W, W -> J = W (not the run's 2.5 W and more)
    tel = jitter.measure(lost_update_staggered(), seed=0, cost=COST, budget=600.0)
    assert tel.jitter_seconds == pytest.approx(1e-3)
    tel = jitter.measure(first_steps_order(), seed=0, cost=COST, budget=600.0)
    assert tel.jitter_seconds == pytest.approx(2 * COST)


def test_a_long_idle_wait_does_not_scale_the_jitter() -> None:
    """A TTL-like 30 s wait at the end of the run (in the root task) does not make J 15 s."""

    async def trial() -> None:
        await first_steps_order()()
        await asyncio.sleep(30.0)

    tel = jitter.measure(trial, seed=0, cost=COST, budget=600.0)
    assert tel.run_seconds >= 30.0
    assert tel.jitter_seconds == pytest.approx(2 * COST)


def test_the_interval_stops_the_runs_or_the_report_says_why() -> None:
    trial = first_steps_order()
    tel = jitter.measure(trial, seed=0, cost=COST, budget=600.0, width=0.05)
    assert tel.stopped_by == "" and tel.rate["high"] - tel.rate["low"] <= 0.05
    capped = jitter.measure(trial, seed=0, cost=COST, budget=600.0, width=0.05, max_runs=50)
    assert capped.stopped_by == "max_runs" and capped.runs == 50
    assert "wider than the 5 asked" in capped.rate_sentence()
    assert capped.to_json()["natural_failure_rate"]["stopped_by"] == "max_runs"


# -- reproducibility ----------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_counts_in_process() -> None:
    trial = lost_update_staggered()
    a = jitter.measure(trial, seed=5, budget=600.0)  # the step cost measured each time
    b = jitter.measure(trial, seed=5, budget=600.0)
    assert (a.runs, a.failures, a.offset_failed) == (b.runs, b.failures, b.offset_failed)
    c = jitter.measure(trial, seed=6, budget=600.0)
    assert (c.runs, c.failures, c.offset_failed) != (a.runs, a.failures, a.offset_failed)


def test_the_same_seed_gives_the_same_counts_from_the_command(tmp_path: Path) -> None:
    """flaky_inventory.py twice with --seed 7, each in a fresh process: identical stage 4."""

    def stage4() -> tuple[Any, ...]:
        out = tmp_path / "r.json"
        args = ["check", str(EXAMPLES / "flaky_inventory.py"), "--scenario", "last_item"]
        cli(*args, "--seed", "7", "-q", "--json", str(out), cwd=tmp_path)
        rep = json.loads(out.read_text())
        n, w = rep["natural_failure_rate"], rep["collision_window"]
        assert n["runs"] > 0 and not n["stopped_by"]
        return n["runs"], n["failures"], w["offsets"], w["failing_offsets"], w["kind"]

    assert stage4() == stage4()


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, True, "0.1"])
def test_telemetry_width_is_a_share(bad: object) -> None:
    with pytest.raises(InputError, match="telemetry_width"):
        DEFAULTS.replace(telemetry_width=bad)
    assert DEFAULTS.replace(telemetry_width=0.05).telemetry_width == 0.05
