"""Schedule files: a failing schedule as versioned JSON, and its replay.

Format (version 1)::

    {
      "format": "chaossloth-schedule",
      "version": 1,
      "program": {"path": ..., "sha256": ..., "scenario": ...}      # or cls/method/tasks/args
      "strategy": "dpor", "seed": 0, "timers": "strict",
      "actors": [[null, 0], [0, 0], ...],       # creation path (parent, index) of each actor id
      "steps": [{"actor": 0, "name": "Task main"}, ...],
      "failure": {"kind": ..., "type": ..., "message": ..., "traceback": ..., "task": ...}
    }

Actor ids are dense in first-creation order, which depends on the exploration that found the
schedule; "actors" records the creation path of every id so that a replay in a fresh process
interns the same paths in the same order and the ids mean the same actors.  Files are read and
written with the standard library only; every problem with a file is one InputError.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaossloth import errors, scenario
from chaossloth.config import DEFAULTS, MAX_TASKS, TIMER_MODES, U64_LIMIT
from chaossloth.errors import InputError
from chaossloth.report import write_output, write_own_file
from chaossloth.runner import (
    NONDETERMINISM_HINT,
    ExecutionResult,
    Failure,
    Step,
    divergence_text,
    run_once,
)

FORMAT = "chaossloth-schedule"
VERSION = 1


class ProgramChangedWarning(UserWarning):
    """The program's file differs from the one the schedule was recorded on."""


@dataclass
class ScheduleFile:
    program: dict[str, Any]
    strategy: str
    seed: int
    timers: str
    steps: list[Step]
    actors: list[tuple[int | None, int]] = field(default_factory=list)
    failure: Failure | None = None
    max_steps: int | None = None

    @property
    def schedule(self) -> list[int]:
        return [s.actor for s in self.steps]

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "program": self.program,
            "strategy": self.strategy,
            "seed": self.seed,
            "timers": self.timers,
            "actors": [[p, i] for p, i in self.actors],
            "steps": [{"actor": s.actor, "name": s.name} for s in self.steps],
            "failure": self.failure.to_json() if self.failure is not None else None,
        }
        if self.max_steps is not None:
            d["max_steps"] = self.max_steps
        return d


def from_execution(
    result: ExecutionResult,
    program: dict[str, Any],
    *,
    timers: str = "strict",
    max_steps: int | None = None,
) -> ScheduleFile:
    return ScheduleFile(
        program=dict(program),
        strategy=result.strategy,
        seed=result.seed,
        timers=timers,
        steps=list(result.steps),
        actors=list(result.actor_paths),
        failure=result.failure,
        max_steps=max_steps,
    )


def write(sched: ScheduleFile, path: str | os.PathLike[str], *, chosen: bool = True) -> Path:
    """Writes the file; returns `path`.  A path the user `chosen` (--schedule-out) follows
    report.write_output (atomically, a symlink followed, a FIFO or device written in place, the
    program's files refused); ChaosSloth's own default path follows report.write_own_file (no
    symlink followed).  OSError when it cannot be written."""
    text = json.dumps(sched.to_json(), indent=1, sort_keys=False) + "\n"
    if chosen:
        write_output(path, text)
    else:
        write_own_file(path, text)
    return Path(path)


#: actor ids and creation indexes are 32-bit in the engine
_ACTOR_LIMIT = 2**32 - 1


def _need(d: dict[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    if key not in d:
        raise InputError(f"{where}: missing key {key!r}")
    return _typed(d[key], key, types, where)


def _typed(v: Any, key: str, types: type | tuple[type, ...], where: str) -> Any:
    """v if it has one of `types` (a bool is not an int unless bool is named)."""
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in _as_tuple(types)):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in _as_tuple(types))
        raise InputError(f"{where}: {key!r} must be {names}, not {_type_name(v)}")
    return v


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _as_tuple(t: type | tuple[type, ...]) -> tuple[type, ...]:
    return t if isinstance(t, tuple) else (t,)


def _int_in(d: dict[str, Any], key: str, lo: int, hi: int, where: str, default: Any = ...) -> Any:
    """d[key], an integer in [lo, hi] (`default` when absent, if given)."""
    if key not in d and default is not ...:
        return default
    v = _need(d, key, int, where)
    if not lo <= v <= hi:
        shown = f", not {v}" if abs(v) < 10**30 else ""
        raise InputError(f"{where}: {key!r} must be an integer from {lo} to {hi}{shown}")
    return v


def _text(v: Any, key: str, where: str) -> str:
    """A string that can name a file or a Python object: no NUL, valid UTF-8 (no lone
    surrogate), not empty."""
    _typed(v, key, str, where)
    if not v or "\x00" in v:
        raise InputError(f"{where}: {key!r} must be a non-empty string without NUL characters")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{where}: {key!r} is not valid Unicode (a lone surrogate)") from None
    return v


def _check_program(program: dict[str, Any], where: str) -> None:
    """Every field of the schedule's program, by type and range, before any is acted on."""
    _text(_need(program, "path", str, where), "path", where)
    _need(program, "sha256", str, where)
    if "scenario" in program:
        _text(program["scenario"], "scenario", where)
    elif "cls" in program and "method" in program:
        _text(program["cls"], "cls", where)
        _text(program["method"], "method", where)
        _int_in(program, "tasks", 1, MAX_TASKS, where, default=None)
        for key in ("args", "init_args"):
            if program.get(key) is not None:
                _typed(program[key], key, str, where)
    else:
        raise InputError(f"{where}: needs 'scenario', or 'cls' and 'method'")
    if program.get("invariant") is not None:
        _text(program["invariant"], "invariant", where)
    instrument = program.get("instrument", [])
    if not isinstance(instrument, list):
        raise InputError(f"{where}: 'instrument' must be a list of package names")
    for i, name in enumerate(instrument):
        _text(name, f"instrument[{i}]", where)


def _check_failure(failure: Any, where: str) -> None:
    if failure is None:
        return
    if not isinstance(failure, dict):
        raise InputError(f"{where}: 'failure' must be an object or null")
    for key in ("kind", "type", "message", "traceback"):
        if key in failure:
            _typed(failure[key], key, str, f"{where}: failure")
    if failure.get("task") is not None:
        _typed(failure["task"], "task", str, f"{where}: failure")
    if failure.get("details") is not None:
        _typed(failure["details"], "details", dict, f"{where}: failure")


def parse(data: Any, source: str = "schedule") -> ScheduleFile:
    """Validates a decoded JSON document; `source` names it in messages.  Every field is
    checked for type and range before anything acts on it: a problem is one InputError naming
    the field and what was expected."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: not a ChaosSloth schedule (expected a JSON object)")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise InputError(
            f"{source}: not a ChaosSloth schedule (format is {fmt!r:.60}, expected {FORMAT!r})"
        )
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"{source}: missing or non-integer 'version'")
    if version != VERSION:
        shown = f" {version}" if abs(version) < 10**20 else ""
        raise InputError(
            f"{source}: schedule format version{shown} is not supported (this ChaosSloth "
            f"reads version {VERSION})"
        )
    program = _need(data, "program", dict, source)
    _check_program(program, f"{source}: program")
    strategy = _need(data, "strategy", str, source)
    seed = _int_in(data, "seed", 0, U64_LIMIT - 1, source)
    timers = _need(data, "timers", str, source)
    if timers not in TIMER_MODES:
        raise InputError(f"{source}: 'timers' must be 'strict' or 'relaxed', not {timers!r:.60}")
    raw_steps = _need(data, "steps", list, source)
    steps: list[Step] = []
    for i, s in enumerate(raw_steps):
        where = f"{source}: steps[{i}]"
        if not isinstance(s, dict):
            raise InputError(f"{where}: must be an object with 'actor' and 'name'")
        actor = _int_in(s, "actor", 0, _ACTOR_LIMIT - 1, where)
        name = s.get("name", f"actor {actor}")
        steps.append(Step(actor, _typed(name, "name", str, where)))
    actors: list[tuple[int | None, int]] = []
    raw_actors = data.get("actors", [])
    if not isinstance(raw_actors, list):
        raise InputError(f"{source}: 'actors' must be a list of [parent, index] pairs")
    seen: set[tuple[int | None, int]] = set()
    for i, pair in enumerate(raw_actors):
        ok = (
            isinstance(pair, list)
            and len(pair) == 2
            and (
                pair[0] is None
                or (isinstance(pair[0], int) and not isinstance(pair[0], bool) and 0 <= pair[0] < i)
            )
            and isinstance(pair[1], int)
            and not isinstance(pair[1], bool)
            and 0 <= pair[1] <= _ACTOR_LIMIT
        )
        if not ok:
            raise InputError(
                f"{source}: actors[{i}] must be [parent id < {i} or null, index from 0 to "
                f"{_ACTOR_LIMIT}]"
            )
        path = (pair[0], pair[1])
        if path in seen:
            raise InputError(f"{source}: actors[{i}] repeats the creation path {list(path)}")
        seen.add(path)
        actors.append(path)
    if actors:
        for i, s in enumerate(steps):
            if s.actor >= len(actors):
                raise InputError(f"{source}: steps[{i}] names actor {s.actor}, not in 'actors'")
    failure = data.get("failure")
    _check_failure(failure, source)
    max_steps = (
        None
        if data.get("max_steps") is None
        else _int_in(data, "max_steps", 1, U64_LIMIT - 1, source)
    )
    return ScheduleFile(
        program=program,
        strategy=strategy,
        seed=seed,
        timers=timers,
        steps=steps,
        actors=actors,
        failure=Failure.from_json(failure) if failure is not None else None,
        max_steps=max_steps,
    )


def read(path: str | os.PathLike[str]) -> ScheduleFile:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such schedule file") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, not a schedule file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read the schedule file ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{p}:{exc.lineno}: not valid JSON ({exc.msg}); is this a ChaosSloth schedule?"
        ) from None
    except RecursionError:
        raise InputError(f"{p}: the file nests too deeply (not a ChaosSloth schedule)") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise InputError(f"{p}: not a ChaosSloth schedule ({exc})") from None
    if _depth(data) > MAX_JSON_DEPTH:  # what json accepts depends on the interpreter: one rule
        raise InputError(f"{p}: the file nests too deeply (not a ChaosSloth schedule)")
    return parse(data, str(p))


def load_program(sched: ScheduleFile, path: str | os.PathLike[str] | None = None) -> Any:
    """Loads the schedule's program (from `path` if given, else the recorded path); warns with
    ProgramChangedWarning if the file's SHA-256 is not the recorded one."""
    prog = sched.program
    # parse() checked every field's type and range
    file = Path(path) if path is not None else Path(prog["path"])
    instrument = prog.get("instrument", [])
    if "scenario" in prog:
        program = scenario.load_scenario(file, prog["scenario"], instrument)
    else:
        tasks = prog.get("tasks", DEFAULTS.tasks)
        program = scenario.load_workload(
            file,
            prog["cls"],
            prog["method"],
            tasks,
            prog.get("args"),
            prog.get("init_args"),
            instrument,
        )
    if program.sha256 != prog["sha256"]:
        warnings.warn(
            f"{file} changed since the schedule was recorded (sha256 differs); replaying anyway",
            ProgramChangedWarning,
            stacklevel=2,
        )
    return program


def replay(
    sched: ScheduleFile,
    factory: Callable[[], Any],
    *,
    oracle: Callable[[Any], Any] | None = None,
    max_steps: int | None = None,
) -> ExecutionResult:
    """Replays the schedule once.  Raises ScheduleDivergedError (a NondeterminismError) naming
    the step, the expected actor and what was enabled if the program does not follow it."""
    steps_budget = (
        max_steps or sched.max_steps or max(DEFAULTS.max_steps, 2 * len(sched.steps) + 10)
    )
    try:
        return run_once(
            factory,
            schedule=sched.schedule,
            actor_paths=sched.actors or None,
            timers=sched.timers,
            max_steps=steps_budget,
            oracle=oracle,
            detailed=True,
        )
    except errors.NondeterminismError as exc:
        d = dict(getattr(exc, "divergence", None) or {})
        names = {s.actor: s.name for s in sched.steps}
        if isinstance(d.get("expected"), int) and d["expected"] in names:
            d["expected_name"] = names[d["expected"]]
        msg = (
            f"replay diverged: {divergence_text(d, len(sched.steps))}. {NONDETERMINISM_HINT} "
            "Or the program changed since the schedule was recorded."
        )
        enabled = d.get("enabled")
        err = errors.ScheduleDivergedError(
            msg,
            step=d.get("step"),
            expected=d.get("expected"),
            enabled=list(enabled) if isinstance(enabled, (list, tuple)) else None,
        )
        err.divergence = d  # type: ignore[attr-defined]
        raise err from None


#: the deepest JSON nesting a schedule file may have (a real one nests 4 levels)
MAX_JSON_DEPTH = 1000


def _depth(data: Any) -> int:
    """The nesting depth of decoded JSON (a scalar is 0), without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(data, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict):
            todo += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            todo += [(v, depth + 1) for v in item]
        else:
            continue
        deepest = max(deepest, depth + 1)
    return deepest
