"""Stage 8, verdict: pass or fail.  On a failure it writes the schedule file and replays it
from the file, so the verdict states that the failure reproduces from what was written; it
writes the Mermaid diagram when asked."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from chaossloth import report as rp
from chaossloth import schedule
from chaossloth.errors import InputError
from chaossloth.runner import ExecutionResult, printable
from chaossloth.scenario import Program
from chaossloth.stages.context import Context, one_line


class Verdict:
    name = "verdict"
    title = "Verdict: write the schedule, replay it"
    implemented = True

    def skip_reason(self, ctx: Context) -> str | None:
        return None

    def run(self, ctx: Context) -> None:
        failing, res, pr, cfg = ctx.failing, ctx.result, ctx.printer, ctx.config
        if failing is not None:
            path = cfg.schedule_out or _default_schedule_path(ctx.program)
            res.schedule_file = _write_schedule(ctx, failing, path)
            res.replay_reproduces = _replays(ctx, res.schedule_file)
            sentinel = res.capture_gap is not None and res.capture_gap["found_by"] == "sentinel"
            pr.say(
                f"FAIL: {rp.HAZARD_TITLE[res.hazard or 'exception']} found after "
                + (
                    f"{res.executions} DPOR + {(res.sentinel or {}).get('executions', 0)} "
                    "sentinel execution(s) (capture missed a dependency)"
                    if sentinel
                    else f"{res.executions} execution(s)"
                )
            )
            pr.say(
                f"schedule: {res.schedule_file} (replay: chaossloth replay {res.schedule_file})"
                + ("" if res.replay_reproduces else "  [WARNING: replay did not reproduce]")
            )
            _program_output(ctx, failing)
            if cfg.mermaid_path:
                rp.write_text(cfg.mermaid_path, res.mermaid)
                res.mermaid_file = cfg.mermaid_path
                pr.say(f"diagram: {cfg.mermaid_path}")
        elif res.stock_loop_failure is not None:
            _stock_loop_verdict(ctx)
        else:
            scope = (
                "every schedule of this workload passes (exploration complete)"
                if res.complete
                else f"no failing schedule found (exploration incomplete: {res.incomplete_reason})"
                if res.incomplete_reason
                else "no failing schedule found (exploration incomplete: raise "
                "--max-executions/--time-limit for more)"
            )
            pr.say(f"PASS: {scope}")
        rep = ctx.repair
        if ctx.full and rep is not None:
            if rep.verified:
                v = rep.verification
                assert v is not None
                pr.say(
                    f"patch: verified on {v.executions} schedules"
                    + (" (complete)" if v.complete else " (incomplete)")
                    + " (chaossloth fix --write applies it)"
                )
            elif rep.status == "unfixable":
                pr.say("patch: none (no lock fixes this hazard; see stage 6)")
            else:
                pr.say("patch: none verified (see stage 7)")


#: lines of the failing execution's output the verdict shows (the JSON report has it all, as
#: captured: capture.output.KEEP characters)
OUTPUT_LINES = 20
OUTPUT_WIDTH = 200


def _program_output(ctx: Context, failing: ExecutionResult) -> None:
    """What the program wrote in the failing execution, once, after the verdict: the report's
    own lines are never interleaved with it (capture.output)."""
    text = failing.output
    if not text and not failing.output_more:
        return
    ctx.result.output = {"text": text or "", "more_characters": failing.output_more}
    lines = (text or "").splitlines()
    said = f"{len(text or '')} characters" + (
        f", and {failing.output_more} more not kept" if failing.output_more else ""
    )
    ctx.printer.say(f"the program's output in the failing execution ({said}):")
    for line in lines[:OUTPUT_LINES]:
        cut = (
            f" ... ({len(line) - OUTPUT_WIDTH} more characters)" if len(line) > OUTPUT_WIDTH else ""
        )
        ctx.printer.say(f"  | {printable(line[:OUTPUT_WIDTH])}{cut}")
    if len(lines) > OUTPUT_LINES:
        ctx.printer.say(f"  | ... {len(lines) - OUTPUT_LINES} more line(s), in the JSON report")


def _stock_loop_verdict(ctx: Context) -> None:
    """FAIL on the stock loop's evidence alone: no schedule file (no explored schedule fails)."""
    res, pr = ctx.result, ctx.printer
    f = res.stock_loop_failure
    assert f is not None
    pr.say(
        f"FAIL: the stock asyncio loop failed {f['failures']}/{f['runs']} runs with jitter, no "
        f"explored schedule did: {f['type']}: {one_line(f['message'])}"
    )
    pr.say(
        res.capture_gap["message"]
        if res.capture_gap is not None
        else "the exploration was incomplete: raise --max-executions/--time-limit"
    )
    for line in str(f.get("traceback") or "").rstrip().splitlines():
        pr.say(f"  {line}")


def _default_schedule_path(program: Program) -> str:
    stem = Path(program.path).stem
    what = program.scenario or f"{program.cls}.{program.method}"
    what = re.sub(r"[^A-Za-z0-9_.-]", "_", what)
    return os.path.join(".chaossloth", f"{stem}.{what}.schedule.json")


def _write_schedule(ctx: Context, failing: ExecutionResult, path: str) -> str:
    cfg = ctx.config
    sched = schedule.from_execution(
        failing, ctx.result.program, timers=cfg.timers, max_steps=cfg.max_steps
    )
    try:
        return str(schedule.write(sched, path, chosen=cfg.schedule_out is not None))
    except OSError as exc:
        # the verdict stands: the schedule goes to a fresh temporary directory, said so
        reason = exc.strerror or str(exc)
    try:
        where = tempfile.mkdtemp(prefix="chaossloth-")
        written = str(schedule.write(sched, os.path.join(where, os.path.basename(path))))
    except OSError as exc:
        raise InputError(
            f"{path}: cannot write the schedule file ({reason}), nor in a temporary directory "
            f"({exc.strerror or exc})"
        ) from None
    ctx.printer.say(f"cannot write {path} ({reason}): the schedule was written to {written}")
    return written


def _replays(ctx: Context, path: str) -> bool:
    try:
        if os.path.isfile(path):
            sched = schedule.read(path)
        else:  # a FIFO or a device, written in place: it cannot be read back
            cfg = ctx.config
            assert ctx.failing is not None
            written = schedule.from_execution(
                ctx.failing, ctx.result.program, timers=cfg.timers, max_steps=cfg.max_steps
            )
            sched = schedule.parse(json.loads(json.dumps(written.to_json())), path)
        r = schedule.replay(
            sched, ctx.program.factory, oracle=ctx.oracle, max_steps=ctx.config.max_steps
        )
    except Exception:  # noqa: BLE001 - reported as "did not reproduce"
        return False
    return bool(r.failed)
