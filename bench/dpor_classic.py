"""Optimal DPOR on the classic benchmarks (C programs) and on the seed workload (asyncio).

    python bench/dpor_classic.py [--row-seconds S] [--kmax K] [--timers strict,relaxed]
                                 [--skip-c | --c-output FILE] [--quick]

Part 1 builds ``build/c/bench_dpor_classic`` (``make bench-dpor`` builds the same binary) and
runs it: readers, lastzero, indexer and filesystem, explored by the engine alone.

Part 2 runs the seed workload through the whole asyncio path: ``MultiResourceServer`` of
``examples/multi_resource.py`` loaded through the capture instrumentation, K concurrent
``handle_request('audit')`` calls (K = 2..6) on the controlled loop, judged by the
serializability oracle, explored by ``dpor`` without stopping at the first failure. Per K it
prints executions, distinct traces, failing executions, sleep-set-blocked executions, whether
the exploration was complete, seconds and executions per second, and beside them the number of
*naive* interleavings (every schedule of the enabled steps, as a brute-force explorer would run
them) and the ratio naive / executions.

The naive count is measured by the ``exhaustive`` strategy while that is feasible (column
``how`` = ``exhaustive``) and otherwise computed (``formula``) from the default-order trace:
each request is a chain of steps (its task's steps and the callbacks it scheduled); a clock
advance (a step after which nothing was ready) cuts the execution into segments, and within a
segment the chains interleave freely, so the count is the product over segments of the
multinomial (sum of the chains' step counts)! / prod (step count)!.  Where both are available
both are printed, so the formula is checked against brute force.

Timer modes: ``strict`` fires timers in deadline order, so the requests' first steps all run
before any timer (a barrier); ``relaxed`` lets a pending timer fire at any point, so a request
may finish before another one starts. Every row is capped at --row-seconds; a capped row says so
and shows what it reached. Never asserts on time.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "multi_resource.py"
C_BENCH = ROOT / "build" / "c" / "bench_dpor_classic"


# ------------------------------------------------------------------ part 1: the C programs


def run_c_bench(row_seconds: float, quick: bool) -> int:
    make = subprocess.run(
        ["make", "-s", "-C", str(ROOT), str(C_BENCH.relative_to(ROOT))],
        check=False,
        capture_output=True,
        text=True,
    )
    if make.returncode != 0:
        sys.stdout.write(make.stdout + make.stderr)
        print("the C benchmark did not build; part 1 skipped")
        return make.returncode
    env = dict(os.environ, CS_BENCH_ROW_SECONDS=f"{row_seconds:g}")
    if quick:
        env["CS_BENCH_QUICK"] = "1"
    sys.stdout.flush()
    return subprocess.run([str(C_BENCH)], check=False, env=env).returncode


# ------------------------------------------------------------------ part 2: the seed workload


def load(k: int) -> Any:
    from chaossloth import scenario
    from chaossloth.config import Config

    return scenario.load(
        str(SEED),
        Config(cls="MultiResourceServer", method="handle_request", tasks=k, args="'audit'"),
    )


def chain_segments(program: Any, timers: str) -> list[list[int]]:
    """Per segment between clock advances, the number of steps of each request's chain, read
    from one default-order execution."""
    from chaossloth import _core, runner

    r = runner.run_once(program.factory, timers=timers, detailed=True)
    paths = r.actor_paths
    roots = {
        s.actor
        for s in r.steps
        if s.name.startswith("Task ") and s.name.endswith("handle_request)")
    }

    def chain_of(actor: int) -> int | None:
        a: int | None = actor
        while a is not None:
            if a in roots:
                return a
            a = paths[a][0] if a < len(paths) else None
        return None

    # the timers made due by one clock advance all carry AFTER_ALL: consecutive ones open
    # one segment, not one each
    segments: list[dict[int, int]] = [{}]
    previous_after_all = False
    for ev in r.trace or []:
        after_all = ev.scheduled_by == _core.AFTER_ALL
        if after_all and not previous_after_all and segments[-1]:
            segments.append({})
        previous_after_all = after_all
        c = chain_of(ev.actor)
        if c is not None:
            segments[-1][c] = segments[-1].get(c, 0) + 1
    return [list(s.values()) for s in segments if s]


def multinomial(counts: list[int]) -> int:
    n = math.factorial(sum(counts))
    for c in counts:
        n //= math.factorial(c)
    return n


def naive_formula(segments: list[list[int]]) -> int:
    total = 1
    for seg in segments:
        total *= multinomial(seg)
    return total


def explore(program: Any, strategy: str, timers: str, seconds: float) -> tuple[Any, float]:
    from chaossloth import runner

    t0 = time.perf_counter()
    r = runner.explore(
        program.factory,
        strategy=strategy,
        timers=timers,
        time_limit=seconds,
        stop_on_failure=False,
        oracle=program.oracle,
        count_traces=True,
        detail_failure=False,
    )
    return r, time.perf_counter() - t0


def fmt_int(n: int) -> str:
    return f"{n:,}".replace(",", "_") if n >= 10**7 else str(n)


def seed_rows(kmax: int, timers: str, row_seconds: float, exhaustive_max: int) -> None:
    print(f"\nseed workload: K x handle_request('audit'), timers={timers}, strategy dpor")
    head = (
        f"{'K':>2} {'executions':>10} {'traces':>9} {'failing':>9} {'blocked':>7} "
        f"{'done':>4} {'seconds':>8} {'exec/s':>7} {'naive':>16} {'how':>10} {'naive/exec':>11}"
    )
    print(head)
    for k in range(2, kmax + 1):
        program = load(k)
        formula = naive_formula(chain_segments(program, timers))
        r, secs = explore(program, "dpor", timers, row_seconds)
        naive, how = formula, "formula"
        extra = ""
        if formula <= exhaustive_max:
            ex, ex_secs = explore(program, "exhaustive", timers, row_seconds)
            if ex.complete:
                naive, how = ex.executions, "exhaustive"
                check = "=" if ex.executions == formula else "!="
                extra = (
                    f"   [exhaustive {ex.executions} in {ex_secs:.1f}s {check} formula "
                    f"{formula}; {ex.distinct_traces} distinct fingerprints]"
                )
            else:
                extra = f"   [exhaustive capped at {ex.executions} schedules]"
        rate = r.executions / secs if secs > 0 else 0.0
        # a capped row's reduction is unknown (its trace count is): no ratio
        ratio = naive / r.executions if r.executions and r.complete else float("nan")
        print(
            f"{k:>2} {r.executions:>10} {r.distinct_traces:>9} {r.failing_executions:>9} "
            f"{r.sleep_blocked:>7} {'yes' if r.complete else 'no':>4} {secs:>8.2f} "
            f"{rate:>7.0f} {fmt_int(naive):>16} {how:>10} {ratio:>11.3g}"
            + ("" if r.complete else f"   (capped at {row_seconds:g}s: incomplete)")
            + extra,
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row-seconds", type=float, default=60.0, help="cap of each row (60)")
    ap.add_argument("--kmax", type=int, default=6, help="largest K of the seed workload (6)")
    ap.add_argument("--timers", default="strict,relaxed", help="timer modes, comma-separated")
    ap.add_argument(
        "--exhaustive-max",
        type=int,
        default=50_000,
        help="count naive interleavings by brute force when the formula gives at most this",
    )
    c = ap.add_mutually_exclusive_group()
    c.add_argument("--skip-c", action="store_true", help="do not run the C benchmarks")
    c.add_argument("--c-output", metavar="FILE", help="print this saved C bench output instead")
    ap.add_argument("--quick", action="store_true", help="small sizes, 10 s rows")
    ns = ap.parse_args(argv)
    if not 2 <= ns.kmax <= 6:
        ap.error("--kmax must be between 2 and 6 (the serializability oracle's limit)")
    modes = [m.strip() for m in ns.timers.split(",") if m.strip()]
    if not modes or any(m not in ("strict", "relaxed") for m in modes):
        ap.error("--timers takes strict, relaxed or both")
    row = min(ns.row_seconds, 10.0) if ns.quick else ns.row_seconds
    rc = 0
    if ns.c_output:
        sys.stdout.write(Path(ns.c_output).read_text())
    elif not ns.skip_c:
        rc = run_c_bench(row, ns.quick)
    kmax = min(ns.kmax, 4) if ns.quick else ns.kmax
    for timers in modes:
        seed_rows(kmax, timers, row, ns.exhaustive_max)
    return rc


if __name__ == "__main__":
    sys.exit(main())
