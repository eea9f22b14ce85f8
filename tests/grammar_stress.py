"""Stress driver for the grammar soundness test: draws programs of tests/grammar_programs.py for a
bounded time, checks each one (dpor against exhaustive, and plain against instrumented fifo),
and reports the figures: programs generated, checked, skipped for size, mismatches by focus
class, and for a sample of mismatches a minimized reproducer grouped by the construct classes
left in it.

    python tests/grammar_stress.py --seconds 900 --out /tmp/grammar-stress.json

Not a test module (pytest does not collect it); the tests are in test_soundness_grammar.py.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grammar_programs import (
    CLASSES,
    Program,
    differential,
    minimize,
    random_program,
    run_instrumented_fifo,
    run_plain,
)


def _culprit(prog: Program) -> str:
    """The construct classes of a minimized reproducer ("plain" operations are the ordinary
    accesses it races with, so they name nothing)."""
    classes = sorted(prog.constructs() - {"plain"})
    return "+".join(classes) if classes else "plain"


def _unsound(cap: int, deadline: float) -> Any:
    """Whether a candidate still shows the mismatch; past the deadline, no candidate does (the
    minimization stops where it is)."""

    def still(p: Program) -> bool:
        if time.monotonic() > deadline:
            return False
        d = differential(p, cap)
        return d.complete and not d.agrees

    return still


def _semantic_differs(p: Program) -> bool:
    return run_instrumented_fifo(p)[2] != run_plain(p)  # the value (see the semantic test)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=900)
    ap.add_argument("--cap", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minimize-per-focus", type=int, default=3)
    ap.add_argument("--minimize-seconds", type=float, default=20, help="per mismatch")
    ap.add_argument("--out", default="grammar-stress.json")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    foci = (*CLASSES, "mixed")
    figures: Counter[str] = Counter()
    by_focus: Counter[str] = Counter()
    semantic_by_focus: Counter[str] = Counter()
    minimized_done: Counter[str] = Counter()
    groups: dict[str, dict[str, Any]] = {}
    semantic_groups: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < args.seconds:
        focus = foci[n % len(foci)]
        n += 1
        prog = random_program(rng, focus)
        figures["generated"] += 1
        try:
            diff = differential(prog, args.cap)
            if not diff.complete:
                figures["skipped_for_size"] += 1
            else:
                figures["checked"] += 1
                figures["exhaustive_executions"] += diff.exhaustive_executions
                figures["dpor_executions"] += diff.dpor_executions
                if not diff.agrees:
                    figures["mismatches"] += 1
                    by_focus[focus] += 1
                    if diff.dpor_diverged:
                        figures["dpor_diverged"] += 1
                    if diff.dpor - diff.exhaustive:
                        figures["outcomes_only_under_dpor"] += 1
                    if minimized_done[focus] < args.minimize_per_focus:
                        minimized_done[focus] += 1
                        deadline = time.monotonic() + args.minimize_seconds
                        small = minimize(prog, _unsound(args.cap, deadline))
                        g = groups.setdefault(
                            _culprit(small), {"count": 0, "reproducer": None, "size": 1 << 30}
                        )
                        g["count"] += 1
                        size = len(small.op_names())
                        if size < g["size"]:
                            g["size"] = size
                            g["reproducer"] = small.describe()
                            g["literal"] = repr(small)
            figures["semantic_checked"] += 1
            if _semantic_differs(prog):
                figures["semantic_mismatches"] += 1
                semantic_by_focus[focus] += 1
                if semantic_by_focus[focus] <= 3:
                    small = minimize(prog, _semantic_differs)
                    g = semantic_groups.setdefault(_culprit(small), {"count": 0})
                    g["count"] += 1
                    g.setdefault("reproducer", small.describe())
        except Exception:  # noqa: BLE001 - a harness error is a finding too: count and keep one
            figures["errors"] += 1
            if len(errors) < 5:
                errors.append(repr(prog) + "\n" + traceback.format_exc())
        if n % 100 == 0:
            print(f"[{time.monotonic() - started:.0f}s] {dict(figures)}", file=sys.stderr)
            _write(
                args, started, figures, by_focus, semantic_by_focus, groups, semantic_groups, errors
            )
    report = _write(
        args, started, figures, by_focus, semantic_by_focus, groups, semantic_groups, errors
    )
    print(json.dumps({k: report[k] for k in report if k != "minimized_groups"}, indent=2))


def _write(
    args: Any,
    started: float,
    figures: Counter[str],
    by_focus: Counter[str],
    semantic_by_focus: Counter[str],
    groups: dict[str, Any],
    semantic_groups: dict[str, Any],
    errors: list[str],
) -> dict[str, Any]:
    """Writes the report so far (a run cut short keeps its figures)."""
    report = {
        "seconds": round(time.monotonic() - started),
        "seed": args.seed,
        "cap": args.cap,
        "figures": dict(figures),
        "mismatches_by_focus": dict(by_focus),
        "semantic_mismatches_by_focus": dict(semantic_by_focus),
        "minimized_groups": groups,
        "semantic_groups": semantic_groups,
        "errors": errors,
    }
    Path(args.out).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
