"""Cost of access capture, measured side by side in one run.

1. ns per access: a plain attribute read / subscript store vs the same through the C hook with no
   explorer attached (one pointer check) and with an explorer attached inside an open step (the
   access is recorded in the engine's trace and the object kept alive).
2. Slowdown of a whole function: the original vs its instrumented version, with no explorer and
   while recording.
3. Cost per call of what a call records: an instrumented callee, a standard-library function
   (modelled), a library function and a library method (their receiver and the module state
   their code names are walked).

Prints ratios; never asserts on time.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

from chaossloth import _core
from chaossloth.capture.importer import _register_file
from chaossloth.capture.instrument import compile_instrumented, hook_namespace

N = 200_000
REPS = 5


def best_of(*fns: Callable[[], Any]) -> list[float]:
    """Best time of each function, measured round-robin so that they share the machine's
    conditions (the machine is shared; sequential blocks would compare different moments)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(REPS):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return [min(t) for t in times]


def recording(fn: Callable[[], Any]) -> Callable[[], Any]:
    """fn run inside one open step of a fresh explorer (one execution)."""

    def run() -> Any:
        ex = _core.Explorer("fifo")
        ex.begin()
        ex.step_begin(ex.intern(None, 0), -1)
        _core.hooks_attach(ex)
        try:
            return fn()
        finally:
            _core.hooks_attach(None)
            ex.step_end()
            ex.end(0)

    return run


class Obj:
    def __init__(self) -> None:
        self.x = 1


def per_access() -> None:
    o = Obj()
    d: dict[str, int] = {}
    ga, si = _core.ga, _core.si
    keys = [f"k{i % 64}" for i in range(N)]

    def plain_get() -> None:
        for _ in range(N):
            o.x  # noqa: B018 - the measured load

    def hook_get() -> None:
        for _ in range(N):
            ga(o, "x", 1)

    def plain_set() -> None:
        for k in keys:
            d[k] = 1

    def hook_set() -> None:
        for k in keys:
            si(1, d, k, 2)

    def empty() -> None:
        for _ in range(N):
            pass

    def empty_keys() -> None:
        for _k in keys:
            pass

    base, pg, hg, rg = best_of(empty, plain_get, hook_get, recording(hook_get))
    base_k, ps, hs, rs = best_of(empty_keys, plain_set, hook_set, recording(hook_set))
    rows = [
        ("obj.x", pg - base, hg - base, rg - base),
        ("d[k] = v", ps - base_k, hs - base_k, rs - base_k),
    ]
    print(f"per access (ns), {N} accesses per run, best of {REPS}")
    print(f"{'operation':<12}{'plain':>10}{'hook, idle':>14}{'recording':>14}"
          f"{'idle/plain':>12}{'rec/plain':>12}")  # fmt: skip
    for name, p, i, r in rows:
        ns = 1e9 / N
        print(f"{name:<12}{p * ns:>10.1f}{i * ns:>14.1f}{r * ns:>14.1f}"
              f"{i / p:>11.2f}x{r / p:>11.2f}x")  # fmt: skip


WORKLOAD = textwrap.dedent(
    """
    total = 0
    class Server:
        def __init__(self):
            self.sessions = {}
            self.counters = {}
            self.log = []
        def handle(self, cid):
            global total
            cur = self.sessions.get(cid, 0)
            self.sessions[cid] = cur + 1
            self.counters[cid] = self.counters.get(cid, 0) + 10
            if len(self.log) < 100:
                self.log.append(cid)
            total += 1
            return cid in self.sessions
    def work(n):
        s = Server()
        ids = [f"c{i % 16}" for i in range(n)]
        for cid in ids:
            s.handle(cid)
        return sum(s.counters.values())
    """
)


def namespaces(source: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`source` executed as it is and instrumented: the two modules' namespaces."""
    plain_ns: dict[str, Any] = {"__name__": f"bench_plain_{name}"}
    exec(compile(source, f"<bench plain {name}>", "exec"), plain_ns)  # noqa: S102
    inst_ns: dict[str, Any] = {"__name__": f"bench_inst_{name}"}
    inst_ns.update(hook_namespace())
    _register_file(f"<bench inst {name}>")
    exec(compile_instrumented(source, f"<bench inst {name}>"), inst_ns)  # noqa: S102
    return plain_ns, inst_ns


def per_function() -> None:
    n = 20_000
    plain_ns, inst_ns = namespaces(WORKLOAD, "workload")
    assert plain_ns["work"](100) == inst_ns["work"](100)
    p, i, r = best_of(
        lambda: plain_ns["work"](n),
        lambda: inst_ns["work"](n),
        recording(lambda: inst_ns["work"](n)),
    )
    ex = _core.Explorer("fifo")
    ex.begin()
    ex.step_begin(ex.intern(None, 0), -1)
    _core.hooks_attach(ex)
    inst_ns["work"](n)
    accesses = _core.hooks_stats()["recorded"]
    _core.hooks_attach(None)
    ex.step_end()
    ex.end(0)
    print(f"\nwhole function: {n} calls of Server.handle, best of {REPS}")
    print(f"{'original':<28}{p * 1e3:>9.2f} ms  1.00x")
    print(f"{'instrumented, no explorer':<28}{i * 1e3:>9.2f} ms  {i / p:.2f}x")
    print(f"{'instrumented, recording':<28}{r * 1e3:>9.2f} ms  {r / p:.2f}x"
          f"   ({accesses} accesses, {(r - p) / max(accesses, 1) * 1e9:.1f} ns each)")  # fmt: skip


#: a library (compiled under a file name no instrumentation covers): calls of it write what it can
#: reach, its receiver and arguments and the module state its code names (ext/hooks.c, "the
#: environment of code that does not record itself")
LIBRARY = textwrap.dedent(
    """
    _registry = []
    _config = {"limit": 64}

    class Client:
        def __init__(self):
            self.sent = []

        def send(self, x):
            if len(self.sent) >= _config["limit"]:
                self.sent.clear()
            self.sent.append(x)

    def register(x):
        if len(_registry) >= _config["limit"]:
            _registry.clear()
        _registry.append(x)
    """
)

CALLER = textwrap.dedent(
    """
    import json

    def own(x):
        return x

    def calls_own(n):
        for i in range(n):
            own(i)

    def calls_stdlib(n):
        for i in range(n):
            json.dumps(i)

    def calls_library(lib, n):
        for i in range(n):
            lib.register(i)

    def calls_method(client, n):
        for i in range(n):
            client.send(i)
    """
)


def per_library_call() -> None:
    import types

    n = 20_000
    lib = types.ModuleType("bench_library")
    exec(compile(LIBRARY, "<site-packages>/bench_library.py", "exec"), vars(lib))  # noqa: S102
    plain_ns, inst_ns = namespaces(CALLER, "caller")
    client = lib.Client()
    cases = [
        ("instrumented function", "calls_own", ()),
        ("json.dumps (stdlib)", "calls_stdlib", ()),
        ("library function", "calls_library", (lib,)),
        ("library method", "calls_method", (client,)),
    ]
    print(f"\nper call (ns), {n} calls per run, best of {REPS}: the caller plain, and instrumented"
          " while recording")  # fmt: skip
    print(f"{'callee':<24}{'plain':>10}{'recording':>12}{'rec/plain':>12}")
    for name, fn, args in cases:
        p, r = best_of(
            lambda fn=fn, args=args: plain_ns[fn](*args, n),
            recording(lambda fn=fn, args=args: inst_ns[fn](*args, n)),
        )
        print(f"{name:<24}{p / n * 1e9:>10.1f}{r / n * 1e9:>12.1f}{r / p:>11.2f}x")


def main() -> int:
    print(f"capture overhead (python {sys.version.split()[0]})")
    per_access()
    per_function()
    per_library_call()
    return 0


if __name__ == "__main__":
    sys.exit(main())
