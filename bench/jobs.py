"""``--jobs N`` side by side with one process, in one run: the same random exploration (same seed,
same budget, stop-on-failure off, so every row runs every execution) of the bundled examples, and
the executions per second of each row with the ratio to ``--jobs 1``.  The rows also print the
failing-execution counts, which must be equal (the workers run the same random streams).

Usage:  python bench/jobs.py [--executions N] [--jobs 1,2,4]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from chaossloth import parallel, runner, scenario
from chaossloth.config import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = [
    ("examples/multi_resource.py", "two_requests"),
    ("examples/bank_transfer.py", "two_transfers"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--executions", type=int, default=4000)
    ap.add_argument("--jobs", default="1,2,4")
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


if __name__ == "__main__":
    main()
