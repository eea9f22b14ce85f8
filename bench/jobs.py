"""``--jobs N`` side by side with one process, in one run.

Sampling: the same random exploration (same seed, same budget, stop-on-failure off, so every row
runs every execution) of the bundled examples, and the executions per second of each row with
the ratio to ``--jobs 1``.  The rows also print the failing-execution counts, which must be
equal (the workers run the same random streams).

DPOR: a complete exploration of the same workload with the tree shared by N processes
(share.py) against one process: the wall time of the whole exploration and its ratio to
``--jobs 1``, the executions (sharing explores some traces twice: a given branch and the one
being run where it was given do not prune each other) and the processes forked.  Workloads:
bench/dpor_asyncio.py's semaphore (four jobs behind ``Semaphore(2)``) and the seed workload of
tests/targets with K concurrent calls.

Usage:  python bench/jobs.py [--executions N] [--jobs 1,2,4] [--kmax K]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chaossloth import parallel, runner, scenario
from chaossloth.config import DEFAULTS, Config

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = [
    ("examples/multi_resource.py", "two_requests"),
    ("examples/bank_transfer.py", "two_transfers"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--executions", type=int, default=4000)
    ap.add_argument("--jobs", default="1,2,4")
    ap.add_argument("--kmax", type=int, default=6, help="largest K of the seed workload (6)")
    args = ap.parse_args()
    counts = [int(j) for j in args.jobs.split(",")]
    print(f"cores: {os.cpu_count()}; {args.executions} random executions per row")
    for path, name in PROGRAMS:
        program = scenario.load_scenario(ROOT / path, name)
        cfg = DEFAULTS.replace(
            strategy="random", max_executions=args.executions, stop_on_failure=False, seed=11
        )
        base = None
        for jobs in counts:
            if jobs == 1:
                r = runner.explore(program.factory, config=cfg)
            else:
                r = parallel.explore(program.factory, config=cfg.replace(jobs=jobs))
            rate = r.executions / r.explore_seconds
            base = base or rate
            print(
                f"{path}:{name:<14} jobs={jobs}: {rate:8.0f} executions/s "
                f"(x{rate / base:.2f} of jobs=1), {r.failing_executions} failing"
            )
    dpor_rows(counts, args.kmax)


def dpor_rows(counts: list[int], kmax: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import dpor_asyncio

    path = Path(tempfile.mkdtemp(prefix="chaossloth-jobs-")) / "primitive_programs.py"
    path.write_text(dpor_asyncio.PROGRAMS)
    seed = ROOT / "tests" / "targets" / "test_multi_resource.py"
    workloads: list[tuple[str, Any]] = [("semaphore", (path, Config(scenario="semaphore")))]
    for k in range(4, kmax + 1):
        cfg = Config(cls="MultiResourceServer", method="handle_request", tasks=k, args="'audit'")
        workloads.append((f"seed K={k}", (seed, cfg)))
    print("dpor, complete explorations: wall time (ratio to jobs=1), executions, forks")
    for name, (file, cfg) in workloads:
        program = scenario.load(str(file), cfg)
        try:
            base = None
            for jobs in counts:
                t0 = time.perf_counter()
                r = runner.explore(
                    program.factory,
                    strategy="dpor",
                    stop_on_failure=False,
                    detail_failure=False,
                    oracle=program.oracle,
                    jobs=jobs,
                )
                secs = time.perf_counter() - t0
                base = base or secs
                forks = r.phases[-1].get("processes_forked", 0)
                print(
                    f"{name:<11} jobs={jobs}: {secs:7.2f}s (x{secs / base:.2f}), "
                    f"{r.executions:>6} executions, complete={r.complete}, {forks} forks",
                    flush=True,
                )
        finally:
            program.release()


if __name__ == "__main__":
    main()
