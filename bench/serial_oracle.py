"""Cost of the serializability oracle, old (every serial order enumerated) and new (memoized
search), measured side by side in one run.

The seed-shaped workload (``--cls MultiResourceServer --method handle_request --args 'audit'``
of ``examples/multi_resource.py``) at K = 2..8 concurrent calls, random strategy:

1. executions/s of the exploration without an oracle, with the old oracle (enumeration at the
   first check, then a snapshot and a set lookup per execution, the failure message built for
   every failing execution), with the new one as the runner calls it today (``str()`` of the
   verdict: the message is still built for every failing execution), and with the new one when
   the message is not asked for (what a runner that builds it only for the reported failure gets);
2. orders tried: the old oracle's K! orders (once per exploration) against the new one's search
   nodes per distinct observed outcome, and the serial executions and calls each ran;
3. the oracle alone, per check, on the outcomes the exploration produced.

Prints figures; never asserts on time.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from chaossloth import runner, scenario
from chaossloth.serial import Call, SerialError, SerialOracle, _describe, snapshot

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "multi_resource.py"
EXECUTIONS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
ONLY_SCALING = len(sys.argv) > 2 and sys.argv[2] == "scaling"
KS = range(2, 9)
REPS = 3


class OldOracle:
    """The oracle as it was before the search: every order of the K calls enumerated at the
    first check (one serial run per distinct order of signatures, one snapshot per order), then
    one snapshot and a set lookup per check; the message built for every failing check."""

    def __init__(self, factory: Callable[[], Any], calls: list[Call], run: Any) -> None:
        self.factory, self.calls, self.run = factory, calls, run
        self.index: set[Hashable] = set()
        self.first: tuple[str, str] | None = None
        self.serial_runs = 0
        self.prepare_seconds = 0.0

    def prepare(self) -> None:
        if self.first is not None:
            return
        t0 = time.perf_counter()
        runs: dict[tuple[str, ...], tuple[Any, list[Any]]] = {}
        for perm in itertools.permutations(range(len(self.calls))):
            sigs = tuple(self.calls[i].signature for i in perm)
            if sigs not in runs:
                runs[sigs] = self.run(self._serial([self.calls[i] for i in perm]))
                self.serial_runs += 1
            obj, in_order = runs[sigs]
            by_index: list[Any] = [None] * len(self.calls)
            for pos, i in enumerate(perm):
                by_index[i] = in_order[pos]
            snap = snapshot(obj, by_index)
            if snap not in self.index:
                self.index.add(snap)
                if self.first is None:
                    self.first = _describe(obj, by_index)
        self.prepare_seconds = time.perf_counter() - t0

    async def _serial(self, calls: list[Call]) -> tuple[Any, list[Any]]:
        obj = self.factory()
        results = []
        for c in calls:
            try:
                results.append(await getattr(obj, c.method)(*c.args))
            except Exception as exc:  # noqa: BLE001 - a raising call is an outcome
                results.append(exc)
        return obj, results

    def __call__(self, value: Any) -> str | None:
        obj, results = value
        self.prepare()
        if snapshot(obj, results) in self.index:
            return None
        got_state, got_results = _describe(obj, results)
        assert self.first is not None
        return f"not serializable: {got_state} {got_results}; e.g. {self.first[0]}"


def explore(work: scenario.Workload, oracle: Any) -> tuple[float, int, list[Any]]:
    """executions/s, failing executions, and the observed outcomes."""
    seen: list[Any] = []

    def judge(value: Any) -> Any:
        seen.append(value)
        return oracle(value) if oracle is not None else None

    t0 = time.perf_counter()
    res = runner.explore(
        work.concurrent,
        strategy="random",
        seed=1,
        max_executions=EXECUTIONS,
        oracle=judge,
        detail_failure=False,
        stop_on_failure=False,
    )
    dt = time.perf_counter() - t0
    assert res.executions == EXECUTIONS, res.executions
    return res.executions / dt, res.failing_executions, seen


def row(base: scenario.Workload, k: int) -> None:
    work = dataclasses.replace(base, tasks=k)
    calls = [Call(work.method, work.args)] * k

    def new_oracle() -> SerialOracle:
        return SerialOracle(work.construct, calls, scenario._run_plain)

    def old_oracle() -> OldOracle:
        return OldOracle(work.construct, calls, scenario._run_plain)

    best = {"none": 0.0, "old": 0.0, "new": 0.0, "lazy": 0.0}
    fails: dict[str, int] = {}
    outcomes: list[Any] = []
    new = new_oracle()
    old = old_oracle()
    for _ in range(REPS):  # round robin, best of: the machine is shared
        new, old, lazy = new_oracle(), old_oracle(), new_oracle()
        judges: dict[str, Any] = {
            "none": None,
            "old": old,
            "new": lambda v, o=new: o.check(*v),
            # the verdict's message never asked for: what the runner gains when it builds the
            # message only for the reported failure
            "lazy": lambda v, o=lazy: None if o.check(*v) is None else False,
        }
        for name, judge in judges.items():
            rate, failing, seen = explore(work, judge)
            best[name] = max(best[name], rate)
            fails[name] = failing
            outcomes = seen
    assert fails["old"] == fails["new"] == fails["lazy"], (k, fails)
    # the oracle alone on the outcomes seen, warmed up (old: enumerated; new: searched)
    old_alone, new_alone = old_oracle(), new_oracle()
    for o in outcomes:
        old_alone(o)
        str(new_alone.check(*o))

    def per_check(fn: Callable[[Any], Any]) -> float:
        times = []
        for _ in range(REPS):
            t0 = time.perf_counter()
            for o in outcomes:
                fn(o)
            times.append(time.perf_counter() - t0)
        return min(times) / len(outcomes) * 1e6

    t_old = per_check(old_alone)
    t_new = per_check(lambda o: new_alone.check(*o))
    t_msg = per_check(lambda o: str(new_alone.check(*o)))
    per_search = new.nodes / max(1, new.searches)
    print(
        f"{k:>2} {best['none']:>9.0f} {best['old']:>7.0f} {best['new']:>9.0f} "
        f"{best['lazy']:>8.0f} {fails['new']:>5} | {math.factorial(k):>10} {old.serial_runs:>4} "
        f"{old.prepare_seconds * 1e3:>7.1f} | {per_search:>12.1f} {new.searches:>4} "
        f"{new.serial_runs:>4} {new.serial_calls:>5} | {t_old:>7.1f} {t_new:>7.1f} {t_msg:>7.1f}"
    )


class Seed:
    """The seed's class, uninstrumented: every call returns None."""

    def __init__(self) -> None:
        self.sessions: dict[str, int] = {}
        self.counters: dict[str, int] = {}

    async def handle_request(self, client_id: str) -> None:
        curr_sess = self.sessions.get(client_id, 0)
        curr_count = self.counters.get(client_id, 0)
        self.sessions[client_id] = curr_sess + 1
        self.counters[client_id] = curr_count + 10


class Tickets:
    """Each call returns a distinct number (1..K): one assignment of results to calls fits."""

    def __init__(self) -> None:
        self.n = 0

    async def handle_request(self, client_id: str) -> int:
        self.n += 1
        return self.n


class Batches:
    """Each call returns a fresh list: distinct mutable results, matched directly."""

    def __init__(self) -> None:
        self.n = 0

    async def handle_request(self, client_id: str) -> list[int]:
        self.n += 1
        return [self.n]


class Boxed:
    """Each call returns a fresh list with the object's log: results that share an object with
    the state, so every assignment of results to calls is tried (the worst case)."""

    def __init__(self) -> None:
        self.n = 0
        self.log: list[int] = []

    async def handle_request(self, client_id: str) -> tuple[list[int], list[int]]:
        self.n += 1
        return ([self.n], self.log)


def scaling() -> None:
    """The new oracle alone, K = 2..16: one check of a serializable outcome (the calls' serial
    outcome with the results handed to the calls in reverse) and one of a state no order gives."""
    print(
        "\nthe new oracle alone (serial runs on the controlled loop): ms and search nodes for "
        "a serializable outcome (results reversed) | a non-serializable one (state changed)"
    )
    print(f"{'class':>8} {'K':>2} | {'ms':>8} {'nodes':>7} {'runs':>4} | {'ms':>8} {'nodes':>7}")
    for cls in (Seed, Tickets, Batches, Boxed):
        for k in range(2, 17):
            calls = [Call("handle_request", ("audit",))] * k
            oracle = SerialOracle(cls, calls, scenario._run_plain)
            obj, results = scenario._run_plain(serial_order(cls, k))
            t0 = time.perf_counter()
            try:
                ok = oracle.check(obj, results[::-1]) is None
            except SerialError as exc:
                print(f"{cls.__name__:>8} {k:>2} | {exc}")
                break
            t_ok = (time.perf_counter() - t0) * 1e3
            nodes_ok, runs = oracle.nodes, oracle.serial_runs
            assert ok
            obj.n = obj.n + 1 if hasattr(obj, "n") else 0
            if isinstance(obj, Seed):
                obj.sessions["audit"] += 1
            t0 = time.perf_counter()
            try:
                bad = oracle.check(obj, results[::-1]) is not None
            except SerialError as exc:
                print(f"{cls.__name__:>8} {k:>2} | {t_ok:>8.1f} {nodes_ok:>7} {runs:>4} | {exc}")
                break
            t_bad = (time.perf_counter() - t0) * 1e3
            assert bad
            print(
                f"{cls.__name__:>8} {k:>2} | {t_ok:>8.1f} {nodes_ok:>7} {runs:>4} | "
                f"{t_bad:>8.1f} {oracle.nodes - nodes_ok:>7}"
            )


async def serial_order(cls: type, k: int) -> tuple[Any, list[Any]]:
    obj = cls()
    return obj, [await obj.handle_request("audit") for _ in range(k)]


def main() -> None:
    if ONLY_SCALING:
        scaling()
        return
    prog = scenario.load_workload(SEED, "MultiResourceServer", "handle_request", 2, "'audit'")
    assert prog.workload is not None
    print(
        f"seed workload, random strategy, {EXECUTIONS} executions per exploration, best of "
        f"{REPS}\n"
        "exec/s: no oracle | old | new, message built for every failure (str(), as runner.py "
        "does today) | new, message not built\n"
        "old: orders enumerated, serial runs, ms to enumerate | new: search nodes per distinct "
        "outcome, searches, serial runs, calls | us per check on the outcomes seen: old "
        "(message included), new verdict, new verdict + message"
    )
    print(
        f"{'K':>2} {'none':>9} {'old':>7} {'new str':>9} {'new lazy':>8} {'fail':>5} | "
        f"{'old orders':>10} {'runs':>4} {'ms':>7} | {'nodes/search':>12} {'srch':>4} "
        f"{'runs':>4} {'calls':>5} | {'old':>7} {'new':>7} {'new+msg':>7}"
    )
    for k in KS:
        row(prog.workload, k)
    scaling()


if __name__ == "__main__":
    main()
