"""Per-step cost of the controlled loop, side by side in one run.

Loops: stock asyncio, uvloop (if installed), ControlledLoop in plain fifo (pure C dispatch) and
ControlledLoop with recording on (a fifo Explorer attached: every step goes through cs_choose /
cs_step_begin / cs_step_end and the loop's own accesses are recorded).

Workloads: (a) a call_soon ping-pong, one callback per step; (b) many tasks each awaiting
asyncio.sleep(0) in a loop, one task step per await.

Prints ns/step and the ratio to stock (lower is better).  Usage:
    python bench/loop_overhead.py [--steps N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

from chaossloth import _core
from chaossloth.loop import ControlledLoop

try:
    import uvloop
except ImportError:  # optional: pip install uvloop
    uvloop = None


def ping_pong(loop: asyncio.AbstractEventLoop, steps: int) -> float:
    left = [steps]

    def ping() -> None:
        left[0] -= 1
        if left[0]:
            loop.call_soon(pong)
        else:
            done.set_result(None)

    def pong() -> None:
        left[0] -= 1
        if left[0]:
            loop.call_soon(ping)
        else:
            done.set_result(None)

    done = loop.create_future()
    loop.call_soon(ping)
    t0 = time.perf_counter()
    loop.run_until_complete(done)
    return time.perf_counter() - t0


def sleep_zero_tasks(loop: asyncio.AbstractEventLoop, steps: int, tasks: int = 100) -> float:
    rounds = steps // tasks

    async def worker() -> None:
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(tasks)))

    t0 = time.perf_counter()
    loop.run_until_complete(main())
    return time.perf_counter() - t0


def stock() -> tuple[asyncio.AbstractEventLoop, Callable[[], None]]:
    loop = asyncio.new_event_loop()
    return loop, loop.close


def uv() -> tuple[asyncio.AbstractEventLoop, Callable[[], None]]:
    loop = uvloop.new_event_loop()
    return loop, loop.close


def controlled() -> tuple[asyncio.AbstractEventLoop, Callable[[], None]]:
    loop = ControlledLoop()
    return loop, loop.close


def recording() -> tuple[asyncio.AbstractEventLoop, Callable[[], None]]:
    ex = _core.Explorer("fifo")
    ex.begin()
    loop = ControlledLoop()
    loop._cs_attach(ex)

    def done() -> None:
        loop._cs_detach()
        ex.end(_core.OUTCOME_OK)
        loop.close()

    return loop, done


def measure(
    make: Callable[[], tuple[asyncio.AbstractEventLoop, Callable[[], None]]],
    work: Callable[[asyncio.AbstractEventLoop, int], float],
    steps: int,
    repeat: int,
) -> float:
    best = float("inf")
    for _ in range(repeat):
        loop, close = make()
        gc.collect()
        try:
            best = min(best, work(loop, steps))
        finally:
            close()
    return best / steps * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    loops: list[tuple[str, Any]] = [("stock asyncio", stock)]
    if uvloop is not None:
        loops.append(("uvloop", uv))
    loops += [("ControlledLoop fifo", controlled), ("ControlledLoop recording", recording)]
    workloads = [
        ("(a) call_soon ping-pong", ping_pong),
        ("(b) 100 tasks x sleep(0)", sleep_zero_tasks),
    ]
    if uvloop is None:
        print("note: uvloop is not installed (pip install uvloop); its rows are skipped")
    print(f"{args.steps} steps per run, best of {args.repeat}")
    for wname, work in workloads:
        print(f"\n{wname}")
        base = None
        # interleave the loops per repetition round so that machine noise hits all alike
        results: dict[str, float] = {}
        steps_of: dict[str, int] = {}
        for _ in range(args.repeat):
            for lname, make in loops:
                steps = args.steps
                steps_of[lname] = steps
                ns = measure(make, work, steps, 1)
                results[lname] = min(results.get(lname, float("inf")), ns)
        base = results["stock asyncio"]
        for lname, _ in loops:
            ns = results[lname]
            note = f"   ({steps_of[lname]} steps)" if steps_of[lname] != args.steps else ""
            print(f"  {lname:<26} {ns:8.0f} ns/step   {ns / base:5.2f}x stock{note}")


if __name__ == "__main__":
    main()
