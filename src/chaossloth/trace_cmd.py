"""``chaossloth trace FILE --scenario NAME [--mermaid]``: one recorded run, step by step.

Runs the scenario once in stock order (fifo) on the controlled loop with every access recorded,
and prints each step: the task, the reads and writes it made (``file:line`` and a readable
resource name such as ``self.counters['audit']`` or ``global hits``), the await where it
suspended, and the steps it happens after.  ``--mermaid`` prints a Mermaid sequence diagram
instead: one participant per task and per shared resource.

Exit codes: 0 the run passed, 1 it failed (the failure is printed after the trace), 2 usage or
input error.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from chaossloth import _core, config, runner, scenario
from chaossloth.capture import sites
from chaossloth.config import DEFAULTS
from chaossloth.errors import InputError

READ, WRITE, ADD = _core.READ, _core.WRITE, _core.ADD


@dataclass
class Access:
    kind: int
    name: str
    where: str  # file:line, or "" for asyncio internals
    internal: bool
    count: int = 1


@dataclass
class StepView:
    index: int
    task: str
    accesses: list[Access] = field(default_factory=list)
    suspended_at: str | None = None
    after: list[int] = field(default_factory=list)


def _short(path: str) -> str:
    if path.startswith("<"):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


_CORO = re.compile(r"coro=<([^\s>()]+)")


def task_label(name: str) -> str:
    """``Task main/0 (<Task ... coro=<C.handle_request() ...>)`` -> ``Task main/0
    C.handle_request()``: the runner's actor name without the object's repr."""
    head, sep, rest = name.partition(" (<")
    if not sep:
        return name
    m = _CORO.search(rest)
    return f"{head} {m.group(1)}()" if m else head


def _predecessors(trace: Sequence[Any], i: int) -> list[int]:
    """Immediate happens-before predecessors of event i, from the vector clocks
    (a happens before b iff a < b and clock(b)[actor(a)] > actor_step(a))."""
    ev = trace[i]
    clock = ev.clock

    def hb(a: int, b: int) -> bool:
        ea = trace[a]
        cb = trace[b].clock
        return a < b and ea.actor < len(cb) and cb[ea.actor] > ea.actor_step

    # the latest event of each actor that happens before i
    latest: dict[int, int] = {}
    for j in range(i - 1, -1, -1):
        a = trace[j].actor
        if a in latest:
            continue
        if a < len(clock) and clock[a] > trace[j].actor_step:
            latest[a] = j
    cands = sorted(latest.values())
    return [c for c in cands if not any(c != d and hb(c, d) for d in cands)]


def build_steps(result: Any, log: Sequence[tuple[Any, ...]]) -> list[StepView]:
    """Joins the runner's result (steps, trace, await sites) with the hooks' verbose log."""
    trace = result.trace or []
    await_sites = result.await_sites or [None] * len(trace)
    by_event: dict[int, list[tuple[Any, ...]]] = {}
    for entry in log:
        by_event.setdefault(int(entry[0]), []).append(entry)
    views: list[StepView] = []
    for i, step in enumerate(result.steps):
        view = StepView(i, task_label(step.name))
        if i < len(await_sites) and await_sites[i] is not None:
            f, line, *_ = await_sites[i]
            view.suspended_at = f"{_short(f)}:{line}"
        if i < len(trace):
            view.after = _predecessors(trace, i)
        for entry in by_event.get(i, []):
            _, _obj, _key, kind, site_id, key_repr = entry
            site = sites.get(int(site_id))
            internal = site.kind == "sync" or site.line == 0
            where = f"{_short(site.filename)}:{site.line}" if site.line else ""
            acc = Access(int(kind), sites.resource_name(int(site_id), key_repr), where, internal)
            last = view.accesses[-1] if view.accesses else None
            if last and (last.kind, last.name, last.where) == (acc.kind, acc.name, acc.where):
                last.count += 1
            else:
                view.accesses.append(acc)
        views.append(view)
    return views


def _visible(acc: Access, show_all: bool) -> bool:
    if show_all or not acc.internal:
        return True
    # asyncio's primitives matter to the reader; futures' and tasks' bookkeeping does not
    return not (acc.name.startswith("asyncio.Future") or acc.name.startswith("asyncio.Task"))


def print_text(views: list[StepView], out: TextIO, show_all: bool) -> None:
    for v in views:
        head = f"step {v.index:>3}  {v.task}"
        if v.after:
            head += "   after " + ", ".join(str(a) for a in v.after)
        out.write(head + "\n")
        for a in v.accesses:
            if not _visible(a, show_all):
                continue
            verb = "read " if a.kind == READ else "add  " if a.kind == ADD else "write"
            times = f" (x{a.count})" if a.count > 1 else ""
            where = f"  {a.where}" if a.where else ""
            out.write(f"    {verb} {a.name}{times}{where}\n")
        if v.suspended_at:
            out.write(f"    await  {v.suspended_at}\n")


def _mermaid_id(prefix: str, n: int) -> str:
    return f"{prefix}{n}"


def _label(text: str) -> str:
    # characters Mermaid's sequence diagrams reserve
    for ch in ";#:\n":
        text = text.replace(ch, " ")
    return text.replace('"', "'")


def print_mermaid(views: list[StepView], out: TextIO, show_all: bool) -> None:
    tasks: dict[str, str] = {}
    resources: dict[str, str] = {}
    for v in views:
        tasks.setdefault(v.task, _mermaid_id("T", len(tasks)))
        for a in v.accesses:
            if _visible(a, show_all):
                resources.setdefault(a.name, _mermaid_id("R", len(resources)))
    out.write("sequenceDiagram\n")
    out.writelines(f"    participant {pid} as {_label(name)}\n" for name, pid in tasks.items())
    out.writelines(f"    participant {pid} as {_label(name)}\n" for name, pid in resources.items())
    for v in views:
        t = tasks[v.task]
        out.write(f"    Note over {t}: step {v.index}\n")
        for a in v.accesses:
            if not _visible(a, show_all):
                continue
            r = resources[a.name]
            where = f" at {_label(a.where)}" if a.where else ""
            if a.kind == READ:
                out.write(f"    {r}-->>{t}: read{where}\n")
            else:
                out.write(f"    {t}->>{r}: write{where}\n")
        if v.suspended_at:
            out.write(f"    Note over {t}: await at {_label(v.suspended_at)}\n")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="chaossloth trace",
        description="Run a scenario once in stock order and print every step's reads, writes, "
        "await site and happens-before edges.",
    )
    p.add_argument("file", help="the Python file that defines the scenario")
    p.add_argument("--scenario", help="the async function to run (default: the only one)")
    p.add_argument("--mermaid", action="store_true", help="print a Mermaid sequence diagram")
    p.add_argument("--all", action="store_true", help="also show futures' and tasks' accesses")
    p.add_argument(
        "--max-steps",
        type=int,
        default=DEFAULTS.max_steps,
        help=f"{config.help_of('max_steps')} (default {DEFAULTS.max_steps})",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 2
    if args.max_steps <= 0:
        print("chaossloth trace: error: --max-steps must be positive", file=sys.stderr)
        return 2
    try:
        program = scenario.load_scenario(args.file, args.scenario)
    except InputError as exc:
        print(f"chaossloth trace: error: {exc}", file=sys.stderr)
        return 2
    _core.hooks_log(True)
    try:
        result = runner.run_once(
            program.factory, strategy="fifo", max_steps=args.max_steps, detailed=True
        )
    except InputError as exc:
        print(f"chaossloth trace: error: {exc}", file=sys.stderr)
        return 2
    finally:
        log = _core.hooks_log(False)
    views = build_steps(result, log)
    out = sys.stdout
    if args.mermaid:
        print_mermaid(views, out, args.all)
    else:
        print_text(views, out, args.all)
    if result.failure is not None:
        out.write(f"\nthe run failed: {result.failure.summary()}\n")
        if result.failure.traceback and not args.mermaid:
            out.write(result.failure.traceback.rstrip() + "\n")
        return 1
    if result.outcome != "ok":
        out.write(f"\nthe run was aborted ({result.outcome})\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
