"""What the stages share: the :class:`Stage` protocol, the :class:`Context` every stage reads
and writes, and the :class:`Result` a run returns.

Problems with the user's input (a workload that does real I/O, never terminates or is
nondeterministic) raise :class:`~chaossloth.errors.InputError` with one readable message; a
failing schedule is a result, not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from chaossloth import report as rp
from chaossloth import runner
from chaossloth.config import Config
from chaossloth.database import Database
from chaossloth.diagnosis import Detailed
from chaossloth.errors import InputError, NondeterminismError
from chaossloth.reasoning.repair import Repair
from chaossloth.reasoning.synthesis import Hazard
from chaossloth.runner import ExecutionResult, Failure
from chaossloth.scenario import Program

Oracle = Callable[[Any], Any]


class Stage(Protocol):
    """One stage of the pipeline.  ``name`` keys the JSON report's ``stages`` entries,
    ``title`` is the line printed as the stage ends (it says what the stage does);
    ``implemented`` is False for a stage that only says it is not there yet."""

    name: str
    title: str
    implemented: bool

    def skip_reason(self, ctx: Context) -> str | None:
        """Why the stage does not run on this context (printed instead of its time), or None."""
        ...

    def run(self, ctx: Context) -> None:
        """Runs the stage: reads and writes `ctx`, says what it found on ``ctx.printer``."""
        ...


@dataclass
class Result:
    """What a run of the stages found (the JSON report is :meth:`to_json`)."""

    verdict: str = "pass"
    hazard: str | None = None
    failure: dict[str, Any] | None = None
    executions: int = 0
    failing_executions: int = 0
    distinct_traces: int = 0
    #: distinct_traces is an estimate: past the engine's exact limit (_core.EXACT_TRACES, 65,536
    #: traces) it counts with a fixed-size HyperLogLog sketch (0.4% standard error)
    distinct_traces_estimated: bool = False
    #: distinct_traces is a lower bound: --jobs counts per worker process (the largest count)
    distinct_traces_lower_bound: bool = False
    #: distinct_traces is an upper bound: dpor with --jobs sums each process's new traces
    distinct_traces_upper_bound: bool = False
    sleep_blocked: int = 0  #: dpor executions cut short as redundant (0 on read/write programs)
    complete: bool = False
    explore_seconds: float = 0.0
    schedule_file: str | None = None
    mermaid_file: str | None = None
    stages: list[rp.StageTime] = field(default_factory=list)
    telemetry: Any = None  #: jitter.Telemetry of stage 4, or None when it did not run
    findings: list[rp.Finding] = field(default_factory=list)
    deviations: int = 0
    schedule_steps: int = 0
    replay_reproduces: bool | None = None
    program: dict[str, Any] = field(default_factory=dict)
    strategy: str = "auto"
    timers: str = "strict"  #: the timer mode the verdict's exploration used
    not_implemented: list[str] = field(default_factory=list)
    mermaid: str = ""
    #: the modules that ran instrumented (capture/importer.py's scope of the run)
    instrumented: list[str] = field(default_factory=list)
    #: uninstrumented modules the failing schedule ran through (frames, await sites)
    uninstrumented: list[str] = field(default_factory=list)
    #: stage 5's reversal test: the failing schedule's races ("races"), those reversed
    #: ("tried"; "stopped": "limit"/"time" when some were left), those whose reversal passes
    #: ("passing": the causes); None when stage 5 did not run
    reversals: dict[str, Any] | None = None
    #: why `complete` is False although the exploration covered every schedule it saw
    incomplete_reason: str | None = None
    #: stage 3's sentinel (JSON-ready: executions, failures, capture_gap, ...), or None
    sentinel: dict[str, Any] | None = None
    #: stage 4: the stock loop's failure when no explored schedule failed (type, traceback)
    stock_loop_failure: dict[str, Any] | None = None
    #: a dependency capture missed: found by the sentinel or the stock loop (JSON-ready)
    capture_gap: dict[str, Any] | None = None
    #: stage 5: the failing schedule step by step (diagnosis.timeline), None when passing
    timeline: list[dict[str, Any]] | None = None
    #: stages 6-7: the repair's JSON (Repair.to_json), or None when they did not run
    repair: dict[str, Any] | None = None
    #: stages 6-7: the repair itself, with its patch (chaossloth fix, the Python API)
    repair_obj: Repair | None = field(default=None, repr=False, compare=False)
    #: stage 3: the failure database (Database.to_json: dir, replayed, reproduced, dropped
    #: [{file, reason}], saved, notes), or None when it is off (Config.database '' or None)
    database: dict[str, Any] | None = None
    #: the optional output files (--json, --sarif, --html) that could not be written, each as
    #: its one-line error: reported after the verdict, which they never replace
    write_errors: list[str] = field(default_factory=list)
    #: stage 8: what the program wrote in the failing execution ({"text", "more_characters"}),
    #: or None when it wrote nothing (or was not captured)
    output: dict[str, Any] | None = None

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
            "distinct_traces_estimated": self.distinct_traces_estimated,
            "distinct_traces_lower_bound": self.distinct_traces_lower_bound,
            "distinct_traces_upper_bound": self.distinct_traces_upper_bound,
            "sleep_blocked": self.sleep_blocked,
            "complete": self.complete,
            "explore_seconds": round(self.explore_seconds, 6),
            "schedule_file": self.schedule_file,
            "mermaid_file": self.mermaid_file,
            "stages": [s.to_json() for s in self.stages],
            "natural_failure_rate": tel["natural_failure_rate"],
            "collision_window": tel["collision_window"],
            "findings": [f.to_json() for f in self.findings],
            "timeline": self.timeline,
            "reversals": self.reversals,
            "deviations": self.deviations,
            "schedule_steps": self.schedule_steps,
            "replay_reproduces": self.replay_reproduces,
            "program": self.program,
            "strategy": self.strategy,
            "timers": self.timers,
        }
        # what the sentinel and the stock loop add to `complete`
        d["incomplete_reason"] = self.incomplete_reason
        d["program_output"] = self.output
        d["sentinel"] = self.sentinel
        d["stock_loop_failure"] = self.stock_loop_failure
        d["capture_gap"] = self.capture_gap
        d["repair"] = self.repair
        d["database"] = self.database
        if self.not_implemented:
            d["not_implemented"] = self.not_implemented
        d.update(rp.instrumentation_json(self.instrumented, self.uninstrumented))
        return d


@dataclass
class Context:
    """The state the stages pass along.  Each field says which stage writes it; the table in
    ARCHITECTURE.md says which stages read it."""

    program: Program
    #: the run's options; stage 4 may replace it (relaxed timers) before re-running stage 3
    config: Config
    oracle: Oracle | None
    printer: rp.StagePrinter
    result: Result
    #: the whole pipeline (no subcommand, or fix): stages 6-7 run
    full: bool = False
    #: called with runner.Progress during exploration (the CLI's terminal progress line)
    progress: Callable[[runner.Progress], None] | None = None
    #: stage 1: the first default-order execution, with its trace
    default_run: ExecutionResult | None = None
    #: stage 3: the default order ran again after the first exploration and ended as stage 1's
    state_reset_checked: bool = False
    #: stage 2: counts of events, actors, accesses, resources, dependent pairs
    alphabet: dict[str, int] = field(default_factory=dict)
    #: stage 3 (stage 4 when it re-runs stage 3): the minimal failing execution, or None
    failing: ExecutionResult | None = None
    #: stage 3: the program's failure database (None: off, or a context that must not save,
    #: such as stage 7's exploration of the patched program); stage 3 and its re-run save to it
    database: Database | None = None
    #: stage 5: the failing execution with its trace and explorer
    detailed: Detailed | None = None
    #: stage 6: the synthesis input (the diagnosed patterns in the program's file)
    hazards: list[Hazard] = field(default_factory=list)
    #: stage 6 (stage 7 widens and verifies it): the repair, or None when not run
    repair: Repair | None = None


# ------------------------------------------------------------------ helpers of several stages

#: failure types that mean the workload does real I/O (it cannot be explored)
IO_TYPES = ("UnsupportedOperation", "RealIOError", "UncontrolledIOError")


def run_once(ctx: Context, **kw: Any) -> ExecutionResult:
    """One execution of the workload under the context's config (`kw`: the rest of
    runner.run_once's arguments); a nondeterministic workload is an input error."""
    try:
        return runner.run_once(ctx.program.factory, oracle=ctx.oracle, config=ctx.config, **kw)
    except NondeterminismError as exc:
        raise InputError(f"the workload is nondeterministic: {exc}") from None


def input_problem_of(failure: Failure | None, max_steps: int) -> str | None:
    """A failure that means the workload cannot be explored at all (not a race)."""
    if failure is None:
        return None
    if failure.kind == "livelock":
        return (
            "the workload never terminates: in the default (stock asyncio) order it is still "
            f"running after {max_steps} steps. Raise --max-steps if it is merely long."
        )
    if failure.type_name in IO_TYPES:
        return f"the workload does real I/O, which cannot be explored: {failure.message}"
    if failure.type_name == "InputError":
        return failure.message
    return None


def one_line(s: str) -> str:
    return " ".join(str(s).split())
