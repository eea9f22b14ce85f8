"""ChaosSloth's executions per second against the bare-coroutine floor, side by side in one run.

The floor drives the very same coroutine functions by hand: the workload's source is executed a
second time with ``asyncio`` replaced by a stand-in whose ``sleep`` is one bare yield and whose
``Lock`` is a yielding spin lock, and each execution creates fresh objects and fresh coroutines
and sends ``None`` into them round-robin until all have returned (no loop, no recording).  It is
the cost of the program's own Python code, the bound no scheduler can beat.

ChaosSloth runs the same workload loaded through the capture instrumentation (recording on:
every step goes through the engine) with ``runner.explore`` under ``random`` and ``dpor``,
without stopping at failures, the failure not re-run in detail (``detail_failure=False``).  A
DPOR exploration that completes before the row's time is up is started again, so its rate is
measured over the same time as the others'.

Workloads:
  seed K     K concurrent ``MultiResourceServer.handle_request('audit')`` of tests/targets (the
             --cls/--method workload with its serializability oracle), K = 2..5
  gather100  100 tasks in one ``asyncio.gather``, each reads a shared counter, yields, writes it
  locks      4 tasks, each taking one ``asyncio.Lock`` 5 times around a read-yield-write

The stock column runs the same workload on stock asyncio (CPython's C Task and Future), at its
cheapest: one event loop reused by every execution (``run_until_complete``), ``sleep`` turned
into ``sleep(0)`` (the virtual clock makes ChaosSloth's sleeps free; stock's would be real
waits), no recording, no oracle, no isolation between executions.  It is what any tool that
runs the program on asyncio's own machinery starts from.

Prints executions/s of each and the ratio to the floor in time per execution (lower is
better; the goal of issue 14 is <= 10 on the seed workload with DPOR); the last column is
ChaosSloth's DPOR against stock asyncio.  With ``--clock cpu``
the rates are executions per second of this process's CPU time (the cells still last S seconds
of wall time): steadier than wall time on a machine other processes share.  Usage:
    python bench/floor.py [--seconds S] [--kmax K] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import types
from collections.abc import Callable, Coroutine, Generator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "tests" / "targets" / "test_multi_resource.py"

#: the gather and lock workloads: a scenario file ChaosSloth loads, and the floor executes with
#: its stand-in asyncio
PROGRAMS = """\
import asyncio


class Shared:
    def __init__(self):
        self.n = 0


async def bump(s):
    x = s.n
    await asyncio.sleep(0)
    s.n = x + 1


async def gather100():
    s = Shared()
    await asyncio.gather(*[bump(s) for _ in range(100)])


async def locked_bumps(s, lock):
    for _ in range(5):
        async with lock:
            x = s.n
            await asyncio.sleep(0)
            s.n = x + 1


async def locks():
    s = Shared()
    lock = asyncio.Lock()
    await asyncio.gather(*[locked_bumps(s, lock) for _ in range(4)])
    assert s.n == 20
"""


# ------------------------------------------------------------------ the floor


@types.coroutine
def _yield_once() -> Generator[None, None, None]:
    yield


async def _sleep(delay: float = 0, result: Any = None) -> Any:
    await _yield_once()
    return result


class _SpinLock:
    """A lock for coroutines driven by hand: acquire yields while it is held."""

    def __init__(self) -> None:
        self.held = False

    async def __aenter__(self) -> None:
        while self.held:
            await _yield_once()
        self.held = True

    async def __aexit__(self, *exc: object) -> None:
        self.held = False


_FAKE_ASYNCIO = types.SimpleNamespace(sleep=_sleep, Lock=_SpinLock)


def _sleep_zero(delay: float = 0, result: Any = None) -> Any:
    return asyncio.sleep(0, result)


#: stock asyncio with one change: sleeps do not wait (see the stock column in the docstring)
_STOCK_ASYNCIO = types.SimpleNamespace(**{**vars(asyncio), "sleep": _sleep_zero})


def floor_namespace(
    source: str, filename: str, stand_in: types.SimpleNamespace = _FAKE_ASYNCIO
) -> dict[str, Any]:
    """The module's definitions, executed with a stand-in asyncio (``import asyncio`` is
    answered from a private sys.modules entry for the time of the exec)."""
    ns: dict[str, Any] = {"__name__": "floor_" + Path(filename).stem}
    saved = sys.modules["asyncio"]
    sys.modules["asyncio"] = stand_in  # type: ignore[assignment]
    try:
        exec(compile(source, filename, "exec"), ns)  # noqa: S102 - the bench's own workloads
    finally:
        sys.modules["asyncio"] = saved
    return ns


def drive(coros: list[Coroutine[Any, Any, Any]]) -> None:
    """Runs the coroutines to the end, one send each round-robin."""
    live = list(coros)
    while live:
        still = []
        for c in live:
            try:
                c.send(None)
            except StopIteration:
                continue
            still.append(c)
        live = still


class _Clock:
    """What a rate divides by: wall time (perf_counter) or this process's CPU time."""

    measure: Callable[[], float] = time.perf_counter


def floor_rate(one: Callable[[], None], seconds: float) -> float:
    """Executions per second of `one` (a whole execution, fresh objects)."""
    n = 0
    t0 = time.perf_counter()
    c0 = _Clock.measure()
    deadline = t0 + seconds
    while True:
        for _ in range(50):
            one()
        n += 50
        now = time.perf_counter()
        if now >= deadline:
            return n / (_Clock.measure() - c0)


def seed_floor(k: int) -> Callable[[], None]:
    ns = floor_namespace(SEED.read_text(), str(SEED))
    server_cls = ns["MultiResourceServer"]

    def one() -> None:
        server = server_cls()
        drive([server.handle_request("audit") for _ in range(k)])
        # the oracle's share of the floor: the final state compared with the serial one
        _ = server.sessions["audit"] == k and server.counters["audit"] == 10 * k

    return one


def gather_floor(ns: dict[str, Any]) -> Callable[[], None]:
    shared, bump = ns["Shared"], ns["bump"]

    def one() -> None:
        s = shared()
        drive([bump(s) for _ in range(100)])

    return one


def locks_floor(ns: dict[str, Any]) -> Callable[[], None]:
    shared, locked_bumps, lock_cls = ns["Shared"], ns["locked_bumps"], ns["asyncio"].Lock

    def one() -> None:
        s = shared()
        lock = lock_cls()
        drive([locked_bumps(s, lock) for _ in range(4)])
        assert s.n == 20

    return one


# ------------------------------------------------------------------ stock asyncio


def stock_runner(scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Callable[[], None]:
    """One execution of `scenario` on one stock event loop shared by every execution."""
    loop = asyncio.new_event_loop()
    _stock_loops.append(loop)

    def one() -> None:
        loop.run_until_complete(scenario())

    return one


_stock_loops: list[asyncio.AbstractEventLoop] = []


def seed_stock(k: int) -> Callable[[], None]:
    ns = floor_namespace(SEED.read_text(), str(SEED), _STOCK_ASYNCIO)
    server_cls = ns["MultiResourceServer"]

    async def scenario() -> None:
        server = server_cls()
        await asyncio.gather(*(server.handle_request("audit") for _ in range(k)))
        _ = server.sessions["audit"] == k and server.counters["audit"] == 10 * k

    return stock_runner(scenario)


# ------------------------------------------------------------------ ChaosSloth


def chaossloth_rate(
    factory: Callable[[], Any], oracle: Any, strategy: str, seconds: float
) -> tuple[float, int, bool]:
    """(executions/s, executions, complete) of explorations of `strategy` run back to back for
    `seconds` (complete: at least one of them was; the last one is cut by the time)."""
    from chaossloth import runner

    n = 0
    complete = False
    t0 = time.perf_counter()
    c0 = _Clock.measure()
    while True:
        left = seconds - (time.perf_counter() - t0)
        if left <= 0:
            break
        r = runner.explore(
            factory,
            strategy=strategy,
            time_limit=left,
            stop_on_failure=False,
            oracle=oracle,
            detail_failure=False,
        )
        n += r.executions
        if not r.complete:
            break
        complete = True
    return n / (_Clock.measure() - c0), n, complete


def row(name: str, floor: float, stock: float, rates: dict[str, tuple[float, int, bool]]) -> None:
    cells = [f"{name:<11} {floor:>9.0f}", f"{stock:>8.0f} {floor / stock:>6.1f}"]
    for strategy in ("random", "dpor"):
        rate, _, complete = rates[strategy]
        ratio = floor / rate if rate else float("inf")
        mark = "*" if strategy == "dpor" and complete else " "
        cells.append(f"{rate:>7.0f}{mark} {ratio:>6.1f}")
    dpor = rates["dpor"][0]
    cells.append(f"{stock / dpor if dpor else float('inf'):>10.1f}")
    print("  ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="time per measurement (3)")
    ap.add_argument("--kmax", type=int, default=5, help="largest K of the seed workload (5)")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="rates per second of wall time (default) or of this process's CPU time",
    )
    args = ap.parse_args(argv)
    _Clock.measure = time.perf_counter if args.clock == "wall" else time.process_time

    from chaossloth import scenario
    from chaossloth.config import Config

    tmp = Path(tempfile.mkdtemp(prefix="chaossloth-floor-"))
    programs = tmp / "floor_programs.py"
    programs.write_text(PROGRAMS)
    print(
        f"executions/s ({args.clock} time), {args.seconds:g}s per cell; ratio = time per execution / "
        "the floor's (* = DPOR complete, restarted to fill the time); dpor/stock = DPOR's time per "
        "execution / stock asyncio's"
    )
    print(
        f"{'workload':<11} {'floor':>9}  {'stock':>8} {'ratio':>6}  {'random':>8} {'ratio':>6}"
        f"  {'dpor':>8} {'ratio':>6}  {'dpor/stock':>10}"
    )
    for k in range(2, args.kmax + 1):
        program = scenario.load(
            str(SEED),
            Config(cls="MultiResourceServer", method="handle_request", tasks=k, args="'audit'"),
        )
        try:
            floor = floor_rate(seed_floor(k), args.seconds)
            stock = floor_rate(seed_stock(k), args.seconds)
            rates = {
                s: chaossloth_rate(program.factory, program.oracle, s, args.seconds)
                for s in ("random", "dpor")
            }
        finally:
            program.release()
        row(f"seed K={k}", floor, stock, rates)
    ns = floor_namespace(PROGRAMS, str(programs))
    stock_ns = floor_namespace(PROGRAMS, str(programs), _STOCK_ASYNCIO)
    for name, make_floor in (("gather100", gather_floor), ("locks", locks_floor)):
        program = scenario.load(str(programs), Config(scenario=name))
        try:
            floor = floor_rate(make_floor(ns), args.seconds)
            stock = floor_rate(stock_runner(stock_ns[name]), args.seconds)
            rates = {
                s: chaossloth_rate(program.factory, program.oracle, s, args.seconds)
                for s in ("random", "dpor")
            }
        finally:
            program.release()
        row(name, floor, stock, rates)
    for loop in _stock_loops:
        loop.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
