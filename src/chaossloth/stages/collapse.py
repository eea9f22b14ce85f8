"""Stage 3, collapse: explores the workload's schedules with the runner (default ``auto``: DPOR
within the budget, then sampling), one execution per class of equivalent schedules for DPOR.
The failing schedule kept is the one with the fewest deviations from the default order, so the
story is the shortest.

The sentinel: when DPOR (strategy dpor or auto) reports complete without a failure, a bounded
share of its cost (``Config.sentinel``, :func:`runner.sentinel_budget`) goes to pct and random
schedules, which ignore the captured dependencies.  A failure there is reported as the bug it is
(diagnosis, schedule file and replay follow from ``ctx.failing``), ``complete`` turns False with
a reason, and the step pair capture missed (:func:`runner.find_capture_gap`) is named with its
tasks and source lines (``sentinel.capture_gap`` and ``capture_gap`` in the JSON).

The failure database (:mod:`chaossloth.database`, ``Config.database``): before exploring, the
program's saved failing schedules are replayed, newest first.  The first that fails again is the
failure at once (counted as the run's executions; the exploration is skipped unless
``stop_on_failure`` is off); those that pass now or no longer fit are dropped, each with a line
saying why.  A failure the exploration (or stage 4's re-run of it) finds is saved; so is the one
it had found when the user's Ctrl-C stops it (:func:`saved_when_interrupted`: the schedule file
too, as the verdict writes it; the CLI names both in its one line, and exits 130)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chaossloth import _core, database, diagnosis, parallel, runner, schedule
from chaossloth import report as rp
from chaossloth.errors import InputError, NondeterminismError
from chaossloth.runner import ExecutionResult, ExplorationResult, ScheduleLog, SentinelResult
from chaossloth.stages import verdict
from chaossloth.stages.context import IO_TYPES, Context, input_problem_of, one_line, run_once


class Collapse:
    name = "collapse"
    title = "Collapse: explore the distinct schedules"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None

    def run(self, ctx: Context) -> None:
        ctx.database = database.open_for(ctx.config.database, ctx.program.path, ctx.result.program)
        again = _replay_saved(ctx, ctx.database) if ctx.database is not None else None
        if again is not None and ctx.config.stop_on_failure:
            ctx.failing = again
            return
        with saved_when_interrupted(ctx, again):
            ctx.failing = explore(ctx)
        if ctx.failing is None and again is not None:
            # --no-stop-on-failure: the exploration ran within its budget and missed the
            # saved failure, which stands
            ctx.failing = again
            record_failure(ctx, again)


class Interrupted(KeyboardInterrupt):
    """The user's Ctrl-C stopped stage 3's exploration (or stage 4's re-run of it), which had
    found `failing` (None: nothing) and saved it as a FAIL run does: the schedule file
    `schedule_file` (None: `problem` says why not) and the failure database entry `saved`."""

    def __init__(
        self,
        failing: ExecutionResult | None,
        schedule_file: str | None = None,
        saved: str | None = None,
        problem: str | None = None,
    ) -> None:
        super().__init__()
        self.failing = failing
        self.schedule_file = schedule_file
        self.saved = saved
        self.problem = problem


@contextlib.contextmanager
def saved_when_interrupted(ctx: Context, known: ExecutionResult | None = None) -> Iterator[None]:
    """Runs an exploration of the run's own program: when the user's Ctrl-C stops it, the
    failing schedule it had found (else `known`, a saved one that failed again) is saved as
    a FAIL run saves it, and the interrupt goes on as an Interrupted saying so.  An interrupt
    that stopped no exploration (runner.take_interrupted_exploration) goes on as it is."""
    runner.take_interrupted_exploration()  # one left by an exploration nobody saved from
    try:
        yield
    except KeyboardInterrupt as exc:
        stopped = runner.take_interrupted_exploration()
        if stopped is None or isinstance(exc, Interrupted):
            raise
        failing = stopped.minimal_failure or known
        if failing is not None and failing.failure and failing.failure.type_name in IO_TYPES:
            failing = None  # an input problem, which a finished run would refuse, not a race
        raise _save_interrupted(ctx, failing) from exc


def _save_interrupted(ctx: Context, failing: ExecutionResult | None) -> Interrupted:
    """Saves an interrupted exploration's failing execution (light: not re-run) to the
    database and the schedule file, as stage 3 and the verdict do (their lines are not said:
    the stage stopped)."""
    if failing is None:
        return Interrupted(None)
    _save(ctx, failing)
    saved = ctx.database.saved if ctx.database is not None else None
    path = ctx.config.schedule_out or verdict._default_schedule_path(ctx.program)
    try:
        return Interrupted(failing, verdict._write_schedule(ctx, failing, path), saved)
    except InputError as exc:
        return Interrupted(failing, None, saved, str(exc))


def _replay_saved(ctx: Context, db: database.Database) -> ExecutionResult | None:
    """Replays the database's schedules of the program first; says what it did; returns the
    detailed execution of the first that fails again, or None.  With stop_on_failure (the
    default) that execution is the stage's result: the replays are the run's executions."""
    cfg, res, pr = ctx.config, ctx.result, ctx.printer
    t0 = time.monotonic()
    found = db.replay_first(ctx.program.factory, oracle=ctx.oracle, max_steps=cfg.max_steps)
    res.database = db.to_json()
    line = rp.database_line(res.database)
    if line is not None:
        pr.say(line)
    for d in db.dropped:
        pr.say(f"  dropped {d['file']}: {d['reason']}")
    for note in db.notes:
        pr.say(f"failure database: {note}")
    if found is None:
        return None
    failing = found.result
    if failing.failure is not None and failing.failure.type_name in IO_TYPES:
        raise InputError(input_problem_of(failing.failure, cfg.max_steps) or "I/O")
    if found.sched.timers != cfg.timers:
        # the schedule replays under the timer mode it was found with: the verdict's too
        ctx.config = cfg.replace(timers=found.sched.timers)
        res.timers = found.sched.timers
    if cfg.stop_on_failure:
        res.executions = res.distinct_traces = db.replayed
        res.failing_executions = 1
        res.complete = False
        res.incomplete_reason = (
            "stopped at the first failure: a schedule saved in the failure database failed "
            "again, the exploration did not run"
        )
        res.explore_seconds = time.monotonic() - t0
        pr.say(
            f"{db.replayed} execution(s) (saved schedules replayed), 1 failing; stopped at the "
            "first failure: the exploration did not run"
        )
        record_failure(ctx, failing)
    return failing


#: the share of the run's budget kept for stage 4 when it is still to run (at most its own
#: telemetry_budget): what the exploration may not spend
STAGE4_SHARE = 0.1


def exploration_seconds(ctx: Context) -> float | None:
    """The exploration's time limit: the commands' budget (Config.time_budget), but no more
    than what is left of the run's (runner.run_budget: counted from the command's start, so
    that capture's and the alphabet's time is spent from it), less stage 4's share when stage
    4 is still to run; at least runner.MIN_EXECUTION_SECONDS (one execution always runs)."""
    cfg = ctx.config
    limit = cfg.time_budget()
    budget = runner.budget_deadline()
    if limit is None or budget is None:
        return limit
    deadline, seconds = budget
    if cfg.telemetry and ctx.result.telemetry is None:
        deadline -= min(cfg.telemetry_budget, STAGE4_SHARE * seconds)
    left = deadline - time.monotonic()
    return max(runner.MIN_EXECUTION_SECONDS, min(limit, left))


def explore(ctx: Context) -> ExecutionResult | None:
    """Explores under ctx.config, fills the result's counts, says what it found and returns the
    minimal failing execution (or None).  Stage 4 calls it again when it re-runs this stage."""
    cfg, res, pr = ctx.config, ctx.result, ctx.printer
    share = cfg.sentinel_share()
    # the schedules DPOR ran, for the sentinel's capture-gap rule (runner.find_capture_gap)
    log = runner.ScheduleLog() if cfg.strategy in SENTINEL_AFTER and share > 0 else None
    sharded = cfg.jobs > 1 and cfg.strategy in parallel.SHARDED_STRATEGIES
    shared_tree = cfg.jobs > 1 and cfg.strategy in ("dpor", "auto")
    if shared_tree:
        pr.say(
            f"--jobs {cfg.jobs}: dpor's tree is shared by up to {cfg.jobs} processes"
            + (
                " (auto's pct phase, when dpor does not complete, too)"
                if cfg.strategy == "auto"
                else ""
            )
        )
    elif cfg.jobs > 1 and not sharded:
        pr.say(
            f"--jobs {cfg.jobs}: strategy {cfg.strategy} runs in one process (only "
            f"dpor, auto and {', '.join(parallel.SHARDED_STRATEGIES)} are split across processes)"
        )
    limit = exploration_seconds(ctx)
    try:
        if sharded:
            ex = parallel.explore(
                ctx.program.factory,
                config=cfg.replace(time_limit=limit),
                oracle=ctx.oracle,
                progress=ctx.progress,
            )
        else:
            ex = runner.explore(
                ctx.program.factory,
                config=cfg.replace(time_limit=limit),
                oracle=ctx.oracle,
                progress=ctx.progress,
                schedule_log=log,
            )
    except NondeterminismError as exc:
        raise InputError(f"the workload is nondeterministic: {exc}") from None
    _check_state_is_reset(ctx)
    res.executions = ex.executions
    res.failing_executions = ex.failing_executions
    res.distinct_traces = ex.distinct_traces
    res.distinct_traces_estimated = any(p.get("traces_estimated") for p in ex.phases)
    res.distinct_traces_lower_bound = not ex.distinct_traces_exact
    res.distinct_traces_upper_bound = ex.distinct_traces_upper_bound
    res.sleep_blocked = ex.sleep_blocked
    res.complete = bool(ex.complete)
    if ex.incomplete_reason:
        res.incomplete_reason = ex.incomplete_reason
    res.explore_seconds = ex.explore_seconds
    strategies = "+".join(dict.fromkeys(p.get("strategy", "?") for p in ex.phases)) or cfg.strategy
    given = sum(int(p.get("processes_forked", 0)) for p in ex.phases)
    pr.say(
        f"{ex.executions} executions ({strategies}"
        + (f" on {cfg.jobs} processes" if sharded else "")
        + (f", {given} branches explored by other processes" if given else "")
        + "), "
        + _distinct_traces_said(ex, res.distinct_traces_estimated)
        + ", "
        + (f"{ex.sleep_blocked} sleep-set blocked, " if ex.sleep_blocked else "")
        + f"{ex.failing_executions} failing; "
        + (
            "complete: every schedule covered"
            if res.complete
            else (
                "stopped at the first failure"
                if ex.failed and cfg.stop_on_failure
                else f"incomplete: {ex.incomplete_reason or 'budget reached'}"
            )
        )
    )
    failing = ex.minimal_failure
    if failing is None:
        failing = _sentinel(ctx, ex, log, share)
    if failing is not None and failing.failure and failing.failure.type_name in IO_TYPES:
        raise InputError(input_problem_of(failing.failure, cfg.max_steps) or "I/O")
    if failing is not None:
        record_failure(ctx, failing)
        _save(ctx, failing)
    return failing


def _distinct_traces_said(ex: ExplorationResult, estimated: bool) -> str:
    """The distinct-trace count as stage 3 says it: exact, estimated (the engine's sketch past
    CS_EXACT_TRACES fingerprints) or not exact (--jobs: the processes' sets are not merged)."""
    n = f"{ex.distinct_traces} distinct traces"
    if not ex.distinct_traces_exact:
        return f"at least {'about ' if estimated else ''}{n} (counted per process)"
    if ex.distinct_traces_upper_bound:
        return f"at most {'about ' if estimated else ''}{n} (counted per process)"
    return f"about {n} (estimated past {_core.EXACT_TRACES:,})" if estimated else n


def record_failure(ctx: Context, failing: ExecutionResult) -> None:
    """The result's verdict, failure and schedule size from the failing execution."""
    res, pr = ctx.result, ctx.printer
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


def _save(ctx: Context, failing: ExecutionResult) -> None:
    """Saves the failing schedule in the program's database (when the context has one)."""
    db = ctx.database
    if db is None:
        return
    cfg = ctx.config
    sched = schedule.from_execution(
        failing, ctx.result.program, timers=cfg.timers, max_steps=cfg.max_steps
    )
    saved = db.save(sched)
    ctx.result.database = db.to_json()
    if saved is not None:
        ctx.printer.say(
            f"failure database: saved as {saved} (replayed first on the next run; at most "
            f"{database.MAX_PER_PROGRAM} per program)"
        )
    else:
        ctx.printer.say(f"failure database: {db.notes[-1]}")


def _check_state_is_reset(ctx: Context) -> None:
    """Runs the default order once more after the exploration: it must end as stage 1's first
    run did (the same steps, passing or failing the same way).  When it does not, something an
    execution changes is not put back before the next one (state outside the instrumented
    modules, or an object made at import: README, "Every execution starts from the same
    state"), so the exploration's executions did not start from the same state: an input
    problem, named with the objects the default order writes that existed before it started."""
    first = ctx.default_run
    if first is None or ctx.state_reset_checked or runner.user_interrupted():
        return
    ctx.state_reset_checked = True
    again = run_once(ctx, detailed=True)
    if _outcome(again) == _outcome(first):
        return
    objects = diagnosis.preexisting_writes(again.trace or [])
    named = (
        f"; the objects the default order writes that exist before it starts: {', '.join(objects)}"
        if objects
        else ""
    )
    raise InputError(
        "the workload's state carries over from one execution to the next: the default order "
        f"{_said(first)} in the first execution and {_said(again)} after the exploration. "
        "Something an execution changes is not put back before the next one (state outside "
        "the instrumented modules, or an object made at import that is not reset: a library "
        "class's instance, an object with __slots__), or the program depends on the "
        f"process's history (when the garbage collector runs a finalizer){named}"
    )


def _outcome(r: ExecutionResult) -> tuple[Any, ...]:
    f = r.failure
    return (tuple(s.name for s in r.steps), f.kind if f else None, f.type_name if f else None)


def _said(r: ExecutionResult) -> str:
    f = r.failure
    return "passes" if f is None else f"fails ({f.type_name}: {one_line(f.message)[:120]})"


#: the strategies after which the sentinel runs (the ones that prune with dependencies)
SENTINEL_AFTER = ("dpor", "auto")

GAP_PLEASE = "ChaosSloth's exploration missed this failure: a capture gap; please report it"


def _sentinel(
    ctx: Context, ex: ExplorationResult, log: ScheduleLog | None, share: float
) -> ExecutionResult | None:
    """Runs the sentinel after a complete DPOR exploration; fills ``result.sentinel`` (and, on
    a failure, ``complete``, ``incomplete_reason`` and ``capture_gap``); returns the sentinel's
    minimal failing execution or None."""
    cfg, res, pr = ctx.config, ctx.result, ctx.printer
    entry: dict[str, Any] = {
        "share": share,
        "ran": False,
        "why_not": None,
        "executions": 0,
        "failures": 0,
        "capture_gap": None,
    }
    res.sentinel = entry
    if share <= 0:
        entry["why_not"] = "disabled (sentinel share 0)"
    elif cfg.strategy not in SENTINEL_AFTER:
        entry["why_not"] = f"strategy {cfg.strategy} does not prune with the captured dependencies"
    elif not ex.complete or log is None:
        entry["why_not"] = "dpor is not complete: there is no complete claim to check"
    if entry["why_not"] is not None:
        return None
    assert log is not None
    s = runner.sentinel(
        ctx.program.factory,
        ex,
        log,
        share=share,
        config=cfg,
        oracle=ctx.oracle,
        progress=ctx.progress,
    )
    entry.update(
        ran=True,
        executions=s.executions,
        failures=s.failures,
        seconds=round(s.seconds, 6),
        budget_executions=s.budget_executions,
        budget_seconds=round(s.budget_seconds, 6),
        strategies=s.phases,
        dpor_schedules_compared=log.count,
        dpor_schedules_not_kept=log.truncated,
    )
    how = "+".join(s.phases)
    if s.failing is None:
        pr.say(
            f"sentinel: {s.executions} executions ({how}, ignoring the captured dependencies), "
            "0 failing: complete stands"
        )
        return None
    gap = gap_json(s)
    entry["capture_gap"] = gap
    res.complete = False
    res.incomplete_reason = (
        "the sentinel found a failing schedule that DPOR's captured dependencies ruled out as "
        "equivalent to one it ran: capture missed a dependency"
    )
    res.capture_gap = {"found_by": "sentinel", "message": GAP_PLEASE, "steps": gap}
    pr.say(
        f"sentinel: {s.executions} executions ({how}, ignoring the captured dependencies), "
        f"{s.failures} failing: DPOR's complete was wrong. {gap_text(gap)} {GAP_PLEASE}."
    )
    return s.failing


def _site_json(site: tuple[str, int, str] | None) -> dict[str, Any] | None:
    return None if site is None else {"file": site[0], "line": site[1], "text": site[2]}


def _step_json(failing: ExecutionResult, pos: int) -> dict[str, Any]:
    """Step `pos` of a failing schedule: its actor, the how-manieth step of that actor it is,
    where it resumed (the await its previous step suspended at) and where it suspended."""
    steps, sites = failing.steps, failing.await_sites or []
    actor = steps[pos].actor
    before = [i for i in range(pos) if steps[i].actor == actor]
    resumed = sites[before[-1]] if before and before[-1] < len(sites) else None
    suspended = sites[pos] if pos < len(sites) else None
    return {
        "position": pos,
        "actor": actor,
        "name": steps[pos].name,
        "step": len(before) + 1,
        "resumed_at": _site_json(resumed),
        "suspended_at": _site_json(suspended),
    }


def gap_json(s: SentinelResult) -> dict[str, Any] | None:
    """The sentinel's capture gap (runner.find_capture_gap) with both steps named, or None."""
    failing, gap = s.failing, s.gap
    if failing is None or gap is None:
        return None
    return {
        "first": _step_json(failing, gap.first),
        "second": None if gap.second is None else _step_json(failing, gap.second),
        "common_prefix": gap.prefix,
        "dpor_executions_sharing_prefix": gap.sharing,
        "rule": (
            "after the longest prefix the failing schedule shares with a DPOR execution: the "
            "first step ('second') that runs after a step of another actor ('first') which "
            "every DPOR execution sharing that prefix and running both ran after it "
            "(runner.find_capture_gap)"
        ),
    }


def _where(site: dict[str, Any] | None) -> str:
    if site is None:
        return ""
    return f"{Path(site['file']).name}:{site['line']}" + (
        f" `{site['text']}`" if site["text"] else ""
    )


def step_text(step: dict[str, Any]) -> str:
    """'Task main/1 (buy), its step 2 (from stock.py:8 `await ...` to stock.py:9 `await ...`)'"""
    start = _where(step["resumed_at"]) or "its start"
    end = _where(step["suspended_at"]) or "its end"
    return f"{step['name']}, its step {step['step']} (from {start} to {end})"


def gap_text(gap: dict[str, Any] | None) -> str:
    """One sentence naming the step pair capture did not record as dependent."""
    if gap is None:
        return (
            "No step pair can be named: the failing schedule is one DPOR ran (the program "
            "behaved differently under the same schedule)."
        )
    first = step_text(gap["first"])
    if gap["second"] is None:
        return (
            "No pair of steps was ordered the other way by DPOR; the failing schedule leaves "
            f"DPOR's executions at {first}."
        )
    return (
        f"Not recorded as dependent: {first}, then {step_text(gap['second'])}: the failing "
        f"schedule runs them in this order, every DPOR execution sharing its first "
        f"{gap['common_prefix']} steps ran them the other way round."
    )
