"""The pipeline a user runs: the eight stages of :mod:`chaossloth.stages`, in order, on one
shared context.

Every stage is timed and printed as it ends (or printed with why it did not run).  Problems with
the user's input raise :class:`~chaossloth.errors.InputError` with one readable message; a
failing schedule is a result (:class:`Result`), not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from chaossloth import report as rp
from chaossloth import runner
from chaossloth.config import Config
from chaossloth.errors import InputError
from chaossloth.scenario import Program, oracle_with_invariant
from chaossloth.stages import STAGES, Context, Result, Stage

__all__ = ["Result", "run"]


def run(
    program: Program,
    config: Config,
    out: TextIO | None,
    *,
    full: bool = False,
    progress: Callable[[runner.Progress], None] | None = None,
) -> Result:
    """Runs the stages on a loaded program and returns the result (writes the files `config`
    asks for).  `full`: the whole pipeline (no subcommand, or ``fix``): stages 6-7 synthesize
    and verify a patch; `progress`: called during the exploration (the CLI's progress line)."""
    res = Result(program=program.describe(), strategy=config.strategy, timers=config.timers)
    if config.invariant:
        res.program["invariant"] = config.invariant
    ctx = Context(
        program=program,
        config=config,
        oracle=oracle_with_invariant(program, config.invariant),
        printer=rp.StagePrinter(out, [(s.name, s.title) for s in STAGES]),
        result=res,
        full=full,
        progress=progress,
    )
    with runner.run_budget(config.time_budget()):
        for stage in STAGES:
            reason = stage.skip_reason(ctx)
            if reason is not None:
                ctx.printer.skipped(stage.name, reason)
                if full and not stage.implemented:
                    res.not_implemented.append(stage.name)
                continue
            with ctx.printer.stage(stage.name):
                _run_stage(stage, ctx)
    res.stages = list(ctx.printer.times)
    if ctx.repair is not None:
        res.repair = ctx.repair.to_json()
    res.repair_obj = ctx.repair
    # modules the later executions imported are instrumented too: the final list
    res.instrumented = program.instrumented_modules()
    if config.json_path:
        try:
            rp.write_json(res.to_json(), config.json_path)
        except OSError as exc:
            res.write_errors.append(
                f"{config.json_path}: cannot write the report ({exc.strerror or exc})"
            )
    return res


def _run_stage(stage: Stage, ctx: Context) -> None:
    """Runs one stage.  When the run armed the watchdog itself (runner.run_budget: a library
    caller such as the pytest plugin, whose process no command's handler guards), the
    watchdog's KeyboardInterrupt that leaves a stage (a stock-loop run of stage 4, or one
    landing between executions) is the run's input error, never the caller's interrupt."""
    try:
        stage.run(ctx)
    except KeyboardInterrupt:
        if not runner.armed_by_run_budget() or runner.user_interrupted():
            raise
        if not runner.time_limit_hit():
            raise
        raise InputError(
            f"{runner.time_limit_message()} (stage {STAGES.index(stage) + 1}, {stage.name})"
        ) from None
