"""Memory and time against the number of tasks, and RSS over a long random run.

    python bench/memory.py [--tasks 1000,2000,4000,10000] [--stage-executions 10]
                           [--stage-strategy auto]
                           [--checkpoints 50000,100000,200000,300000] [--skip-stages]
                           [--skip-long]

Part 1 (``--tasks``): N tasks that share nothing (each ``await asyncio.sleep(0)`` once, then
stores into its own slot of one dict; the main task awaits them in turn).  For each N, in a fresh
process each: one execution (fifo, without and with the detailed trace: the Python ``Event``
list, as stage 1 records it), peak RSS and seconds; then the ``check`` pipeline with
``--stage-executions`` executions of ``--stage-strategy`` (stage 3 stops there), each stage's
seconds and the process's peak RSS.  A run that fails (MemoryError, a crash, the time cap) prints why instead of figures.

Part 2 (``--checkpoints``): the random strategy, one exploration of max(checkpoints)
executions, the process's current RSS (VmRSS) when each checkpoint is reached, with the
distinct-trace count (and whether it is an estimate): on the seed workload (two concurrent
``MultiResourceServer.handle_request('audit')``, 8 distinct traces), and on 4 tasks that each
read, await and write one counter 3 times (most executions a trace not seen before, so the
distinct-trace count is what grows).

Figures of one machine, not assertions: nothing here fails on a slow run.  Compare a build
with another by running this file under each (``PYTHONPATH=<other checkout>/src``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKLOAD = textwrap.dedent(
    """
    import asyncio

    N = {n}


    class Store:
        def __init__(self):
            self.slots = {}


    async def worker(store, i):
        await asyncio.sleep(0)
        store.slots[i] = i


    async def scenario():
        store = Store()
        tasks = [asyncio.create_task(worker(store, i)) for i in range(N)]
        for t in tasks:
            await t
        assert len(store.slots) == N
    """
)

# One child per measurement: peak RSS (ru_maxrss) is the process's, so each figure needs a
# process of its own.  The child prints one JSON line.
CHILD_ONE = textwrap.dedent(
    """
    import json, resource, sys, time
    from chaossloth import runner, scenario
    from chaossloth.config import Config

    path, detailed = sys.argv[1], sys.argv[2] == "1"
    prog = scenario.load(path, Config(scenario="scenario"))
    t = time.perf_counter()
    r = runner.run_once(prog.factory, detailed=detailed, max_steps=10**7)
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"outcome": r.outcome, "steps": len(r.steps), "seconds": secs, "rss": rss}))
    """
)

CHILD_STAGES = textwrap.dedent(
    """
    import io, json, resource, sys, tempfile, time
    from pathlib import Path
    from chaossloth import pipeline, scenario
    from chaossloth.config import Config

    path, executions, strategy = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    prog = scenario.load(path, Config(scenario="scenario"))
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(
            scenario="scenario",
            max_executions=executions,
            strategy=strategy,
            max_steps=10**7,
            database=None,
            schedule_out=str(Path(tmp) / "s.json"),
        )
        t = time.perf_counter()
        res = pipeline.run(prog, cfg, io.StringIO())
        total = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    stages = {s.name: s.seconds for s in res.stages}
    print(json.dumps({"stages": stages, "total": total, "rss": rss}))
    """
)

MANY_TRACES = textwrap.dedent(
    """
    import asyncio


    class Counter:
        def __init__(self):
            self.n = 0


    async def bump(c):
        for _ in range(3):
            v = c.n
            await asyncio.sleep(0)
            c.n = v + 1


    async def scenario():
        c = Counter()
        await asyncio.gather(*(bump(c) for _ in range(4)))
    """
)

CHILD_LONG = textwrap.dedent(
    """
    import json, sys, time
    from chaossloth import runner, scenario
    from chaossloth.config import Config

    path = sys.argv[1]
    marks = sorted(int(x) for x in sys.argv[2].split(","))
    if sys.argv[3] == "seed":
        cfg = Config(cls="MultiResourceServer", method="handle_request", args="'audit'")
    else:
        cfg = Config(scenario="scenario")
    prog = scenario.load(path, cfg)

    def vmrss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    seen = 0
    out = []
    t0 = time.perf_counter()

    def on_execution(r):
        global seen
        seen += 1
        if marks and seen == marks[0]:
            marks.pop(0)
            out.append({"executions": seen, "rss": vmrss(), "seconds": time.perf_counter() - t0})

    res = runner.explore(
        prog.factory,
        oracle=prog.oracle,
        strategy="random",
        max_executions=int(sys.argv[2].split(",")[-1]),
        stop_on_failure=False,
        on_execution=on_execution,
    )
    phase = res.phases[-1] if res.phases else {}
    print(json.dumps({
        "marks": out,
        "distinct": res.distinct_traces,
        "estimated": bool(phase.get("traces_estimated", False)),
        "failing": res.failing_executions,
    }))
    """
)


def child(code: str, args: list[str], env: dict[str, str], timeout: float) -> dict | str:
    try:
        p = subprocess.run(
            [sys.executable, "-c", code, *args],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"over {timeout:.0f}s"
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        return lines[-1][:70] if lines else f"exit {p.returncode}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def part_tasks(ns: argparse.Namespace) -> None:
    counts = [int(x) for x in ns.tasks.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        print(f"N tasks that share nothing (python {sys.version.split()[0]})")
        print(f"{'N':>6} {'one execution':>22} {'detailed (stage 1)':>22}")
        rows = []
        for n in counts:
            env = dict(os.environ)
            path = Path(tmp) / f"ntasks{n}.py"
            path.write_text(WORKLOAD.replace("{n}", str(n)))
            cells = []
            for detailed in ("0", "1"):
                r = child(CHILD_ONE, [str(path), detailed], env, ns.timeout)
                cells.append(
                    r if isinstance(r, str) else f"{r['rss']:8.0f} MB {r['seconds']:7.2f}s"
                )
            print(f"{n:>6} {cells[0]:>22} {cells[1]:>22}", flush=True)
            rows.append((n, env, path))
        if ns.skip_stages:
            return
        print(
            f"\ncheck pipeline, strategy {ns.stage_strategy}, stage 3 stopped after "
            f"{ns.stage_executions} executions"
        )
        names = ["capture", "alphabet", "collapse", "collision window", "verdict"]
        print(f"{'N':>6} {'peak RSS':>10} " + " ".join(f"{s[:10]:>10}" for s in names))
        for n, env, path in rows:
            r = child(
                CHILD_STAGES,
                [str(path), str(ns.stage_executions), ns.stage_strategy],
                env,
                ns.timeout,
            )
            if isinstance(r, str):
                print(f"{n:>6} {r}", flush=True)
                continue
            cells = [f"{r['stages'][s]:9.2f}s" if s in r["stages"] else f"{'-':>10}" for s in names]
            print(f"{n:>6} {r['rss']:7.0f} MB " + " ".join(cells), flush=True)


def part_long(ns: argparse.Namespace) -> None:
    marks = ns.checkpoints
    with tempfile.TemporaryDirectory() as tmp:
        many = Path(tmp) / "many_traces.py"
        many.write_text(MANY_TRACES)
        runs = [
            (
                "seed workload (2 x handle_request('audit'))",
                ROOT / "examples" / "multi_resource.py",
                "seed",
            ),
            (
                "4 tasks x 3 read-await-write of one counter (most executions a new trace)",
                many,
                "scenario",
            ),
        ]
        for title, path, kind in runs:
            r = child(CHILD_LONG, [str(path), marks, kind], dict(os.environ), ns.timeout * 10)
            print(f"\n{title}, random strategy, one exploration: VmRSS at each checkpoint")
            if isinstance(r, str):
                print(r)
                continue
            print(f"{'executions':>10} {'VmRSS':>10} {'seconds':>9}")
            for m in r["marks"]:
                print(f"{m['executions']:>10} {m['rss']:7.1f} MB {m['seconds']:8.1f}s")
            est = " (an estimate)" if r["estimated"] else " (exact)"
            print(f"distinct traces: {r['distinct']}{est}; failing executions: {r['failing']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="1000,2000,4000,10000")
    ap.add_argument("--stage-executions", type=int, default=10)
    ap.add_argument("--stage-strategy", default="auto", help="the pipeline's --strategy")
    ap.add_argument("--checkpoints", default="50000,100000,200000,300000")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    ap.add_argument("--skip-stages", action="store_true")
    ap.add_argument("--skip-long", action="store_true")
    ns = ap.parse_args()
    part_tasks(ns)
    if not ns.skip_long:
        part_long(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
