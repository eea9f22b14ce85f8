"""What a minimal lock enclosure keeps: throughput of the original, the synthesized patch and a
whole-method lock, side by side in one run.

Workload (bench/patch_cost_target.py): ``Ledger.record(key)`` does 1 ms of simulated I/O, a
little CPU, a read-await-write of ``self.totals[key]`` (a lost update), and 1 ms of I/O again.
N concurrent calls with one key run on stock ``asyncio.run`` + ``asyncio.gather``.

Variants: the original (no lock: wrong, its lost updates are shown), the patch ChaosSloth
synthesizes (``ASTConcurrencyPatcher.patch_and_compile``: a lock around the read-await-write
interval only) and a whole-method lock (a hand-written subclass holding one lock for the whole
body: correct, and the I/O is serialized too).  Prints the patch's diff, calls/s of each
variant (best of R rounds, the variants interleaved in each round so that machine noise hits
all alike), the lost updates, and the ratios to the whole-method lock (higher is better).
Exits 1 if a locked variant loses an update (a wrong patch, not a slow one).  Usage:
    python bench/patch_cost.py [--calls N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from patch_cost_target import Ledger  # the workload lives beside this file

KEY = "key"


class WholeMethodLock(Ledger):
    """The coarse fix a user writes by hand: the whole body under one lock."""

    def __init__(self) -> None:
        super().__init__()
        self._whole = asyncio.Lock()

    async def record(self, key: str) -> int:
        async with self._whole:
            return await super().record(key)


def run_batch(cls: type, calls: int) -> tuple[float, int]:
    """Seconds that `calls` concurrent ``record(KEY)`` take on a fresh object, and the total
    they leave (`calls` when no update is lost)."""

    async def main() -> tuple[float, int]:
        obj = cls()
        t0 = time.perf_counter()
        await asyncio.gather(*(obj.record(KEY) for _ in range(calls)))
        return time.perf_counter() - t0, obj.totals.get(KEY, 0)

    return asyncio.run(main())


def synthesize() -> tuple[type, str, float]:
    """The patched class, its diff and the seconds the patcher took (finding the hazard,
    synthesizing the locks, verifying them)."""
    try:
        from chaossloth.reasoning.patcher import ASTConcurrencyPatcher
    except ImportError as exc:
        raise SystemExit(
            f"bench/patch_cost.py needs chaossloth.reasoning.patcher, which this checkout "
            f"cannot import ({exc})"
        ) from None
    t0 = time.perf_counter()
    patched, diff = ASTConcurrencyPatcher.patch_and_compile(
        Ledger, "record", args=(KEY,), init_args=(), tasks=2
    )
    return patched, diff, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100, help="concurrent calls per batch")
    ap.add_argument("--repeat", type=int, default=5, help="rounds; the best of each is kept")
    ns = ap.parse_args()
    patched, diff, patch_s = synthesize()
    print(f"patch synthesized and verified in {patch_s:.2f}s:")
    print("\n".join(f"    {line}" for line in diff.rstrip("\n").splitlines()))
    variants: list[tuple[str, Any]] = [
        ("original (no lock, wrong)", Ledger),
        ("synthesized patch", patched),
        ("whole-method lock", WholeMethodLock),
    ]
    best: dict[str, float] = {}
    totals: dict[str, list[int]] = {name: [] for name, _ in variants}
    for _ in range(ns.repeat):
        for name, cls in variants:
            gc.collect()
            seconds, total = run_batch(cls, ns.calls)
            best[name] = min(best.get(name, float("inf")), seconds)
            totals[name].append(total)
    print(
        f"\n{ns.calls} concurrent Ledger.record({KEY!r}) calls on asyncio.run + gather "
        f"(1 ms I/O before and after a read-await-write), best of {ns.repeat}"
    )
    print(f"  {'variant':<28}{'calls/s':>10}{'lost updates (worst)':>24}{'vs whole lock':>15}")
    whole = ns.calls / best["whole-method lock"]
    wrong = False
    for name, _ in variants:
        rate = ns.calls / best[name]
        lost = ns.calls - min(totals[name])
        if lost and name != "original (no lock, wrong)":
            wrong = True
        print(f"  {name:<28}{rate:>10.0f}{f'{lost}/{ns.calls}':>24}{rate / whole:>14.2f}x")
    patch = ns.calls / best["synthesized patch"]
    original = ns.calls / best["original (no lock, wrong)"]
    print(
        f"ratio patch / whole-method lock: {patch / whole:.1f}x the throughput; "
        f"the patch keeps {patch / original:.0%} of the unlocked original's"
    )
    if wrong:
        print("a locked variant lost updates: the lock does not fix the race", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
