"""The ``chaossloth`` command.

    chaossloth check FILE --scenario NAME [options]
    chaossloth check FILE --cls CLASS --method METHOD [--tasks K] [--args LIT] [--init-args LIT]
    chaossloth FILE --cls CLASS --method METHOD [options]     the whole pipeline
    chaossloth replay SCHEDULE_FILE
    chaossloth trace ...
    chaossloth fix ...                                        (not implemented yet)

Exit codes: 0 no failing schedule, 1 failing schedule found (replay: the failure reproduces),
2 usage or input error (replay: the schedule no longer fits the program), 3 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_INPUT = 2
EXIT_INTERNAL = 3

STRATEGIES = ("auto", "dpor", "pct", "pos", "random", "fifo")
SUBCOMMANDS = ("check", "replay", "trace", "fix")

_DESCRIPTION = (
    "Deterministic concurrency verification for asyncio: explore the schedules of a workload, "
    "find the failing one, replay it, explain it."
)
_EPILOG = """commands:
  check FILE ...         find a failing schedule, replay it and explain it
  FILE ...               the whole pipeline (as check; lock synthesis is not implemented yet)
  replay SCHEDULE_FILE   re-execute a failing schedule (exit 1: fails, 0: passes now,
                         2: the schedule no longer fits the program)
  trace ...              one recorded run, step by step: reads, writes, awaits and
                         happens-before edges (see chaossloth trace -h)
  fix ...                lock synthesis (not implemented yet)

exit codes: 0 no failing schedule, 1 failing schedule found, 2 usage or input error"""


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {v}")
    return v


def _seed(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError("must be between 0 and 2**64-1")
    return v


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return v


def _add_check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the Python file with the code under test")
    w = p.add_argument_group("what to run")
    w.add_argument(
        "--scenario",
        metavar="NAME",
        help="an async def with no parameters in FILE that runs concurrent work",
    )
    w.add_argument("--cls", metavar="CLASS", help="a class in FILE (with --method)")
    w.add_argument(
        "--method",
        metavar="METHOD",
        help="an async method of CLASS, called concurrently --tasks times",
    )
    w.add_argument(
        "--tasks",
        metavar="K",
        type=_positive_int,
        default=2,
        help="concurrent calls of METHOD (default 2)",
    )
    w.add_argument(
        "--args",
        metavar="LITERAL",
        help="arguments of each call, a Python literal: \"'audit'\" or \"('a', 1)\"",
    )
    w.add_argument(
        "--init-args",
        metavar="LITERAL",
        dest="init_args",
        help="arguments of CLASS(...), a Python literal",
    )
    w.add_argument(
        "--invariant",
        metavar="NAME",
        help="a function in FILE taking the object; it must hold after the calls",
    )
    e = p.add_argument_group("exploration")
    e.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="auto (default): dpor within the budget, then sampling (pct)",
    )
    e.add_argument(
        "--max-executions",
        metavar="N",
        type=_positive_int,
        dest="max_executions",
        help="stop after N executions (default: no limit; the time limit applies)",
    )
    e.add_argument(
        "--time-limit",
        metavar="SECONDS",
        type=_seconds,
        dest="time_limit",
        help="wall-time budget of the exploration (default 10)",
    )
    e.add_argument(
        "--max-steps",
        metavar="N",
        type=_positive_int,
        dest="max_steps",
        default=10000,
        help="steps per execution before it counts as a livelock",
    )
    e.add_argument(
        "--seed", type=_seed, default=0, help="seed of the sampling strategies (default 0)"
    )
    e.add_argument(
        "--timers",
        choices=("strict", "relaxed"),
        default="strict",
        help="strict: timers fire in deadline order; relaxed: any pending timer "
        "may fire at any point",
    )
    e.add_argument(
        "--no-stop-on-failure",
        action="store_false",
        dest="stop_on_failure",
        help="keep exploring after a failure and count the failing schedules",
    )
    e.add_argument(
        "--no-telemetry",
        action="store_false",
        dest="telemetry",
        help="skip stage 4 (stock-loop failure rate and collision window)",
    )
    o = p.add_argument_group("output")
    o.add_argument("--json", metavar="PATH", dest="json_path", help="write the JSON report")
    o.add_argument(
        "--mermaid",
        metavar="PATH",
        dest="mermaid_path",
        help="write the failing schedule as a Mermaid sequence diagram",
    )
    o.add_argument(
        "--schedule-out",
        metavar="PATH",
        dest="schedule_out",
        help="where to write the failing schedule (default .chaossloth/...)",
    )
    o.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")


def _check_parser(prog: str, full: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=_DESCRIPTION if not full else f"{_DESCRIPTION} (the whole pipeline)",
        epilog=_EPILOG if full else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_check_options(p)
    return p


def _err(msg: str) -> None:
    sys.stderr.write(f"chaossloth: error: {msg}\n")
    sys.stderr.flush()


def _cmd_check(argv: Sequence[str], full: bool) -> int:
    from chaossloth import pipeline

    prog = "chaossloth" if full else "chaossloth check"
    parser = _check_parser(prog, full)
    ns = parser.parse_args(list(argv))
    if ns.invariant and not ns.cls:
        parser.error(
            "--invariant takes the object of a --cls/--method workload; a --scenario "
            "asserts what must hold itself"
        )
    program = pipeline.load(
        ns.file,
        scenario=ns.scenario,
        cls=ns.cls,
        method=ns.method,
        tasks=ns.tasks,
        args=ns.args,
        init_args=ns.init_args,
    )
    line = _progress_line(pipeline, ns)
    extra: dict[str, object] = {} if line is None else {"progress": line}
    opts = pipeline.Options(
        strategy=ns.strategy,
        max_executions=ns.max_executions,
        time_limit=ns.time_limit
        if ns.time_limit is not None
        else (None if ns.max_executions else pipeline.DEFAULT_TIME_LIMIT),
        max_steps=ns.max_steps,
        seed=ns.seed,
        timers=ns.timers,
        stop_on_failure=ns.stop_on_failure,
        invariant=ns.invariant,
        json_path=ns.json_path,
        mermaid_path=ns.mermaid_path,
        schedule_out=ns.schedule_out,
        telemetry=ns.telemetry,
        full=full,
        **extra,  # type: ignore[arg-type]
    )
    out: Any = None if ns.quiet else sys.stdout
    if line is not None:
        line.budget = (opts.max_executions, opts.time_limit)  # the whole budget, not a phase's
    if line is not None and out is not None:
        from chaossloth.progress import ClearingWriter

        out = ClearingWriter(out, line)
    try:
        res = pipeline.run(program, opts, out)
    finally:
        if line is not None:
            line.close()
    if ns.quiet:
        if res.failed:
            print(f"FAIL {res.hazard}: {res.schedule_file}")
        else:
            print("PASS" + (" (complete)" if res.complete else " (incomplete)"))
    return EXIT_FAIL if res.failed else EXIT_PASS


def _progress_line(pipeline: Any, ns: argparse.Namespace) -> Any:
    """The progress line of stage 3 on stderr: only on a terminal, not with --quiet, and only
    if the pipeline passes `Options.progress` on to runner.explore."""
    import dataclasses

    from chaossloth.progress import ProgressLine, is_terminal

    if ns.quiet or not is_terminal(sys.stderr):
        return None
    if "progress" not in {f.name for f in dataclasses.fields(pipeline.Options)}:
        return None
    return ProgressLine(sys.stderr, enabled=True)


def _cmd_replay(argv: Sequence[str]) -> int:
    from chaossloth import pipeline

    p = argparse.ArgumentParser(
        prog="chaossloth replay",
        description="Re-execute a failing schedule. Exit 1: the failure reproduces; 0: the "
        "schedule passes now; 2: the schedule no longer fits the program.",
    )
    p.add_argument("schedule", metavar="SCHEDULE_FILE")
    p.add_argument(
        "--mermaid",
        metavar="PATH",
        dest="mermaid_path",
        help="write the replayed schedule as a Mermaid sequence diagram",
    )
    p.add_argument(
        "--repeat",
        metavar="N",
        type=_positive_int,
        default=1,
        help="replay N times; exit 1 only if the failure reproduces every time",
    )
    ns = p.parse_args(list(argv))
    try:
        return pipeline.replay_file(
            ns.schedule, sys.stdout, mermaid_path=ns.mermaid_path, repeat=ns.repeat
        )
    except pipeline.ScheduleMismatch as exc:
        _err(str(exc))
        return EXIT_INPUT


def _cmd_trace(argv: Sequence[str]) -> int:
    try:
        from chaossloth import trace_cmd
    except ImportError:
        _err("chaossloth trace is not available in this build")
        return EXIT_INPUT
    return int(trace_cmd.main(list(argv)))


def _cmd_fix(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print("usage: chaossloth fix FILE ...\n\nLock synthesis: not implemented yet.")
        return EXIT_PASS
    _err(
        "chaossloth fix (lock synthesis, stages 6-7) is not implemented yet; "
        "`chaossloth check` finds, replays and explains the race"
    )
    return EXIT_INPUT


def _top_help() -> str:
    return (
        "usage: chaossloth check FILE (--scenario NAME | --cls CLASS --method METHOD) [options]\n"
        "       chaossloth FILE (--scenario NAME | --cls CLASS --method METHOD) [options]\n"
        "       chaossloth replay SCHEDULE_FILE\n"
        "       chaossloth trace ...\n"
        "       chaossloth fix ...\n\n"
        f"{_DESCRIPTION}\n\n{_EPILOG}\n\n"
        "options: see chaossloth check --help\n"
    )


def _silence_stdout() -> None:
    """Points stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from chaossloth.errors import InputError

    try:
        if not args or args[0] in ("-h", "--help"):
            sys.stdout.write(_top_help())
            return EXIT_PASS if args else EXIT_INPUT
        if args[0] == "--version":
            from chaossloth import __version__

            print(f"chaossloth {__version__}")
            return EXIT_PASS
        cmd = args[0]
        if cmd == "check":
            return _cmd_check(args[1:], full=False)
        if cmd == "replay":
            return _cmd_replay(args[1:])
        if cmd == "trace":
            return _cmd_trace(args[1:])
        if cmd == "fix":
            return _cmd_fix(args[1:])
        return _cmd_check(args, full=True)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        code = exc.code
        return code if isinstance(code, int) else EXIT_INPUT
    except InputError as exc:
        _err(str(exc))
        return EXIT_INPUT
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        # the reader (`| head`) went away: nothing left to say to it
        _silence_stdout()
        return 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader left
    except RecursionError:
        _err("the workload recursed too deeply")
        return EXIT_INPUT
    except Exception as exc:
        if os.environ.get("CHAOSSLOTH_DEBUG"):
            raise
        _err(
            f"internal error: {type(exc).__name__}: {exc} "
            "(set CHAOSSLOTH_DEBUG=1 for the traceback, and please report it)"
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
