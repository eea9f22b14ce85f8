"""Every option of ChaosSloth, its default and its meaning, written once.

:class:`Config` is the one configuration object (as loom's ``Builder`` is): the CLI builds its
``check`` options from its fields (flag, default and help text come from here), the pytest
plugin validates the marker's keyword arguments against it, the runner (``runner.explore``,
``runner.run_once``) and the schedule reader take their defaults from it.  Adding an option is
adding one field below (its group, default, ``help`` and, for the CLI, its ``flag``): the CLI
flag, the plugin's acceptance (group ``exploration``), the runner's keyword and the type check of
``__post_init__`` follow from the field; a value range needs one line in ``__post_init__``.

``Config`` is frozen: derive a changed one with :meth:`Config.replace`, which validates the new
values and names an unknown option in one :class:`~chaossloth.errors.InputError`.

Environment variables: every variable any part of the project reads is in the
:data:`ENVIRONMENT` table at the end of this file, with who reads it and what it means (a test
checks that nothing in ``src``, ``tests``, ``bench``, ``ext`` or ``engine`` reads another).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from chaossloth.errors import InputError

#: Strategies a user picks (the CLI's ``--strategy`` choices).
STRATEGIES = ("auto", "dpor", "pct", "pos", "random", "fifo")
#: What the runner also accepts: ``exhaustive`` (brute force, for differential tests).
ALL_STRATEGIES = (*STRATEGIES, "exhaustive")
TIMER_MODES = ("strict", "relaxed")

#: The sentinel's default share of DPOR's cost (``Config.sentinel``); at least
#: SENTINEL_MIN_EXECUTIONS executions when the time share allows them.
DEFAULT_SENTINEL = 0.1
SENTINEL_MIN_EXECUTIONS = 300

#: The exploration's wall-time budget in seconds when neither ``time_limit`` nor
#: ``max_executions`` is given, in the commands (CLI, pytest plugin): see ``Config.time_limit``.
DEFAULT_TIME_LIMIT = 10.0

#: The most concurrent calls a --cls/--method workload makes (``tasks``): each is a task of every
#: execution, and the engine's state grows with their product, so a larger number is refused as
#: input rather than run out of memory.
MAX_TASKS = 10_000
#: The most worker processes ``jobs`` may ask for.
MAX_JOBS = 256
#: The engine's counters (executions, steps, seeds) are 64-bit: values must be below this.
U64_LIMIT = 2**64


#: the groups of options: what to run, how to explore (the options the pytest plugin takes),
#: what to write
GROUPS = ("program", "exploration", "output")


def _opt(
    group: str,
    default: Any,
    help: str,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A field of `group`: its default, its meaning (`help`), its CLI flag (None: not a CLI
    option) and, for a string, the values it takes."""
    assert group in GROUPS
    meta = {"group": group, "help": help, "flag": flag, "choices": choices}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Config:
    """The options of one run of ChaosSloth (see the module docstring)."""

    # -- what to run ------------------------------------------------------------------------
    scenario: str | None = _opt(
        "program",
        None,
        "an async def with no parameters in FILE that runs concurrent work",
        "--scenario",
    )
    cls: str | None = _opt("program", None, "a class in FILE (with --method)", "--cls")
    method: str | None = _opt(
        "program", None, "an async method of CLASS, called concurrently --tasks times", "--method"
    )
    tasks: int = _opt("program", 2, "concurrent calls of METHOD", "--tasks")
    args: str | None = _opt(
        "program",
        None,
        "arguments of each call, a Python literal: \"'audit'\" or \"('a', 1)\" "
        "(absent: synthesized from the signature)",
        "--args",
    )
    init_args: str | None = _opt(
        "program",
        None,
        "arguments of CLASS(...), a Python literal (absent: synthesized from the signature)",
        "--init-args",
    )
    invariant: str | None = _opt(
        "program",
        None,
        "a function in FILE taking the object; it must hold after the calls",
        "--invariant",
    )
    instrument: tuple[str, ...] = _opt(
        "program",
        (),
        "also instrument the installed package PKG (top-level import name; repeatable). The "
        "project of FILE (its root: the nearest ancestor with pyproject.toml, setup.cfg, "
        "setup.py or .git) and the current directory are instrumented by default, libraries "
        "are not; pyproject.toml's [tool.chaossloth] instrument = [...] adds packages too",
        "--instrument",
    )

    # -- exploration ------------------------------------------------------------------------
    strategy: str = _opt(
        "exploration",
        "auto",
        "auto: dpor within half the budget, then sampling (pct) with the rest if dpor is not "
        "complete (without a budget, auto is dpor); or one of dpor, pct, pos, random, fifo",
        "--strategy",
        STRATEGIES,
    )
    max_executions: int | None = _opt(
        "exploration",
        None,
        "stop after N executions (default: no limit; the time limit applies)",
        "--max-executions",
    )
    time_limit: float | None = _opt(
        "exploration",
        None,
        f"wall-time budget of the exploration in seconds (default: {DEFAULT_TIME_LIMIT:g} in "
        "the CLI and the pytest plugin unless max_executions is given; no limit in "
        "runner.explore); also the limit of one execution, and of the stages before the "
        "exploration (capture, alphabet), counted from the command's start",
        "--time-limit",
    )
    max_steps: int = _opt(
        "exploration", 10000, "steps per execution before it counts as a livelock", "--max-steps"
    )
    seed: int = _opt(
        "exploration", 0, "seed of the sampling strategies (execution i is reproducible)", "--seed"
    )
    timers: str = _opt(
        "exploration",
        "strict",
        "strict: timers fire in deadline order; relaxed: any pending timer may fire at any point",
        "--timers",
        TIMER_MODES,
    )
    stop_on_failure: bool = _opt(
        "exploration",
        True,
        "stop at the first failing execution (default); --no-stop-on-failure keeps exploring "
        "and counts the failing schedules",
        "--no-stop-on-failure",
    )
    jobs: int = _opt(
        "exploration",
        1,
        "processes that explore side by side: random, pct and pos (and auto's pct phase) split "
        "one sequence of random streams, so the executions tried, and with stop-on-failure the "
        "failure found, are a single process's (pct's change points aside); dpor (and auto's "
        "dpor phase) shares its tree: a process gives a pending branch to a fork of itself, "
        "and complete means every process's part was",
        "--jobs",
    )
    telemetry: bool = _opt(
        "exploration",
        True,
        "run stage 4, the stock-loop failure rate and collision window (default; False in "
        "the pytest plugin); --no-telemetry skips it",
        "--no-telemetry",
    )
    telemetry_budget: float = _opt(
        "exploration",
        2.0,
        "wall-time cap of stage 4's runs on the stock loop, in seconds (the runs stop earlier, "
        "once the failure rate's interval is telemetry_width wide)",
    )
    telemetry_width: float = _opt(
        "exploration",
        0.10,
        "stage 4 runs the stock loop until the failure rate's 95 percent interval is at most this "
        "wide (a share: 0.10 = 10 points) or the telemetry budget is spent",
    )
    sentinel: float | None = _opt(
        "exploration",
        None,
        "share of DPOR's cost spent, once DPOR is complete (strategy dpor or auto), on schedules "
        "chosen without the captured dependencies (pct, then random): a failure there is a bug "
        "DPOR's capture missed. Budget: SHARE x DPOR's executions, at least "
        "SENTINEL_MIN_EXECUTIONS (300), within SHARE x max(DPOR's seconds, the time budget or "
        f"{DEFAULT_TIME_LIMIT:g} s); 0 disables (default: $CHAOSSLOTH_SENTINEL, else "
        "DEFAULT_SENTINEL 0.1)",
        "--sentinel",
    )

    # -- output -----------------------------------------------------------------------------
    json_path: str | None = _opt(
        "output", None, "write the JSON report there ('-': stdout)", "--json"
    )
    mermaid_path: str | None = _opt(
        "output",
        None,
        "write the failing schedule as a Mermaid sequence diagram there",
        "--mermaid",
    )
    sarif_path: str | None = _opt(
        "output",
        None,
        "write the findings as SARIF 2.1.0 there (code scanning: one result per finding, the "
        "failing schedule as its code flow; '-': stdout)",
        "--sarif",
    )
    html_path: str | None = _opt(
        "output",
        None,
        "write a self-contained HTML report there (stages, timeline, findings, collision "
        "window, patch; '-': stdout)",
        "--html",
    )
    schedule_out: str | None = _opt(
        "output",
        None,
        "where to write the failing schedule (default .chaossloth/<file>.<scenario>.schedule.json)",
        "--schedule-out",
    )
    database: str | None = _opt(
        "output",
        ".chaossloth",
        "directory of the failure database: the failing schedules of each program are saved "
        "there and replayed first on its next run ('': none; the pytest "
        "plugin uses <rootdir>/.chaossloth)",
        "--database",
    )
    quiet: bool = _opt("output", False, "print only the verdict line", "--quiet")

    def __post_init__(self) -> None:
        _check_fields(self, NAMES)

    def sentinel_share(self) -> float:
        """The sentinel's share: the option, else $CHAOSSLOTH_SENTINEL, else DEFAULT_SENTINEL
        (a bad value of the variable is an InputError naming it)."""
        if self.sentinel is not None:
            return float(self.sentinel)
        text = os.environ.get("CHAOSSLOTH_SENTINEL", "").strip()
        if not text:
            return DEFAULT_SENTINEL
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        _check_share("CHAOSSLOTH_SENTINEL", value, text)
        return value

    def replace(self, **options: Any) -> Config:
        """A copy with `options` changed; an unknown name or a bad value is an InputError."""
        if not options:
            return self  # frozen: the copy would be equal in every way that can be seen
        if not _NAME_SET.issuperset(options):
            unknown = sorted(set(options) - _NAME_SET)
            raise InputError(
                f"unknown option(s): {', '.join(unknown)} (options: {', '.join(NAMES)})"
            )
        # the same object Config(**changed) would make, with only the changed options checked
        # (a copy is made per exploration; checking every field each time cost more than it)
        copy = object.__new__(Config)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(options)
        _check_fields(copy, options)
        return copy

    def time_budget(self) -> float | None:
        """The commands' time limit: time_limit, else DEFAULT_TIME_LIMIT unless a
        max_executions budget is given."""
        if self.time_limit is not None:
            return self.time_limit
        return None if self.max_executions else DEFAULT_TIME_LIMIT


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"option {name} must be one of {', '.join(choices)}, not {value!r}")


def _check_int(name: str, value: Any, *, minimum: int, below: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(f"option {name} must be an integer of at least {minimum}, not {value!r}")
    if below is not None and value >= below:
        raise InputError(f"option {name} must be at most {below - 1}, not {value!r}")


def _check_share(name: str, value: Any, shown: Any = None) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not 0 <= value < float("inf"):
        shown = value if shown is None else shown
        raise InputError(f"option {name} must be a share of at least 0 (0.1: 10%), not {shown!r}")


def _check_seconds(name: str, value: Any) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not 0 < value < float("inf"):
        raise InputError(f"option {name} must be a positive number of seconds, not {value!r}")


#: The names of every option, in declaration order.
NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Config))
_NAME_SET = frozenset(NAMES)
#: the fields whose annotation __post_init__ checks, (name, annotation), listed once: a
#: Config is made per exploration, and dataclasses.fields() each time cost more than the checks
_TYPED_FIELDS: tuple[tuple[str, str], ...] = tuple(
    (f.name, str(f.type))
    for f in dataclasses.fields(Config)
    if f.type in ("bool", "str | None", "tuple[str, ...]")
)
_TYPED = dict(_TYPED_FIELDS)


def _check_fields(c: Config, names: Iterable[str]) -> None:
    """Checks the options `names` of `c`: their types (bools, strings and tuples of strings
    by their annotation), then the ranges; an InputError names the first bad one."""
    for name in names:
        annotation = _TYPED.get(name)
        if annotation is None:
            continue
        v = getattr(c, name)
        if annotation == "bool" and not isinstance(v, bool):
            raise InputError(f"option {name} must be True or False, not {v!r}")
        if annotation == "str | None" and v is not None and not isinstance(v, str):
            raise InputError(f"option {name} must be a string, not {v!r}")
        if annotation == "tuple[str, ...]" and not (
            isinstance(v, tuple) and all(isinstance(x, str) for x in v)
        ):
            raise InputError(f"option {name} must be a tuple of strings, not {v!r}")
    for name in names:
        check = _RANGES.get(name)
        if check is not None:
            check(getattr(c, name))


def _telemetry_width(w: Any) -> None:
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w <= 1:
        raise InputError(f"option telemetry_width must be a share in (0, 1], not {w!r}")


#: the option -> its range check (the options not here have only their type checked)
_RANGES: dict[str, Callable[[Any], None]] = {
    "strategy": lambda v: _check_choice("strategy", v, ALL_STRATEGIES),
    "timers": lambda v: _check_choice("timers", v, TIMER_MODES),
    "tasks": lambda v: _check_int("tasks", v, minimum=1, below=MAX_TASKS + 1),
    "max_steps": lambda v: _check_int("max_steps", v, minimum=1, below=U64_LIMIT),
    "seed": lambda v: _check_int("seed", v, minimum=0, below=U64_LIMIT),
    "jobs": lambda v: _check_int("jobs", v, minimum=1, below=MAX_JOBS + 1),
    "max_executions": lambda v: (
        None if v is None else _check_int("max_executions", v, minimum=1, below=U64_LIMIT)
    ),
    "time_limit": lambda v: None if v is None else _check_seconds("time_limit", v),
    "telemetry_budget": lambda v: _check_seconds("telemetry_budget", v),
    "telemetry_width": _telemetry_width,
    "sentinel": lambda v: None if v is None else _check_share("sentinel", v),
}

#: Every option at its default.
DEFAULTS = Config()


def names_of(group: str) -> tuple[str, ...]:
    """The options of `group` (see GROUPS), in declaration order."""
    return tuple(f.name for f in dataclasses.fields(Config) if f.metadata["group"] == group)


def help_of(name: str) -> str:
    """The meaning of option `name` (the CLI's help text)."""
    return str(_FIELDS[name].metadata["help"])


def flag_of(name: str) -> str | None:
    """The CLI flag of option `name`, or None if the CLI does not take it."""
    flag = _FIELDS[name].metadata["flag"]
    return None if flag is None else str(flag)


_FIELDS = {f.name: f for f in dataclasses.fields(Config)}


# ------------------------------------------------------------------ environment variables

#: name -> (who reads it, meaning).  Nothing else in the project reads the environment.
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "CHAOSSLOTH_DEBUG": (
        "chaossloth/cli.py",
        (
            "set (to anything non-empty): an internal error shows its Python traceback instead "
            "of one line"
        ),
    ),
    "CHAOSSLOTH_SHARE_AFTER": (
        "chaossloth/share.py",
        (
            "dpor with --jobs: the seconds a process explores before it gives a branch to a "
            "fork (default 0.05; the tests set 0 so that small programs share their trees)"
        ),
    ),
    "CHAOSSLOTH_SENTINEL": (
        "chaossloth/config.py",
        (
            "the sentinel's share when the sentinel option is not given (Config.sentinel_share; "
            "0 disables it; default 0.1)"
        ),
    ),
    "PYTHONHASHSEED": (
        "chaossloth/__init__.py",
        (
            "unset: the chaossloth command re-executes itself with PYTHONHASHSEED=0, so that "
            "the order of a set of strings is the same in every run and a schedule that follows "
            "it replays; set (to anything, 'random' included): used as it is"
        ),
    ),
    "TERM": (
        "chaossloth/progress.py",
        "'dumb': no progress line even on a terminal",
    ),
    "CHAOSSLOTH_EXPECT_INSTALLED": (
        "tests/test_package.py",
        (
            "set (make test sets it): the suite must be testing a regular install of the "
            "package (site-packages), never the source tree"
        ),
    ),
    "CHAOSSLOTH_SOUNDNESS_EXAMPLES": (
        "tests/test_dpor_asyncio.py",
        "generated asyncio programs per DPOR-vs-brute-force property (default 20)",
    ),
    "CHAOSSLOTH_MACHINERY_EXAMPLES": (
        "tests/test_dpor_asyncio.py",
        "generated programs per asyncio-machinery property (default 15)",
    ),
    "CHAOSSLOTH_PRIMITIVE_EXAMPLES": (
        "tests/test_dpor_primitives.py",
        "generated semaphore programs explored by DPOR and by brute force (default 10)",
    ),
    "CHAOSSLOTH_SOUNDNESS_CAP": (
        "tests/test_dpor_asyncio.py",
        "execution cap of the brute-force side of those properties (default 1500)",
    ),
    "CHAOSSLOTH_FUZZ_MUTATIONS": (
        "tests/test_hostile_schedule_fuzz.py",
        "mutated schedule files the fuzzer replays (default 200; 20000 for a long run)",
    ),
    "CHAOSSLOTH_FUZZ_SEED": (
        "tests/test_hostile_schedule_fuzz.py",
        "seed of the fuzzer's mutations (default 20261201)",
    ),
    "CHAOSSLOTH_FUZZ_MEMORY_MB": (
        "tests/test_hostile_schedule_fuzz.py",
        "address-space cap of the fuzzer's replay process, in MB (default 1536)",
    ),
    "CHAOSSLOTH_GRAMMAR_FAST": (
        "tests/test_soundness_grammar.py",
        "generated programs per construct class in the fast (default) sample (default 6)",
    ),
    "CHAOSSLOTH_GRAMMAR_EXAMPLES": (
        "tests/test_soundness_grammar.py",
        "generated programs per construct class in the slow sample (default 15; raise it)",
    ),
    "CHAOSSLOTH_GRAMMAR_CAP": (
        "tests/test_soundness_grammar.py",
        "execution cap of the brute-force side of the grammar properties (default 1500)",
    ),
    "CHAOSSLOTH_GRAMMAR_SHRINK": (
        "tests/test_soundness_grammar.py",
        "set: let Hypothesis shrink a failing program (slower; off by default)",
    ),
    "CHAOSSLOTH_GRAMMAR_RANDOM": (
        "tests/test_soundness_grammar.py",
        "set: draw new programs each run instead of the derandomized sample",
    ),
    "CHAOSSLOTH_BRANCHING_PROGRAMS": (
        "tests/test_soundness_branching.py",
        "how many generated branching programs to compare with brute force (default 200)",
    ),
    "CHAOSSLOTH_BRANCHING_SEED": (
        "tests/test_soundness_branching.py",
        "the seed of the generated branching programs (default 3)",
    ),
    "CHAOSSLOTH_SHARE_PROGRAMS": (
        "tests/test_share.py",
        "how many generated branching programs dpor on 2 and 3 processes checks (default 40)",
    ),
    "CHAOSSLOTH_SHARE_SEED": (
        "tests/test_share.py",
        "the seed of those programs (default 11)",
    ),
    "CHAOSSLOTH_SOUNDNESS_RANDOM": (
        "tests/test_dpor_asyncio.py",
        "set: Hypothesis draws new programs each run (default: derandomized, reproducible)",
    ),
    "CS_DPOR_PROGRAMS": (
        "tests/c/test_dpor.c",
        "generated C programs per differential family (DPOR vs exhaustive)",
    ),
    "CS_DPOR_SEED": (
        "tests/c/test_dpor.c",
        "xored into the differential tests' seed (0: the fixed seed)",
    ),
    "CS_DPOR_STEPS": (
        "tests/c/test_dpor.c",
        "steps per generated C program (capped at 14)",
    ),
    "CS_BENCH_ROW_SECONDS": (
        "bench/dpor_classic.c",
        "time budget of one row of the classic DPOR benchmark",
    ),
    "CS_BENCH_QUICK": (
        "bench/dpor_classic.c",
        "'1': the quick (CI) variant of the classic DPOR benchmark",
    ),
}


def debug() -> bool:
    """CHAOSSLOTH_DEBUG is set: internal errors show their traceback."""
    return bool(os.environ.get("CHAOSSLOTH_DEBUG"))
