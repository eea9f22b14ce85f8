"""How capture's cost grows with the number of gathered tasks (issue 39), side by side in one run.

The workload: N tasks gathered by main, each ``v = self.n; await asyncio.sleep(0); self.n = v
+ 1`` (3N + 3 steps).  One recorded execution in the default order (what capture, stage 1,
runs) is timed for N = 1000, 2000, 4000 (by default), best of R, and the ratio of each time to
the previous one is printed: doubling N costs ~2x when capture is linear and ~4x when it is
quadratic.  Stock asyncio's time for the same workload is printed alongside.  No assertion:
the figures depend on the machine; the ratios are what to read.  Usage:
    python bench/bench_many_tasks.py [--sizes 1000,2000,4000] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable, Coroutine
from typing import Any

from chaossloth import runner


class Counter:
    def __init__(self) -> None:
        self.n = 0

    async def inc(self) -> None:
        v = self.n
        await asyncio.sleep(0)
        self.n = v + 1


def workload(n: int) -> Callable[[], Coroutine[Any, Any, int]]:
    async def main() -> int:
        c = Counter()
        await asyncio.gather(*(c.inc() for _ in range(n)))
        return c.n  # 1: every task read 0 before any wrote (the lost update)

    return main


def best(f: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def capture(n: int) -> None:
    r = runner.run_once(workload(n), detailed=False, max_steps=3 * n + 100)
    assert r.outcome == runner.OK, r.outcome


def stock(n: int) -> None:
    asyncio.run(workload(n)())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2000,4000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(
        f"{'tasks':>7} {'steps':>7} {'capture s':>10} {'x prev':>7} {'stock s':>9} {'x stock':>8}"
    )
    prev = None
    for n in sizes:
        t = best(lambda n=n: capture(n), args.repeat)
        s = best(lambda n=n: stock(n), args.repeat)
        ratio = f"{t / prev:7.2f}" if prev else f"{'-':>7}"
        print(f"{n:>7} {3 * n + 3:>7} {t:>10.3f} {ratio} {s:>9.4f} {t / s:>8.0f}")
        prev = t
    print("x prev: time over the previous size's; ~2 per doubling is linear, ~4 quadratic")


if __name__ == "__main__":
    main()
