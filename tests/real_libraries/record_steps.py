"""Records what a scenario's steps do under fixed schedules, for the real-library tier's
determinism check (tests/test_real_libraries.py).

    python record_steps.py FILE OUT.json [--instrument PKG ...] [--garbage]

After one unrecorded warm-up run of the default order (what a library builds at its first
use in a process is then built, as it is before `chaossloth check` explores), runs the scenario
under the default order (fifo) and under seeded random schedules, each schedule twice in this
process, and writes, per schedule, every step's actor and the multiset of
its accesses.  Within the process the accesses are compared exactly (canonical object ids, keys,
kinds, sites): the second run of a schedule must record what the first did, after the first
run's objects died and (with --garbage) after garbage was allocated and collected in between,
so that addresses, identity hashes and the collector's timing differ.  Across processes (other
hash seeds) object ids and key hashes are not comparable (they hash names with the process's
seed), so the JSON holds, per step, the multiset of (kind, site file:line, key repr): two
processes' files must be equal.

Exit 0 when the in-process runs agree, 1 with a line naming the schedule and the step when they
do not, 2 when the scenario cannot be loaded or a run ends otherwise than as a pass or a
failure.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import sys
from pathlib import Path
from typing import Any

from chaossloth import _core, runner, scenario
from chaossloth.capture import sites

#: the schedules recorded: the default order, then seeded random ones
SCHEDULES: list[tuple[str, dict[str, Any]]] = [
    ("fifo", {}),
    ("random", {"seed": 1}),
    ("random", {"seed": 2}),
]


def _garbage(n: int) -> list[Any]:
    """Objects of the shapes programs allocate, kept until the next run: they move the
    allocator's free lists, so the next run's objects sit at other addresses."""
    junk: list[Any] = []
    for i in range(n):
        junk.append({"k": [i, str(i)], "o": object(), "s": {object(), i}})
    cycle: list[Any] = []
    cycle.append(cycle)
    junk.append(cycle)
    return junk


def _run(program: scenario.Program, strategy: str, options: dict[str, Any]) -> tuple[Any, list]:
    _core.hooks_log(True)
    try:
        result = runner.run_once(
            program.factory, strategy=strategy, detailed=True, raise_on_divergence=False, **options
        )
    finally:
        log = _core.hooks_log(False)
    return result, log


def _exact(log: list) -> dict[int, collections.Counter]:
    by_step: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for ev, obj, key, kind, site, _key_repr in log:
        by_step[int(ev)][(obj, key, kind, site)] += 1
    return by_step


def _portable(result: Any, log: list) -> list[dict[str, Any]]:
    by_step: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for ev, _obj, _key, kind, site_id, key_repr in log:
        s = sites.get(int(site_id))
        where = f"{Path(s.filename).name}:{s.line}" if s.line else s.kind or "internal"
        by_step[int(ev)][f"{kind} {where} {key_repr}"] += 1
    return [
        {"actor": step.name, "accesses": sorted(by_step.get(i, {}).items())}
        for i, step in enumerate(result.steps)
    ]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("out")
    p.add_argument("--instrument", action="append", default=[])
    p.add_argument("--garbage", action="store_true")
    args = p.parse_args(argv)
    try:
        program = scenario.load_scenario(args.file, "scenario", tuple(args.instrument))
    except Exception as exc:  # noqa: BLE001 - a test tool: any failure to load is exit 2
        print(f"record_steps: cannot load {args.file}: {exc}", file=sys.stderr)
        return 2
    # A warm-up run first, unrecorded: state a library creates at its first use in a process
    # (a lazily built module-level cache, a class attribute set once) is the process's state,
    # not the schedule's, and `chaossloth check` also explores only after stage 1's two runs
    # of the default order have made it.
    warm, _ = _run(program, "fifo", {})
    if warm.outcome not in ("ok", "failed"):
        print(f"record_steps: the warm-up run ended {warm.outcome}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {}
    keep: list[Any] = []
    for strategy, options in SCHEDULES:
        label = f"{strategy}{options.get('seed', '')}"
        runs = []
        for attempt in range(2):
            result, log = _run(program, strategy, options)
            if result.outcome not in ("ok", "failed"):
                print(f"record_steps: {label} ended {result.outcome}", file=sys.stderr)
                return 2
            runs.append((result, log))
            if args.garbage:
                keep = _garbage(2000 * (attempt + 1))
            gc.collect()
        (first, log1), (second, log2) = runs
        if first.schedule != second.schedule:
            print(f"record_steps: {label}: the schedule differs between runs", file=sys.stderr)
            return 1
        a, b = _exact(log1), _exact(log2)
        for i in range(len(first.steps)):
            if a.get(i) != b.get(i):
                print(
                    f"record_steps: {label}: step {i} ({first.steps[i].name}) recorded other "
                    f"accesses the second time: {sorted((a.get(i, collections.Counter()) - b.get(i, collections.Counter())).items())[:3]} "
                    f"vs {sorted((b.get(i, collections.Counter()) - a.get(i, collections.Counter())).items())[:3]}",
                    file=sys.stderr,
                )
                return 1
        out[label] = {"outcome": first.outcome, "steps": _portable(first, log1)}
    del keep
    Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
