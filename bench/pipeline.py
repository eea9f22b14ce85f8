"""Times the whole pipeline on the seed example, stage by stage.

    python bench/pipeline.py [--repeat N]

The seed document reports 6.98 s for its eight stages on the MultiResourceServer example; this
prints ChaosSloth's time for each stage that runs (capture, alphabet, collapse, collision window,
diagnosis, verdict), in-process (the program is loaded once, as the CLI does), the best and the
median of N runs, and the ratio to the seed's total. Stages 6-7 (lock synthesis, adversarial
replay) are not implemented yet and are not counted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_TOTAL = 6.98


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ns = ap.parse_args()
    from chaossloth import pipeline, scenario
    from chaossloth.config import Config

    t0 = time.perf_counter()
    program = scenario.load(
        str(ROOT / "examples" / "multi_resource.py"),
        Config(cls="MultiResourceServer", method="handle_request", args="'audit'"),
    )
    load_s = time.perf_counter() - t0
    per_stage: dict[str, list[float]] = {}
    totals: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(ns.repeat):
            opts = Config(
                schedule_out=str(Path(tmp) / f"s{i}.json"),
                json_path=str(Path(tmp) / f"r{i}.json"),
                mermaid_path=str(Path(tmp) / f"m{i}.mmd"),
            )
            t = time.perf_counter()
            res = pipeline.run(program, opts, None, full=True)
            totals.append(time.perf_counter() - t)
            if res.hazard != "lost-update":
                print(f"unexpected result: {res.verdict} {res.hazard}", file=sys.stderr)
                return 1
            for s in res.stages:
                per_stage.setdefault(s.name, []).append(s.seconds)
    print(f"seed example, whole pipeline, {ns.repeat} runs (load + instrument once: {load_s:.3f}s)")
    print(f"{'stage':<22}{'best':>10}{'median':>10}")
    for name, xs in per_stage.items():
        print(f"{name:<22}{min(xs):>9.4f}s{statistics.median(xs):>9.4f}s")
    best, med = min(totals), statistics.median(totals)
    print(f"{'total':<22}{best:>9.4f}s{med:>9.4f}s")
    print(
        f"seed document: {SEED_TOTAL:.2f}s for its eight stages; "
        f"ratio seed/ours (median) = {SEED_TOTAL / med:.1f}x"
    )
    # what a user waits for: a fresh process, imports, instrumentation, every stage
    walls = []
    cmd = [
        sys.executable,
        "-m",
        "chaossloth",
        str(ROOT / "examples" / "multi_resource.py"),
        "--cls",
        "MultiResourceServer",
        "--method",
        "handle_request",
        "--args",
        "'audit'",
        "-q",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run(cmd, cwd=tmp, capture_output=True, check=False)
            walls.append(time.perf_counter() - t)
    w = statistics.median(walls)
    print(
        f"{'CLI process (wall)':<22}{min(walls):>9.4f}s{w:>9.4f}s   "
        f"ratio seed/ours = {SEED_TOTAL / w:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
