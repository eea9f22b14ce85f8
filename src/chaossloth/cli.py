"""The ``chaossloth`` command.

    chaossloth check FILE --scenario NAME [options]
    chaossloth check FILE --cls CLASS --method METHOD [--tasks K] [--args LIT] [--init-args LIT]
    chaossloth FILE --cls CLASS --method METHOD [options]     the whole pipeline
    chaossloth replay SCHEDULE_FILE
    chaossloth trace ...
    chaossloth fix FILE (--scenario NAME | --cls CLASS --method METHOD) [--write] [--diff PATH]

Exit codes: 0 no failing schedule, 1 failing schedule found (replay: the failure reproduces),
2 usage or input error (replay: the schedule no longer fits the program), 3 internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any

from chaossloth import (
    __version__,
    config,
    html_report,
    pipeline,
    replay,
    runner,
    sarif,
    scenario,
    trace_cmd,
)
from chaossloth import report as rp
from chaossloth.config import Config
from chaossloth.errors import InputError
from chaossloth.progress import ClearingWriter, ProgressLine, is_terminal
from chaossloth.reasoning import repair
from chaossloth.stages import collapse

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_INPUT = 2
EXIT_INTERNAL = 3


_DESCRIPTION = (
    "Deterministic concurrency verification for asyncio: explore the schedules of a workload, "
    "find the failing one, replay it, explain it."
)
_EPILOG = """commands:
  check FILE ...         find a failing schedule, replay it and explain it
  FILE ...               the whole pipeline: check, then synthesize and verify a patch
  replay SCHEDULE_FILE   re-execute a failing schedule (exit 1: fails, 0: passes now,
                         2: the schedule no longer fits the program)
  trace ...              one recorded run, step by step: reads, writes, awaits and
                         happens-before edges (see chaossloth trace -h)
  fix FILE ...           the whole pipeline; print the verified patch (--write applies it;
                         exit 0 verified or nothing to fix, 1 a hazard remains)

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


def _share(text: str) -> float:
    """--sentinel SHARE: a number of at least 0 (0 disables the sentinel)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a share of at least 0 (0.1: 10%), not {text}")
    return v


#: argparse metavars of the check options (the rest: argparse's default)
_METAVARS = {
    "scenario": "NAME",
    "cls": "CLASS",
    "method": "METHOD",
    "tasks": "K",
    "args": "LITERAL",
    "init_args": "LITERAL",
    "invariant": "NAME",
    "max_executions": "N",
    "time_limit": "SECONDS",
    "max_steps": "N",
    "seed": "SEED",
    "json_path": "PATH",
    "mermaid_path": "PATH",
    "sarif_path": "PATH",
    "html_path": "PATH",
    "schedule_out": "PATH",
    "database": "DIR",
    "instrument": "PKG",
}
_GROUP_TITLES = {"program": "what to run", "exploration": "exploration", "output": "output"}
_SHORT = {"quiet": "-q"}


class _AppendTuple(argparse.Action):
    """A repeatable option whose value is the tuple of its uses (Config's type)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, (*getattr(namespace, self.dest), values))


def _add_check_options(p: argparse.ArgumentParser) -> None:
    """FILE and one argument per option of config.Config that has a flag: its flag, default
    and help come from the Config field; its argparse type from the field's type."""
    p.add_argument("file", metavar="FILE", help="the Python file with the code under test")
    groups = {g: p.add_argument_group(_GROUP_TITLES[g]) for g in config.GROUPS}
    for f in dataclasses.fields(Config):
        flag = f.metadata["flag"]
        if flag is None:
            continue
        flags = [_SHORT[f.name], flag] if f.name in _SHORT else [flag]
        kw: dict[str, Any] = {"dest": f.name, "help": f.metadata["help"]}
        if f.type == "bool":
            # a flag that turns the default off (--no-telemetry) or on (--quiet)
            kw["action"] = "store_false" if f.default else "store_true"
        elif f.type == "tuple[str, ...]":
            # repeatable: each use adds one value
            kw.update(action=_AppendTuple, default=f.default, metavar=_METAVARS.get(f.name))
        else:
            kw["default"] = f.default
            kw["metavar"] = _METAVARS.get(f.name)
            if f.metadata["choices"] is not None:
                kw["choices"] = f.metadata["choices"]
                kw["metavar"] = None
            elif f.name == "sentinel":
                kw["type"], kw["metavar"] = _share, "SHARE"
            elif f.name == "seed":
                kw["type"] = _seed
            elif f.type in ("int", "int | None"):
                kw["type"] = _positive_int
            elif f.type == "float | None":
                kw["type"] = _seconds
            if f.default is not None:
                kw["help"] += f" (default {f.default})"
        groups[f.metadata["group"]].add_argument(*flags, **kw)
    groups["output"].add_argument(
        "--no-database",
        dest="database",
        action="store_const",
        const="",
        help="no failure database: replay no saved schedule first, save none (= --database '')",
    )


def _check_parser(prog: str, full: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=_DESCRIPTION if not full else f"{_DESCRIPTION} (the whole pipeline)",
        epilog=_EPILOG if full else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_check_options(p)
    return p


class _Usage(Exception):
    """argparse ended the command (a usage error: 2, or --help: 0): `code` is the exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """parser.parse_args, its SystemExit made a _Usage: a SystemExit anywhere else is the
    program's, never the tool's exit code."""
    try:
        return parser.parse_args(list(argv))
    except SystemExit as exc:
        raise _Usage(exc.code if isinstance(exc.code, int) else EXIT_INPUT) from None


@contextlib.contextmanager
def _program_code() -> Iterator[None]:
    """Runs code that runs the program outside the executions the runner contains (loading
    it, the stock-loop runs): its SystemExit or KeyboardInterrupt is an input problem (exit 2,
    one line), never the tool's exit; the user's Ctrl-C still stops the tool."""
    try:
        yield
    except (SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and runner.user_interrupted():
            raise
        # the stock-loop task that carried it dies with this traceback and would log "Task
        # exception was never retrieved" after the one line: the command ends here
        logging.getLogger("asyncio").disabled = True
        raise _program_exit_error(exc) from None


def _program_exit_error(exc: BaseException) -> InputError:
    if isinstance(exc, SystemExit):
        return InputError(
            f"the program called sys.exit({exc.code!r}) outside a controlled execution (while "
            "it was loaded, or on the stock asyncio loop)"
        )
    if runner.time_limit_hit():
        return InputError(
            "a run of the program on the stock asyncio loop ran past the time limit and was "
            "stopped (a step that never awaits?); raise --time-limit if it needs longer"
        )
    return InputError(
        "the program raised KeyboardInterrupt outside a controlled execution (while it was "
        "loaded, or on the stock asyncio loop)"
    )


def _err(msg: str) -> None:
    sys.stderr.write(f"chaossloth: error: {msg}\n")
    sys.stderr.flush()


def _cmd_check(argv: Sequence[str], full: bool) -> int:
    prog = "chaossloth" if full else "chaossloth check"
    parser = _check_parser(prog, full)
    ns = _parse(parser, argv)
    if ns.invariant and not ns.cls:
        with contextlib.suppress(SystemExit):
            parser.error(
                "--invariant takes the object of a --cls/--method workload; a --scenario "
                "asserts what must hold itself"
            )
        raise _Usage(EXIT_INPUT)
    cfg = Config(**{name: getattr(ns, name) for name in config.NAMES if config.flag_of(name)})
    runner.set_execution_limit(cfg.time_budget(), hard_stop=_OWN_PROCESS[0])
    with _program_code():
        program = scenario.load(ns.file, cfg)
    _check_outputs(cfg.json_path, cfg.schedule_out, cfg.mermaid_path, cfg.sarif_path, cfg.html_path)
    line = _progress_line(cfg)
    out: Any = None if cfg.quiet else sys.stdout
    if line is not None:
        # the whole budget, not a phase's
        line.budget = (cfg.max_executions, cfg.time_budget())
        if out is not None:
            out = ClearingWriter(out, line)
    try:
        with _program_code():
            res = pipeline.run(program, cfg, out, full=full, progress=line)
    finally:
        if line is not None:
            line.close()
    report = res.to_json()
    errors = [*res.write_errors, *_write_reports(cfg, report, to_stdout=True)]
    if cfg.quiet:
        if res.failed:
            print(f"FAIL {res.hazard}: {res.schedule_file or 'on the stock loop (no schedule)'}")
        else:
            print("PASS" + (" (complete)" if res.complete else " (incomplete)"))
    sys.stdout.flush()
    errors += _write_reports(cfg, report, to_stdout=False)
    return _exit_code(EXIT_FAIL if res.failed else EXIT_PASS, errors)


def _exit_code(verdict: int, write_errors: list[str]) -> int:
    """The exit status of a run whose verdict has been printed: an output file that could not
    be written is said (one line each) and makes a passing run exit 2; a failing one still
    exits 1 (its failure is the news, and its schedule file is written or said where)."""
    for message in write_errors:
        _err(message)
    if write_errors and verdict == EXIT_PASS:
        return EXIT_INPUT
    return verdict


def _write_reports(cfg: Config, report: dict[str, Any], *, to_stdout: bool) -> list[str]:
    """Writes the --sarif and --html reports of a JSON report that go to stdout ("-", before
    the quiet verdict line, which stays the last line) or those that go to files (after the
    verdict: a file that cannot be written loses nothing) (report.write_output's rules, as
    --json); returns the error of each path that could not be written."""
    errors = []
    for path, write in (
        (cfg.sarif_path, sarif.write_sarif),
        (cfg.html_path, html_report.write_html),
    ):
        if not path or (path == "-") != to_stdout:
            continue
        try:
            write(report, path)
        except OSError as exc:
            errors.append(f"{path}: cannot write the report ({exc.strerror or exc})")
    return errors


def _check_outputs(*paths: str | None) -> None:
    """Refuses, before anything runs, an output path that would write over the program's own
    files (report.check_output_path; the writers check again)."""
    for path in paths:
        if path is not None and path != "-":
            rp.check_output_path(path)


def _progress_line(cfg: Config) -> ProgressLine | None:
    """The progress line of stage 3 on stderr: only on a terminal, and not with --quiet."""
    if cfg.quiet or not is_terminal(sys.stderr):
        return None
    return ProgressLine(sys.stderr, enabled=True)


def _cmd_replay(argv: Sequence[str]) -> int:
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
    ns = _parse(p, argv)
    try:
        with _program_code():
            return replay.replay_file(
                ns.schedule, sys.stdout, mermaid_path=ns.mermaid_path, repeat=ns.repeat
            )
    except replay.ScheduleMismatch as exc:
        _err(str(exc))
        return EXIT_INPUT


def _cmd_trace(argv: Sequence[str]) -> int:
    return int(trace_cmd.main(list(argv)))


def _cmd_fix(argv: Sequence[str]) -> int:
    """chaossloth fix: the whole pipeline; the verified patch printed (and written with
    --write, --diff); exit 0 a verified patch or nothing to fix, 1 a hazard remains."""
    parser = _check_parser("chaossloth fix", full=True)
    parser.description = (
        "Find the race, synthesize ordered asyncio.Locks that remove it, verify the patch "
        "against the failing schedule and a fresh exploration, print the diff."
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="apply the verified patch to FILE in place (the original is kept as "
        ".chaossloth/<stem>.orig.py)",
    )
    parser.add_argument("--diff", metavar="PATH", dest="diff_path", help="write the diff to PATH")
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --write: patch FILE even when it is read-only (keeping its mode)",
    )
    ns = _parse(parser, argv)
    cfg = Config(**{name: getattr(ns, name) for name in config.NAMES if config.flag_of(name)})
    json_path = cfg.json_path
    cfg = cfg.replace(json_path=None)
    runner.set_execution_limit(cfg.time_budget(), hard_stop=_OWN_PROCESS[0])
    with _program_code():
        program = scenario.load(ns.file, cfg)
    _check_outputs(
        json_path, cfg.schedule_out, cfg.mermaid_path, cfg.sarif_path, cfg.html_path, ns.diff_path
    )
    if ns.write and not ns.force:
        repair.check_writable(program.path)  # before the analysis, not after it
    out: Any = None if cfg.quiet else sys.stdout
    with _program_code():
        res = pipeline.run(program, cfg, out, full=True)
    rep = res.repair_obj
    summary: dict[str, Any] = (
        rep.to_json()
        if rep is not None
        else {
            "status": "not-needed",
            "verified": False,
            "complete": res.complete,
            "executions": res.executions,
            "hazards": [],
            "locks": [],
            "files": [],
            "diff": "",
        }
    )
    code = EXIT_PASS
    if rep is None:
        line = "no patch needed: " + (
            "every schedule passes (complete)" if res.complete else "no failing schedule found"
        )
        if res.failed:  # only the stock loop failed: there is no schedule to repair from
            line, code = "no patch: the failure was seen on the stock loop only", EXIT_FAIL
    elif rep.verified:
        line = "patch verified" + (" (complete)" if summary["complete"] else " (incomplete)")
        if ns.diff_path:
            rp.write_text(ns.diff_path, rep.diff)
        if ns.write:
            backup = repair.write_patch(program, rep, force=ns.force)
            line += f"; {program.path} patched (original kept as {backup})"
    else:
        code = EXIT_FAIL
        line = f"no verified patch: {rep.explanation or 'the patch did not survive'}"
        if ns.diff_path and rep.diff:
            rp.write_text(ns.diff_path, rep.diff)
    print(line if not cfg.quiet else line.split(":")[0])
    sys.stdout.flush()
    report = res.to_json()
    errors = [
        *res.write_errors,
        *_write_reports(cfg, report, to_stdout=True),
        *_write_reports(cfg, report, to_stdout=False),
    ]
    if json_path:
        summary["report"] = report
        try:
            rp.write_json(summary, json_path)
        except OSError as exc:
            errors.append(f"{json_path}: cannot write the report ({exc.strerror or exc})")
    return _exit_code(code, errors)


def _top_help() -> str:
    return (
        "usage: chaossloth check FILE (--scenario NAME | --cls CLASS --method METHOD) [options]\n"
        "       chaossloth FILE (--scenario NAME | --cls CLASS --method METHOD) [options]\n"
        "       chaossloth replay SCHEDULE_FILE\n"
        "       chaossloth trace ...\n"
        "       chaossloth fix FILE (--scenario NAME | --cls CLASS --method METHOD) [--write]\n\n"
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
    """The command.  Called without `argv` (the ``chaossloth`` script, ``python -m
    chaossloth``) it owns the process: the watchdog may end it when a step ignores the time
    limit, and threads the program left running do not keep it alive."""
    own_process = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    for stream in (sys.stdout, sys.stderr):
        # a program's string the report did not escape (runner.printable) is written escaped,
        # never the UnicodeEncodeError that would end the report half-written
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")
    old_sigint = _install_sigint()
    _OWN_PROCESS[0] = own_process
    try:
        code = _main(args)
    finally:
        _OWN_PROCESS[0] = False
        runner.set_execution_limit(None)
        if old_sigint is not None:
            signal.signal(signal.SIGINT, old_sigint)
    if own_process:
        _exit_past_threads(code)
    return code


#: main() was called as the process's command (not in-process with argv, as tests do)
_OWN_PROCESS = [False]


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """The user's Ctrl-C: marked as the user's (the program's own KeyboardInterrupt is an
    outcome of its execution), then raised as usual."""
    if not runner.time_limit_hit():  # the watchdog's interrupt_main comes this way too
        runner.note_user_interrupt()
    raise KeyboardInterrupt


def _install_sigint() -> Any:
    """Installs _on_sigint where Python's default handler is (main thread only); returns the
    handler to restore, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    old = signal.getsignal(signal.SIGINT)
    if old is not signal.default_int_handler:
        return None  # SIGINT ignored or handled by the caller: left as it is
    signal.signal(signal.SIGINT, _on_sigint)
    return old


def _exit_past_threads(code: int) -> None:
    """Non-daemon threads the program started and left running would keep the interpreter
    alive after the verdict: threads are outside the model, so they are named (one line) and
    the process ends with the verdict's code."""
    left = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if not left:
        return
    names = ", ".join(repr(t.name) for t in left[:5]) + (", ..." if len(left) > 5 else "")
    _err(
        f"the program left {len(left)} thread(s) running ({names}); threads are outside "
        "ChaosSloth's model: exiting without waiting for them"
    )
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _interrupted(exc: KeyboardInterrupt) -> str:
    """The line of a run the user's Ctrl-C stopped: when it stopped the exploration, the
    failing schedule found so far and where it was saved (collapse.Interrupted), or that none
    was found."""
    if not isinstance(exc, collapse.Interrupted):
        return "interrupted"
    head = "interrupted during the exploration"
    failing = exc.failing
    if failing is None:
        return f"{head}: no failing schedule found so far"
    what = " ".join(failing.failure.summary().split()) if failing.failure else "a failure"
    if len(what) > 160:
        what = what[:157] + "..."
    line = f"{head}: failing schedule found so far ({what}), "
    if exc.schedule_file is not None:
        line += f"saved as {exc.schedule_file} (replay: chaossloth replay {exc.schedule_file})"
    else:
        line += f"not saved: {exc.problem}"
    return line + (f"; failure database: {exc.saved}" if exc.saved else "")


def _main(args: list[str]) -> int:
    try:
        if not args or args[0] in ("-h", "--help"):
            sys.stdout.write(_top_help())
            return EXIT_PASS if args else EXIT_INPUT
        if args[0] == "--version":
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
    except _Usage as exc:  # argparse: usage errors exit 2, --help exits 0
        return exc.code
    except SystemExit as exc:  # a subcommand's own parser (trace)
        code = exc.code
        return code if isinstance(code, int) else EXIT_INPUT
    except InputError as exc:
        _err(str(exc))
        return EXIT_INPUT
    except KeyboardInterrupt as exc:
        _err(_interrupted(exc))
        return 130
    except BrokenPipeError:
        # the reader (`| head`) went away: nothing left to say to it
        _silence_stdout()
        return 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader left
    except RecursionError:
        _err("the workload recursed too deeply")
        return EXIT_INPUT
    except Exception as exc:
        if config.debug():
            raise
        _err(
            f"internal error: {type(exc).__name__}: {exc} "
            "(set CHAOSSLOTH_DEBUG=1 for the traceback, and please report it)"
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
