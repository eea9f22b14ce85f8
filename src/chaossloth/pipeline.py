"""The staged pipeline a user runs: capture, alphabet, collapse, collision window, diagnosis,
(synthesis, adversarial replay: not implemented yet), verdict.

Every stage is timed and printed as it ends. Problems with the user's input (the file, the
names, the literals, a workload that does real I/O, never terminates or is nondeterministic)
raise :class:`~chaossloth.errors.InputError` with one readable message; a failing schedule is a
result, not an error.

Decisions worth knowing:

* **Stage 1** runs the workload twice in the default order (fifo = stock asyncio's order). A
  workload that does not terminate in that order is an input problem ("never terminates"), not a
  livelock report: the stock loop would hang on it too. A livelock is reported only when the
  default order terminates and some other schedule does not. Two default-order runs that take
  different steps mean the program is nondeterministic, which no schedule can pin down.
* **Stage 3** explores with the runner (default ``auto``: DPOR within the budget, then
  sampling); the failing schedule kept is the one with the fewest deviations from the default
  order, so the story is the shortest.
* **Stage 4** measures on the *stock* asyncio loop (see :mod:`chaossloth.jitter`).
* **Stage 5** replays the minimal failing schedule, asks the engine for its AVIO findings
  (``_core.diagnose``) and words them with source lines (see :mod:`chaossloth.report`).
* **Stage 8** writes the schedule file and replays it from the file, so the verdict states that
  the failure reproduces from what was written.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import linecache
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from chaossloth import report as rp
from chaossloth.errors import InputError, NondeterminismError

DEFAULT_TIME_LIMIT = 10.0
DEFAULT_MAX_STEPS = 10000


@dataclass
class Options:
    strategy: str = "auto"
    max_executions: int | None = None
    time_limit: float | None = DEFAULT_TIME_LIMIT
    max_steps: int = DEFAULT_MAX_STEPS
    seed: int = 0
    timers: str = "strict"
    stop_on_failure: bool = True
    invariant: str | None = None
    json_path: str | None = None
    mermaid_path: str | None = None
    schedule_out: str | None = None
    telemetry: bool = True
    telemetry_budget: float = 0.25
    full: bool = False  # the whole pipeline (no subcommand): says stages 6-7 are not there yet
    #: called with runner.Progress during exploration (the CLI's terminal progress line)
    progress: Callable[[Any], None] | None = None


@dataclass
class Result:
    verdict: str = "pass"
    hazard: str | None = None
    failure: dict[str, Any] | None = None
    executions: int = 0
    failing_executions: int = 0
    distinct_traces: int = 0
    sleep_blocked: int = 0  #: dpor executions cut short as redundant (0 on read/write programs)
    complete: bool = False
    explore_seconds: float = 0.0
    schedule_file: str | None = None
    mermaid_file: str | None = None
    stages: list[rp.StageTime] = field(default_factory=list)
    telemetry: Any = None
    findings: list[rp.Finding] = field(default_factory=list)
    deviations: int = 0
    schedule_steps: int = 0
    replay_reproduces: bool | None = None
    program: dict[str, Any] = field(default_factory=dict)
    strategy: str = "auto"
    timers: str = "strict"  #: the timer mode the verdict's exploration used
    not_implemented: list[str] = field(default_factory=list)
    mermaid: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"

    @property
    def failure_type(self) -> str:
        return (self.failure or {}).get("type", "")

    @property
    def failure_message(self) -> str:
        return (self.failure or {}).get("message", "")

    def to_json(self) -> dict[str, Any]:
        tel = (
            self.telemetry.to_json()
            if self.telemetry is not None
            else {
                "natural_failure_rate": None,
                "collision_window": None,
            }
        )
        d: dict[str, Any] = {
            "verdict": self.verdict,
            "hazard": self.hazard,
            "failure": self.failure,
            "executions": self.executions,
            "failing_executions": self.failing_executions,
            "distinct_traces": self.distinct_traces,
            "sleep_blocked": self.sleep_blocked,
            "complete": self.complete,
            "explore_seconds": round(self.explore_seconds, 6),
            "schedule_file": self.schedule_file,
            "mermaid_file": self.mermaid_file,
            "stages": [s.to_json() for s in self.stages],
            "natural_failure_rate": tel["natural_failure_rate"],
            "collision_window": tel["collision_window"],
            "findings": [f.to_json() for f in self.findings],
            "deviations": self.deviations,
            "schedule_steps": self.schedule_steps,
            "replay_reproduces": self.replay_reproduces,
            "program": self.program,
            "strategy": self.strategy,
            "timers": self.timers,
        }
        if self.not_implemented:
            d["not_implemented"] = self.not_implemented
        return d


# ------------------------------------------------------------------ loading


def load(
    path: str,
    *,
    scenario: str | None = None,
    cls: str | None = None,
    method: str | None = None,
    tasks: int = 2,
    args: str | None = None,
    init_args: str | None = None,
) -> Any:
    """Loads the program under test (a scenario, or a --cls/--method workload)."""
    from chaossloth import scenario as sc

    if cls is not None or method is not None:
        if cls is None or method is None:
            raise InputError("--cls and --method go together (name the class and its method)")
        if scenario is not None:
            raise InputError("give either --scenario or --cls/--method, not both")
        from chaossloth import serial

        if tasks > serial.MAX_CALLS:
            raise InputError(
                f"--tasks {tasks}: the serializability oracle compares with every serial order "
                f"of the calls, so at most {serial.MAX_CALLS} concurrent calls are supported"
            )
        return sc.load_workload(path, cls, method, tasks, args, init_args)
    if args is not None or init_args is not None:
        raise InputError("--args and --init-args need --cls and --method")
    return sc.load_scenario(path, scenario)


def with_invariant(program: Any, name: str | None) -> Callable[[Any], Any] | None:
    """The program's oracle, extended with the user's invariant function (if named).

    For a --cls workload the invariant receives the object after the calls; for a scenario it
    receives what the scenario returned."""
    base = program.oracle
    if name is None:
        return base
    module = program.module
    fn = vars(module).get(name) if module is not None else None
    if fn is None:
        candidates = (
            sorted(
                n
                for n, o in vars(module).items()
                if inspect.isfunction(o)
                and not n.startswith("_")
                and not inspect.iscoroutinefunction(o)
            )
            if module is not None
            else []
        )
        listing = ", ".join(candidates) or "none"
        raise InputError(f"{program.path}: no invariant function {name!r} (functions: {listing})")
    if not callable(fn) or inspect.iscoroutinefunction(fn):
        raise InputError(
            f"{program.path}: invariant {name!r} must be a plain function taking the object"
        )
    try:
        inspect.signature(fn).bind(object())
    except TypeError:
        raise InputError(
            f"{program.path}: invariant {name!r} must take exactly one argument (the object)"
        ) from None
    except ValueError:
        pass
    is_workload = program.cls is not None

    def check(value: Any) -> Any:
        subject = value[0] if is_workload else value
        ok = fn(subject)
        if ok is False:
            return f"invariant {name}() does not hold after the calls"
        if base is not None:
            return base(value)
        return None

    return check


# ------------------------------------------------------------------ helpers


def _site(site_id: int) -> Any:
    try:
        from chaossloth.capture import sites
    except ImportError:
        return None
    if not site_id:
        return None
    s = sites.get(site_id)
    return s if s.line else None


def _site_of(site_id: int) -> rp.Site | None:
    s = _site(site_id)
    if s is None:
        return None
    return rp.Site(s.filename, s.line, _line_text(s.filename, s.line) or s.text)


def _line_text(file: str, line: int) -> str:
    return linecache.getline(file, line).strip()


def _resource_label(site_id: int) -> str:
    s = _site(site_id)
    if s is None:
        return "asyncio internals"
    return s.name or s.text or f"line {s.line}"


def _conflicts(k1: int, k2: int) -> bool:
    from chaossloth import _core

    return k1 != _core.READ or k2 != _core.READ


def alphabet(trace: list[Any]) -> dict[str, int]:
    """Stage 2's numbers from one execution's trace: events, accesses, resources, and pairs of
    steps of different actors that are dependent (conflicting accesses to one resource)."""
    by_object: dict[int, list[tuple[int, int, int, int]]] = {}
    n_acc = 0
    for i, ev in enumerate(trace):
        for obj, key, kind, _site_id in ev.accesses:
            by_object.setdefault(obj, []).append((i, ev.actor, key, kind))
            n_acc += 1
    whole = _whole_key()
    resources = set()
    dependent: set[tuple[int, int]] = set()
    for obj, accs in by_object.items():
        for _, _, key, _ in accs:
            resources.add((obj, key))
        for x in range(len(accs)):
            i, a, k, kd = accs[x]
            for y in range(x + 1, len(accs)):
                j, b, k2, kd2 = accs[y]
                if a == b or i == j:
                    continue
                if (k == k2 or k == whole or k2 == whole) and _conflicts(kd, kd2):
                    dependent.add((min(i, j), max(i, j)))
    actors = {ev.actor for ev in trace}
    return {
        "events": len(trace),
        "actors": len(actors),
        "accesses": n_acc,
        "resources": len(resources),
        "dependent_pairs": len(dependent),
    }


def _whole_key() -> int:
    from chaossloth import _core

    return int(_core.KEY_WHOLE)


_IO_TYPES = ("UnsupportedOperation", "RealIOError", "UncontrolledIOError")


def _run_once(program: Any, oracle: Any, opts: Options, **kw: Any) -> Any:
    """One execution of the workload under opts' step budget and timer mode (`kw`: the rest of
    runner.run_once's options); a nondeterministic workload is an input error."""
    from chaossloth import runner

    try:
        return runner.run_once(
            program.factory, max_steps=opts.max_steps, timers=opts.timers, oracle=oracle, **kw
        )
    except NondeterminismError as exc:
        raise InputError(f"the workload is nondeterministic: {exc}") from None


def _input_problem_of(failure: Any, max_steps: int) -> str | None:
    """A failure that means the workload cannot be explored at all (not a race)."""
    if failure is None:
        return None
    if failure.kind == "livelock":
        return (
            "the workload never terminates: in the default (stock asyncio) order it is still "
            f"running after {max_steps} steps. Raise --max-steps if it is merely long."
        )
    if failure.type_name in _IO_TYPES:
        return f"the workload does real I/O, which cannot be explored: {failure.message}"
    if failure.type_name == "InputError":
        return failure.message
    return None


def _task_label(name: str) -> str:
    return name


# ------------------------------------------------------------------ the pipeline


def _explore(program: Any, opts: Options, oracle: Any, res: Result, pr: Any) -> Any:
    """Stage 3 under opts: explores, fills res's counts, says what it found and returns the
    minimal failing execution (or None)."""
    from chaossloth import runner

    try:
        ex = runner.explore(
            program.factory,
            strategy=opts.strategy,
            seed=opts.seed,
            max_executions=opts.max_executions,
            time_limit=opts.time_limit,
            max_steps=opts.max_steps,
            timers=opts.timers,
            stop_on_failure=opts.stop_on_failure,
            oracle=oracle,
            progress=opts.progress,
        )
    except NondeterminismError as exc:
        raise InputError(f"the workload is nondeterministic: {exc}") from None
    res.executions = ex.executions
    res.failing_executions = ex.failing_executions
    res.distinct_traces = ex.distinct_traces
    res.sleep_blocked = ex.sleep_blocked
    res.complete = bool(ex.complete)
    res.explore_seconds = ex.explore_seconds
    strategies = "+".join(p.get("strategy", "?") for p in ex.phases) or opts.strategy
    pr.say(
        f"{ex.executions} executions ({strategies}), {ex.distinct_traces} distinct traces, "
        + (f"{ex.sleep_blocked} sleep-set blocked, " if ex.sleep_blocked else "")
        + f"{ex.failing_executions} failing; "
        + (
            "complete: every schedule covered"
            if res.complete
            else (
                "stopped at the first failure"
                if ex.failed and opts.stop_on_failure
                else "incomplete: budget reached"
            )
        )
    )
    failing = ex.minimal_failure
    if failing is not None and failing.failure and failing.failure.type_name in _IO_TYPES:
        raise InputError(_input_problem_of(failing.failure, opts.max_steps) or "I/O")
    if failing is not None:
        res.verdict = "fail"
        res.deviations = failing.deviations
        res.schedule_steps = len(failing.steps)
        f = failing.failure
        res.failure = (
            {
                "kind": f.kind,
                "type": f.type_name,
                "message": f.message,
                "task": f.task,
                "traceback": f.traceback,
            }
            if f is not None
            else None
        )
        pr.say(
            f"minimal failing schedule: {len(failing.steps)} steps, "
            f"{failing.deviations} deviation(s) from the default order"
        )

    return failing


def run(program: Any, opts: Options, out: TextIO | None) -> Result:
    """Runs the stages on a loaded program and returns the result (writes files as asked)."""
    res = Result(program=program.describe(), strategy=opts.strategy, timers=opts.timers)
    pr = rp.StagePrinter(out)
    oracle = with_invariant(program, opts.invariant)
    if opts.invariant:
        res.program["invariant"] = opts.invariant

    # 1. capture -------------------------------------------------------------------------
    with pr.stage("capture"):
        first = _run_once(program, oracle, opts, detailed=True)
        second = _run_once(program, oracle, opts, detailed=False)
        problem = _input_problem_of(first.failure, opts.max_steps)
        if problem:
            raise InputError(problem)
        if [s.name for s in first.steps] != [s.name for s in second.steps]:
            raise InputError(_nondeterministic_message(first, second))
        tasks = {s.name for s in first.steps}
        n_sites = sum(1 for s in (first.await_sites or []) if s is not None)
        pr.say(
            f"default order: {len(first.steps)} steps by {len(tasks)} actors, "
            f"{sum(len(ev.accesses) for ev in first.trace or [])} accesses, "
            f"{n_sites} steps ending at an await; "
            + ("fails" if first.failed else "passes")
            + " in the stock order"
        )

    # 2. alphabet ------------------------------------------------------------------------
    with pr.stage("alphabet"):
        alpha = alphabet(first.trace or [])
        pr.say(
            f"{alpha['events']} events, {alpha['resources']} resources, "
            f"{alpha['dependent_pairs']} dependent pairs of steps across actors"
        )

    # 3. collapse ------------------------------------------------------------------------
    with pr.stage("collapse"):
        failing = _explore(program, opts, oracle, res, pr)

    # 4. collision window ----------------------------------------------------------------
    if opts.telemetry:
        with pr.stage("collision window"):
            from chaossloth import jitter

            res.telemetry = jitter.measure(
                program.factory, judge=oracle, seed=opts.seed, budget=opts.telemetry_budget
            )
            t = res.telemetry
            if t.error:
                pr.say(t.error)
            else:
                r = t.rate
                pr.say(
                    f"natural failure rate on the stock loop: {t.failures}/{t.runs} runs "
                    f"(estimate {100 * r['estimate']:.1f}%, 95% CI {100 * r['low']:.1f}%"
                    f"-{100 * r['high']:.1f}%)"
                )
                pr.say(t.sentence)
            if failing is None and opts.timers == "strict" and not t.error and t.failures:
                # The stock loop, with real-time jitter, failed where strict virtual time found
                # no failing schedule: the race needs a timer to fire out of deadline order, as
                # an I/O of unknown latency would.  Explore again with relaxed timers.
                pr.say(
                    "no schedule failed with strict timers, but the stock loop did: exploring "
                    "again with relaxed timers (any pending timer may fire at any point)"
                )
                opts = dataclasses.replace(opts, timers="relaxed")
                res.timers = "relaxed"
                failing = _explore(program, opts, oracle, res, pr)
    else:
        pr.skipped("collision window", "skipped")

    # 5. diagnosis -----------------------------------------------------------------------
    if failing is not None:
        with pr.stage("diagnosis"):
            detailed = _detailed_replay(program, failing, oracle, opts)
            res.findings = diagnose(detailed, failing)
            res.hazard = classify(failing.failure, res.findings, detailed)
            head = rp.HAZARD_TITLE[res.hazard]
            pr.say(f"hazard: {head}")
            if res.failure is not None:
                who = f" in {res.failure['task']}" if res.failure.get("task") else ""
                first_line, *rest = str(res.failure["message"]).rstrip().split("\n")
                pr.say(f"failure{who}: {res.failure['type']}: {_one_line(first_line)}")
                for more in rest:  # a deadlock lists each waiting task on a line of its own
                    pr.say(f"  {more.strip()}")
            for fd in res.findings[:3]:
                pr.say(fd.text)
            res.mermaid = rp.mermaid(
                diagram_steps(detailed, _finding_objects(detailed)),
                title=f"{head}: {_one_line(res.failure_message.split(chr(10))[0])[:80]}"
                if res.failure
                else head,
                highlight=res.findings[0] if res.findings else None,
            )
    else:
        pr.skipped("diagnosis", "nothing to diagnose")

    # 6-7. synthesis and adversarial replay: not implemented yet ---------------------------
    if opts.full:
        res.not_implemented = ["synthesis", "adversarial replay"]
        pr.skipped("synthesis", "not implemented yet")
        pr.skipped("adversarial replay", "not implemented yet")
    else:
        pr.skipped("synthesis", "not run by check")
        pr.skipped("adversarial replay", "not run by check")

    # 8. verdict -------------------------------------------------------------------------
    with pr.stage("verdict"):
        if failing is not None:
            path = opts.schedule_out or _default_schedule_path(program)
            res.schedule_file = _write_schedule(failing, program, res.program, opts, path)
            res.replay_reproduces = _replays(res.schedule_file, program, oracle, opts)
            pr.say(
                f"FAIL: {rp.HAZARD_TITLE[res.hazard or 'exception']} found after "
                f"{res.executions} execution(s)"
            )
            pr.say(
                f"schedule: {res.schedule_file} (replay: chaossloth replay {res.schedule_file})"
                + ("" if res.replay_reproduces else "  [WARNING: replay did not reproduce]")
            )
            if opts.mermaid_path:
                _write_text(opts.mermaid_path, res.mermaid)
                res.mermaid_file = opts.mermaid_path
                pr.say(f"diagram: {opts.mermaid_path}")
        else:
            scope = (
                "every schedule of this workload passes (exploration complete)"
                if res.complete
                else "no failing schedule found (exploration incomplete: raise "
                "--max-executions/--time-limit for more)"
            )
            pr.say(f"PASS: {scope}")
            t = res.telemetry
            if t is not None and not t.error and t.failures:
                pr.say(
                    f"but the stock loop failed {t.failures}/{t.runs} runs with jitter: the "
                    "failure depends on something the explored workload does not model"
                )
        if opts.full:
            pr.say(
                "lock synthesis (stages 6-7) is not implemented yet: no patch is proposed"
                if failing is not None
                else "lock synthesis (stages 6-7) is not implemented yet"
            )
    res.stages = list(pr.times)
    if opts.json_path:
        try:
            rp.write_json(res.to_json(), opts.json_path)
        except OSError as exc:
            raise InputError(f"{opts.json_path}: cannot write the report ({exc.strerror or exc})")

    return res


def _one_line(s: str) -> str:
    return " ".join(str(s).split())


def _nondeterministic_message(a: Any, b: Any) -> str:
    sa, sb = [s.name for s in a.steps], [s.name for s in b.steps]
    i = next((k for k, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
    first = sa[i] if i < len(sa) else "the end"
    second = sb[i] if i < len(sb) else "the end"
    return (
        "the workload is nondeterministic: two runs in the same (default) order diverged at "
        f"step {i} ({first} vs {second}). It depends on something outside the schedule "
        "(wall-clock time, unseeded random, I/O, threads, hash order of strings)."
    )


def _default_schedule_path(program: Any) -> str:
    stem = Path(program.path).stem
    what = program.scenario or f"{program.cls}.{program.method}"
    what = re.sub(r"[^A-Za-z0-9_.-]", "_", what)
    return os.path.join(".chaossloth", f"{stem}.{what}.schedule.json")


def _write_text(path: str, text: str) -> None:
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".tmp{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the file ({exc.strerror or exc})") from None


def _write_schedule(
    failing: Any, program: Any, prog: dict[str, Any], opts: Options, path: str
) -> str:
    from chaossloth import schedule

    sched = schedule.from_execution(failing, prog, timers=opts.timers, max_steps=opts.max_steps)
    try:
        return str(schedule.write(sched, path))
    except OSError as exc:
        raise InputError(
            f"{path}: cannot write the schedule file ({exc.strerror or exc})"
        ) from None


def _replays(path: str, program: Any, oracle: Any, opts: Options) -> bool:
    from chaossloth import schedule

    try:
        sched = schedule.read(path)
        r = schedule.replay(sched, program.factory, oracle=oracle, max_steps=opts.max_steps)
    except Exception:  # noqa: BLE001 - reported as "did not reproduce"
        return False
    return bool(r.failed)


def _detailed_replay(program: Any, failing: Any, oracle: Any, opts: Options) -> _Detailed:
    """The failing execution with its trace and the explorer that ran it, for diagnosis: the
    exploration's own detailed re-run when it has one, else a replay of its schedule."""
    if failing.explorer is not None and failing.trace is not None:
        return _Detailed(failing, failing.explorer)
    r = _run_once(
        program,
        oracle,
        opts,
        schedule=failing.schedule,
        actor_paths=failing.actor_paths,
        detailed=True,
    )
    return _Detailed(r, r.explorer)


@dataclass
class _Detailed:
    result: Any
    explorer: Any


def _ignored_objects(detailed: _Detailed) -> list[int]:
    """Objects only ChaosSloth's asyncio capture touched (no access from a line of the user's
    code): futures, tasks and primitives, whose intermediate states are meant to be seen."""
    user: set[int] = set()
    internal: set[int] = set()
    for ev in detailed.result.trace or []:
        for obj, _key, _kind, site in ev.accesses:
            (user if _site(site) is not None else internal).add(obj)
    return sorted(internal - user)


def diagnose(detailed: _Detailed, failing: Any) -> list[rp.Finding]:
    """Stage 5: the engine's findings for the failing trace, with names and source lines."""
    from chaossloth import _core

    r = detailed.result
    trace = r.trace or []
    names = {s.actor: s.name for s in r.steps}
    findings: list[rp.Finding] = []
    fail = r.failure or failing.failure
    if fail is not None and fail.kind == "deadlock":
        findings.append(_deadlock_finding(detailed, fail, names))
    raw: list[Any] = list(_core.diagnose(detailed.explorer, ignore=_ignored_objects(detailed)))
    access_of = _access_table(trace)
    sites = r.await_sites or []
    for item in raw:
        f = _finding_from(item, trace, access_of, sites, names)
        if f is not None:
            findings.append(f)
    cancel = _cancellation_finding(detailed, names, raw[0] if raw else None)
    if cancel is not None:
        findings.insert(0, cancel)
    return findings


def _sync_text(site_id: int) -> str:
    try:
        from chaossloth.capture import sites
    except ImportError:
        return ""
    st = sites.get(site_id)
    return st.text if st.kind == "sync" else ""


def _cancellation_finding(
    detailed: _Detailed, names: dict[int, str], first_avio: Any
) -> rp.Finding | None:
    """A cancellation (a task.cancel(), a timeout) that the failure needed: issued before the
    scenario's task ended, and inside the window of the first access pattern if there is one."""
    trace = detailed.result.trace or []
    root = next((a for a in sorted(names) if detailed.explorer.actor_path(a) == (None, 0)), None)
    root_events = [i for i, ev in enumerate(trace) if ev.actor == root]
    end = root_events[-1] if root_events else len(trace)
    owner: dict[int, int] = {}  # task object -> its actor (a task records its own completion)
    for ev in trace:
        for obj, _key, _kind, site in ev.accesses:
            if _sync_text(site) == "Task.complete()":
                owner[obj] = ev.actor
    for i, ev in enumerate(trace[: end + 1]):
        for obj, _key, _kind, site in ev.accesses:
            if _sync_text(site) != "Task.cancel()":
                continue
            if first_avio is not None:
                p, c = _get(first_avio, "p_event"), _get(first_avio, "c_event")
                if isinstance(p, int) and isinstance(c, int) and not p < i < c:
                    continue
            target = owner.get(obj)
            victim = names.get(target, "a task") if target is not None else "a task"
            sites = detailed.result.await_sites or []
            prev = [k for k in range(i) if trace[k].actor == ev.actor]
            by = _user_await(sites, prev[-1]) if prev else None
            victim_prev = [k for k in range(i) if target is not None and trace[k].actor == target]
            at = _user_await(sites, victim_prev[-1]) if victim_prev else None
            f = rp.Finding(
                pattern="cancellation",
                hazard="cancellation",
                task=victim,
                other_task=names.get(ev.actor, f"actor {ev.actor}"),
                await_site=at,
                remote=by,
            )
            f.text = (
                f"cancellation: {f.other_task} cancels {victim}"
                + (f" (timeout or cancel at {by.where()} `{by.text}`)" if by else "")
                + (f" while it is suspended at {at.where()} `{at.text}`" if at else "")
                + "; the work it had started is left half-done (use try/finally, or "
                "asyncio.shield for work that must complete)."
            )
            return f
    return None


def _finding_objects(detailed: _Detailed) -> set[int]:
    from chaossloth import _core

    objs: set[int] = set()
    for item in _core.diagnose(detailed.explorer, _ignored_objects(detailed)):
        o = _get(item, "object")
        if isinstance(o, int):
            objs.add(o)
    return objs


def _access_table(trace: list[Any]) -> list[tuple[int, tuple[int, int, int, int]]]:
    out: list[tuple[int, tuple[int, int, int, int]]] = []
    for i, ev in enumerate(trace):
        for acc in ev.accesses:
            out.append((i, acc))
    return out


def _get(item: Any, *keys: str) -> Any:
    for k in keys:
        if isinstance(item, dict):
            if k in item:
                return item[k]
        elif hasattr(item, k):
            return getattr(item, k)
    return None


def _finding_from(
    item: Any, trace: list[Any], access_of: list[Any], await_sites: list[Any], names: dict[int, str]
) -> rp.Finding | None:
    pattern = _get(item, "pattern") or _get(item, "name") or _get(item, "kind") or ""
    pattern = rp.ENGINE_NAMES.get(str(pattern), str(pattern))

    def site_for(which: str) -> rp.Site | None:
        ai = _get(item, f"{which}_access")
        if isinstance(ai, int) and 0 <= ai < len(access_of):
            return _site_of(access_of[ai][1][3])
        ev = _get(item, f"{which}_event")
        if isinstance(ev, int) and 0 <= ev < len(trace):
            for acc in trace[ev].accesses:
                s = _site_of(acc[3])
                if s is not None:
                    return s
        return None

    local, remote, second = site_for("p"), site_for("r"), site_for("c")
    if local is None and remote is None and second is None:
        return None  # only asyncio's own objects: not something the user wrote
    p_event = _get(item, "p_event")
    await_site = None
    if isinstance(p_event, int):
        await_site = _user_await(await_sites, p_event)
    resource = ""
    for which in ("r", "p", "c"):
        ai = _get(item, f"{which}_access")
        if isinstance(ai, int) and 0 <= ai < len(access_of):
            resource = _resource_label(access_of[ai][1][3])
            if resource != "asyncio internals":
                break
    la, ra = _get(item, "local_actor"), _get(item, "remote_actor")
    f = rp.Finding(
        pattern=pattern,
        hazard=rp.hazard_of_pattern(pattern, local),
        task=names.get(la, f"actor {la}") if isinstance(la, int) else "",
        other_task=names.get(ra, f"actor {ra}") if isinstance(ra, int) else "",
        resource=resource,
        local=local,
        await_site=await_site,
        remote=remote,
        second=second,
    )
    f.text = rp.word_finding(f)
    return f


def _sync_op(site_id: int, kind: int) -> str | None:
    """'acquire' / 'release' for an access recorded on a lock-like primitive, else None."""
    if kind == 3:
        return "acquire"
    if kind == 4:
        return "release"
    try:
        from chaossloth.capture import sites
    except ImportError:
        return None
    st = sites.get(site_id)
    if st.kind != "sync":
        return None
    if st.text.endswith(".acquire()") or st.text.endswith(".__aenter__()"):
        return "acquire"
    if st.text.endswith(".release()") or st.text.endswith(".__aexit__()"):
        return "release"
    return None


def wait_for_edges(
    trace: list[Any], blocked_actors: set[int]
) -> tuple[list[tuple[int, int, int]], dict[int, tuple[int, int]], dict[int, int]]:
    """Who waits for which lock and who holds it, from the lock operations in the trace.

    The lock a blocked task waits for is the object of its last acquire; a task holds a lock
    when its last operation on it is an acquire and it is not waiting for that lock. Returns
    (edges (waiter, lock, holder), first acquisition event of each lock, the lock each blocked
    task waits for)."""
    last_op: dict[tuple[int, int], str] = {}
    last_acquire: dict[int, int] = {}
    first_taken: dict[int, tuple[int, int]] = {}
    for i, ev in enumerate(trace):
        for j, (obj, _key, kind, site) in enumerate(ev.accesses):
            op = _sync_op(site, kind)
            if op is None:
                continue
            last_op[(ev.actor, obj)] = op
            if op == "acquire":
                last_acquire[ev.actor] = obj
                first_taken.setdefault(obj, (i, j))
    waits = {a: last_acquire[a] for a in blocked_actors if a in last_acquire}
    edges = []
    for waiter, lock in sorted(waits.items()):
        for (holder, obj), op in sorted(last_op.items()):
            if obj == lock and op == "acquire" and holder != waiter and waits.get(holder) != obj:
                edges.append((waiter, lock, holder))
    return edges, first_taken, waits


def _deadlock_finding(detailed: _Detailed, fail: Any, names: dict[int, str]) -> rp.Finding:
    from chaossloth import _core

    trace = detailed.result.trace or []
    last_event: dict[int, int] = {}
    for i, ev in enumerate(trace):
        last_event[ev.actor] = i
    # the tasks the loop found waiting when nothing could run, and the source name of what
    # each waits for ("Lock.acquire() on self.locks['a'] (locked)")
    blocked_info = [b for b in fail.details.get("blocked", ()) if isinstance(b.get("actor"), int)]
    blocked = {b["actor"] for b in blocked_info}
    waits_on = {b["actor"]: _waited_name(str(b.get("waits_for", ""))) for b in blocked_info}
    if not blocked:  # a failure read back from an old file: every task that ran may wait
        blocked = {a for a in last_event if names.get(a, "").startswith("Task")}
    edges, first_taken, _ = wait_for_edges(trace, blocked)
    cycle = _core.wait_for_cycle(edges) if edges else None
    sites = detailed.result.await_sites or []
    lock_names: dict[int, str] = {}

    def lock_name(obj: int, waiter: int) -> str:
        if obj not in lock_names:
            label = waits_on.get(waiter) or (
                f"lock {chr(ord('A') + len(lock_names))}" if len(lock_names) < 26 else "lock"
            )
            taken = first_taken.get(obj)
            if taken is not None:
                where = _line_before(trace, *taken)
                if where is not None:
                    label += f" (taken at {where.where()} `{where.text}`)"
            lock_names[obj] = label
        return lock_names[obj]

    links: list[dict[str, str]] = []
    for e in cycle or []:
        waiter, lock, holder = (
            (e["waiter"], e["resource"], e["holder"]) if isinstance(e, dict) else e
        )
        ev_w = last_event.get(waiter, -1)
        at = _user_await(sites, ev_w) or _line_before(trace, ev_w, None)
        links.append(
            {
                "task": names.get(waiter, f"actor {waiter}"),
                "resource": lock_name(lock, waiter),
                "held_by": names.get(holder, f"actor {holder}"),
                "at": at.where() if at else "",
            }
        )
    f = rp.Finding(pattern="deadlock", hazard="deadlock", cycle=links)
    if links:
        f.task, f.other_task = links[0]["task"], links[0]["held_by"]
        f.resource = links[0]["resource"]
        f.text = rp.word_finding(f) + (
            " Acquire the locks in one global order." if len(links) > 1 else ""
        )
    else:
        f.text = "deadlock: " + fail.message.splitlines()[0]
        rest = [ln.strip() for ln in fail.message.splitlines()[1:] if ln.strip()]
        if rest:
            f.text += " " + "; ".join(rest)
    return f


_WAITED = re.compile(r"^\w+\.(?:acquire|wait)\(\) on (?P<name>.+?)(?: \([^()]*\))?$")


def _waited_name(waits_for: str) -> str | None:
    """The source name in the loop's "Lock.acquire() on self.locks['a'] (locked)", if any."""
    m = _WAITED.match(waits_for)
    if m is None or m["name"].startswith("an unnamed "):
        return None
    return m["name"]


def _user_await(sites: list[Any], event: int) -> rp.Site | None:
    if 0 <= event < len(sites) and sites[event]:
        file, line, text = sites[event]
        if _is_user_file(file):
            return rp.Site(file, line, _line_text(file, line) or text)
    return None


def _line_before(trace: list[Any], event: int, index: int | None) -> rp.Site | None:
    """The user's line of the last access of a step before access `index` (None: the end)."""
    if 0 <= event < len(trace):
        accs = trace[event].accesses
        for acc in reversed(accs[:index] if index is not None else accs):
            s = _site_of(acc[3])
            if s is not None:
                return s
    return None


def _is_user_file(file: str) -> bool:
    import asyncio

    here = os.path.dirname(os.path.abspath(__file__))
    adir = os.path.dirname(asyncio.__file__)
    return not file.startswith((here, adir, "<"))


_CANCEL_TYPES = {"CancelledError", "TimeoutError"}


def classify(failure: Any, findings: list[rp.Finding], detailed: Any) -> str:
    """The hazard named to the user (precedence: see chaossloth.report)."""
    if failure is None:
        return "exception"
    if failure.kind == "deadlock":
        return "deadlock"
    if failure.kind == "livelock":
        return "livelock"
    if failure.type_name in _CANCEL_TYPES or any(f.hazard == "cancellation" for f in findings):
        return "cancellation"
    for f in findings:
        if f.hazard in ("lost-update", "check-then-act", "dirty-read", "order-violation"):
            return f.hazard
    return "exception"


def _relevant_objects(trace: list[Any], deadlock: bool, raw_objects: set[int]) -> set[int]:
    """The objects a diagram shows: those of the findings; else (a deadlock, a plain exception)
    the locks and the objects written by one task and touched by another."""
    if raw_objects:
        return set(raw_objects)
    touched: dict[int, set[int]] = {}
    written: set[int] = set()
    locks: set[int] = set()
    for ev in trace:
        for obj, _key, kind, site in ev.accesses:
            if _sync_op(site, kind) is not None:
                locks.add(obj)
            if _site(site) is None:
                continue
            touched.setdefault(obj, set()).add(ev.actor)
            if kind != 1:
                written.add(obj)
    if deadlock and locks:
        return locks
    return {o for o, actors in touched.items() if len(actors) > 1 and o in written} | locks


def _object_name(s: Any) -> str:
    """The source name of the object an access at site `s` touched (the receiver of an
    attribute, the container of a subscript)."""
    name = s.name or s.text
    if s.kind == "attr" and "." in name:
        return name.rsplit(".", 1)[0]
    return name


def diagram_steps(detailed: _Detailed, raw_objects: set[int] | None = None) -> list[rp.DiagramStep]:
    r = detailed.result
    trace = r.trace or []
    names = {s.actor: s.name for s in r.steps}
    sites = r.await_sites or []
    deadlock = r.failure is not None and r.failure.kind == "deadlock"
    relevant = _relevant_objects(trace, deadlock, raw_objects or set())
    obj_names: dict[int, str] = {}
    n_locks = 0
    for ev in trace:
        for obj, _key, kind, site in ev.accesses:
            if obj not in relevant or obj in obj_names:
                continue
            s = _site(site)
            if s is not None:
                obj_names[obj] = _object_name(s)
            elif _sync_op(site, kind) is not None:
                n_locks += 1
                obj_names[obj] = f"lock {chr(ord('A') + n_locks - 1)}" if n_locks <= 26 else "lock"
    out: list[rp.DiagramStep] = []
    for i, ev in enumerate(trace):
        name = names.get(ev.actor, f"actor {ev.actor}")
        accs: list[tuple[str, str, str]] = []
        seen: set[tuple[str, str, str]] = set()
        for obj, _key, kind, site_id in ev.accesses:
            if obj not in relevant or obj not in obj_names:
                continue
            s = _site(site_id)
            op = _sync_op(site_id, kind)
            if s is not None:
                k = (obj_names[obj], "read" if kind == 1 else "write", f"{s.text} (line {s.line})")
            elif op is not None:
                k = (obj_names[obj], "write", op)
            else:
                continue
            if k not in seen:
                seen.add(k)
                accs.append(k)
        aw = _user_await(sites, i)
        out.append(
            rp.DiagramStep(
                name,
                accs,
                f"{aw.text} (line {aw.line})" if aw else "",
                name.startswith("Task"),
            )
        )
    return out


# ------------------------------------------------------------------ replay command


@dataclass
class ReplayOutcome:
    code: int
    message: str
    failure: Any = None


def replay_file(
    path: str, out: TextIO | None, *, mermaid_path: str | None = None, repeat: int = 1
) -> int:
    """`chaossloth replay FILE`: 1 the failure reproduces (every time, with --repeat), 0 it
    passes now, 2 the schedule no longer fits the program (ScheduleMismatch)."""
    import warnings

    from chaossloth import schedule

    sched = schedule.read(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = schedule.load_program(sched)
    oracle = with_invariant(program, sched.program.get("invariant"))
    w = out if out is not None else io.StringIO()
    for c in caught:
        w.write(f"warning: {c.message}\n")
    t0 = time.perf_counter()
    reproduced = 0
    first_fail: Any = None
    for _ in range(repeat):
        try:
            r = schedule.replay(sched, program.factory, oracle=oracle)
        except NondeterminismError as exc:
            raise ScheduleMismatch(str(exc)) from None
        if r.failed:
            reproduced += 1
            if first_fail is None:
                first_fail = r
    secs = time.perf_counter() - t0
    n_steps = len(sched.steps)
    times = f" {reproduced}/{repeat} times" if repeat > 1 else ""
    if first_fail is not None:
        f = first_fail.failure
        w.write(f"replayed {n_steps} steps in {secs:.3f}s: the failure reproduces{times}\n")
        if f is not None:
            who = f" in {f.task}" if f.task else ""
            w.write(f"{f.kind}{who}: {f.type_name}: {f.message.rstrip()}\n")
            if f.traceback:
                w.write(f.traceback.rstrip() + "\n")
        if mermaid_path:
            _write_text(mermaid_path, rp.mermaid(diagram_steps(_Detailed(first_fail, None))))
        w.flush()
        return 1 if reproduced == repeat else 0
    w.write(
        f"replayed {n_steps} steps in {secs:.3f}s: the schedule passes now "
        "(the failure does not reproduce)\n"
    )
    w.flush()
    return 0


class ScheduleMismatch(Exception):
    """The schedule no longer fits the program (replay exit code 2)."""


# ------------------------------------------------------------------ for pytest


def check_function(
    fn: Callable[[], Any], *, schedule_out: str | os.PathLike[str], **options: Any
) -> Result:
    """Explores an ``async def`` scenario defined at module level in a file (pytest plugin)."""
    if not inspect.iscoroutinefunction(fn):
        raise InputError("a scenario must be an async def with no parameters")
    path = inspect.getsourcefile(fn)
    if path is None:
        raise InputError(f"cannot find the source file of {fn.__qualname__}")
    if "." in fn.__qualname__:
        raise InputError(f"{fn.__qualname__}: a scenario must be defined at module level")
    program = load(path, scenario=fn.__name__)
    opts = Options(schedule_out=str(schedule_out), telemetry=False)
    for k, v in options.items():
        setattr(opts, k, v)
    return run(program, opts, None)
