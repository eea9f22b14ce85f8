"""Scenarios: what one execution runs.

A *scenario* is an ``async def`` with no required parameters, defined in the user's file; the
file is loaded through the capture instrumentation so that its reads and writes are reported to
the engine.  A *workload* (``--cls/--method``) is built from a class instead: construct
``CLASS(*init_args)`` and run K concurrent ``METHOD(*args)`` calls with ``asyncio.gather``.

Every user-facing problem becomes one :class:`~chaossloth.errors.InputError` with a readable
message; nothing here lets a traceback from ChaosSloth's internals reach the user.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from chaossloth import serial
from chaossloth.capture.importer import load_file
from chaossloth.config import Config
from chaossloth.errors import InputError
from chaossloth.loop import ControlledLoop
from chaossloth.serial import Call, SerialError, SerialOracle

ScenarioFactory = Callable[[], Coroutine[Any, Any, Any]]


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file's bytes (the program fingerprint in schedule files)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _check_source(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: not a file")
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno if exc.lineno is not None else "?"
        raise InputError(f"{path}:{line}: syntax error: {exc.msg}") from None
    except ValueError as exc:  # e.g. source containing NUL bytes
        raise InputError(f"{path}: cannot compile the file: {exc}") from None


def _user_frame_summary(exc: BaseException, path: Path) -> str:
    """`file:line` of the innermost frame of the user's file in exc's traceback, or ''."""
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == path:
            where = f"{path}:{frame.lineno}"
    return where


def load_module(path: str | os.PathLike[str]) -> ModuleType:
    """Loads the user's file as an instrumented module (through the capture import hook: a file
    loaded without instrumentation would report no access, and DPOR would call any program
    race-free after one execution).

    The file's directory is put on ``sys.path`` (as ``python file.py`` would) so that it can
    import its siblings.
    """
    p = Path(path).resolve()
    _check_source(p)
    directory = str(p.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        return load_file(str(p))
    except InputError:
        raise
    except SyntaxError as exc:
        line = exc.lineno if exc.lineno is not None else "?"
        raise InputError(f"{exc.filename or p}:{line}: syntax error: {exc.msg}") from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        where = _user_frame_summary(exc, p) or str(p)
        raise InputError(f"{where}: loading the file raised {type(exc).__name__}: {exc}") from None


def _defined_in(obj: Any, module: ModuleType, path: Path) -> bool:
    code = getattr(obj, "__code__", None)
    if code is not None:
        try:
            return Path(code.co_filename).resolve() == path
        except OSError:
            return False
    return getattr(obj, "__module__", None) == module.__name__


def _required_params(fn: Callable[..., Any]) -> list[str]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [
        n
        for n, prm in sig.parameters.items()
        if prm.default is inspect.Parameter.empty
        and prm.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def available_scenarios(module: ModuleType, path: str | os.PathLike[str]) -> list[str]:
    """Names of the async functions with no required parameters defined in the file."""
    p = Path(path).resolve()
    names = []
    for name, obj in vars(module).items():
        if name.startswith("__"):
            continue
        if (
            inspect.iscoroutinefunction(obj)
            and _defined_in(obj, module, p)
            and not _required_params(obj)
        ):
            names.append(name)
    return sorted(names)


@dataclass
class Program:
    """What the runner needs to know about the program under test, for reports and files."""

    path: str
    sha256: str
    factory: ScenarioFactory
    scenario: str | None = None
    cls: str | None = None
    method: str | None = None
    tasks: int | None = None
    args: str | None = None
    init_args: str | None = None
    oracle: Callable[[Any], Any] | None = None
    module: ModuleType | None = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        """The `program` section of a schedule file."""
        d: dict[str, Any] = {"path": self.path, "sha256": self.sha256}
        if self.scenario is not None:
            d["scenario"] = self.scenario
        else:
            d.update(
                cls=self.cls,
                method=self.method,
                tasks=self.tasks,
                args=self.args,
                init_args=self.init_args,
            )
        return d


def find_scenario(module: ModuleType, path: str | os.PathLike[str], name: str | None) -> str:
    """Validates `name` (or picks the only scenario, or `main`) and returns it."""
    p = Path(path).resolve()
    available = available_scenarios(module, p)
    listing = ", ".join(available) if available else "none"
    if name is None:
        if len(available) == 1:
            return available[0]
        if "main" in available:
            return "main"
        if not available:
            raise InputError(
                f"{p}: no scenario found (a scenario is an `async def` with no parameters)"
            )
        raise InputError(f"{p}: several scenarios, name one of: {listing}")
    obj = vars(module).get(name)
    if obj is None:
        raise InputError(f"{p}: no scenario named {name!r} (available: {listing})")
    if not callable(obj) or not (
        inspect.iscoroutinefunction(obj) or inspect.isfunction(obj) or inspect.isclass(obj)
    ):
        raise InputError(f"{p}: {name!r} is not a function (available scenarios: {listing})")
    if not inspect.iscoroutinefunction(obj):
        what = "a class" if inspect.isclass(obj) else "not an `async def`"
        raise InputError(
            f"{p}: {name!r} is {what}; a scenario must be an `async def` (available: {listing})"
        )
    params = _required_params(obj)
    if params:
        raise InputError(
            f"{p}: scenario {name!r} takes parameters ({', '.join(params)}); "
            "a scenario must take none"
        )
    return name


def load_scenario(path: str | os.PathLike[str], name: str | None = None) -> Program:
    """Loads the file and returns the program running scenario `name`."""
    p = Path(path).resolve()
    module = load_module(p)
    chosen = find_scenario(module, p, name)
    fn = vars(module)[chosen]
    return Program(path=str(p), sha256=file_sha256(p), factory=fn, scenario=chosen, module=module)


# ------------------------------------------------------------------ workloads


def parse_literal(text: str | None, what: str) -> tuple[Any, ...]:
    """Parses a Python literal given on the command line into a tuple of arguments.

    A tuple (``"('a', 1)"``) or list gives several positional arguments; any other literal
    (``"'audit'"``, ``"3"``) is the single argument; empty text gives none.
    """
    if text is None or not text.strip():
        return ()
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise InputError(
            f"{what} {text!r} is not a Python literal (examples: \"'audit'\", \"('a', 1)\", "
            '"[1, 2]")'
        ) from None
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,)


@dataclass
class Workload:
    """K concurrent calls of one async method on one fresh object."""

    cls_obj: type
    cls: str
    method: str
    tasks: int
    args: tuple[Any, ...]
    init_args: tuple[Any, ...]

    async def concurrent(self) -> tuple[Any, list[Any]]:
        """The scenario: the calls run as K tasks (children of the scenario's task); a call
        that raised is an outcome, compared like a return value against the serial runs."""
        obj = self.cls_obj(*self.init_args)
        bound = getattr(obj, self.method)
        results = await asyncio.gather(
            *(bound(*self.args) for _ in range(self.tasks)), return_exceptions=True
        )
        return obj, list(results)

    def make_oracle(self) -> Callable[[Any], str | None]:
        oracle = SerialOracle(
            factory=lambda: self.cls_obj(*self.init_args),
            calls=[Call(self.method, self.args)] * self.tasks,
            run=_run_plain,
        )

        def check(value: Any) -> str | None:
            obj, results = value
            try:
                return oracle.check(obj, results)
            except SerialError as exc:
                raise InputError(f"{self.cls}.{self.method}: {exc}") from None

        return check


def _run_plain(coro: Coroutine[Any, Any, Any]) -> Any:
    """Runs a coroutine on the controlled loop without an explorer (virtual time, stock
    order): the serial executions of the serializability oracle."""
    loop = ControlledLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def load_workload(
    path: str | os.PathLike[str],
    cls: str,
    method: str,
    tasks: int = 2,
    args: str | None = None,
    init_args: str | None = None,
) -> Program:
    """Loads the file and builds the `--cls/--method` workload with its serializability oracle."""
    p = Path(path).resolve()
    if not isinstance(tasks, int) or tasks < 1:
        raise InputError(f"the number of concurrent calls must be at least 1 (got {tasks!r})")
    call_args = parse_literal(args, "--args")
    ctor_args = parse_literal(init_args, "--init-args")
    module = load_module(p)
    cls_obj = vars(module).get(cls)
    if cls_obj is None or not inspect.isclass(cls_obj):
        classes = sorted(
            n
            for n, o in vars(module).items()
            if inspect.isclass(o) and getattr(o, "__module__", None) == module.__name__
        )
        listing = ", ".join(classes) if classes else "none"
        what = "no class" if cls_obj is None else "not a class:"
        raise InputError(f"{p}: {what} {cls!r} (classes defined there: {listing})")
    fn = getattr(cls_obj, method, None)
    if fn is None:
        methods = sorted(
            n
            for n, o in vars(cls_obj).items()
            if inspect.iscoroutinefunction(o) and not n.startswith("__")
        )
        listing = ", ".join(methods) if methods else "none"
        raise InputError(f"{p}: class {cls} has no method {method!r} (async methods: {listing})")
    if not inspect.iscoroutinefunction(fn):
        raise InputError(
            f"{p}: {cls}.{method} is not an `async def`; the workload runs concurrent "
            "calls of an async method"
        )
    try:
        inspect.signature(cls_obj).bind(*ctor_args)
    except TypeError as exc:
        raise InputError(
            f"{cls}{ctor_args!r}: the constructor does not accept these --init-args ({exc})"
        ) from None
    except ValueError:
        pass
    try:
        inspect.signature(fn).bind(None, *call_args)
    except TypeError as exc:
        raise InputError(
            f"{cls}.{method}{call_args!r}: the method does not accept these --args ({exc})"
        ) from None
    except ValueError:
        pass
    work = Workload(cls_obj, cls, method, tasks, call_args, ctor_args)
    return Program(
        path=str(p),
        sha256=file_sha256(p),
        factory=work.concurrent,
        cls=cls,
        method=method,
        tasks=tasks,
        args=args,
        init_args=init_args,
        oracle=work.make_oracle(),
        module=module,
    )


# ------------------------------------------------------------------ the program of a run


def load(path: str, config: Config) -> Program:
    """Loads the program under test that `config` names: its scenario, or its --cls/--method
    workload (``tasks``, ``args``, ``init_args``)."""
    c = config
    if c.cls is not None or c.method is not None:
        if c.cls is None or c.method is None:
            raise InputError("--cls and --method go together (name the class and its method)")
        if c.scenario is not None:
            raise InputError("give either --scenario or --cls/--method, not both")
        if c.tasks > serial.MAX_CALLS:
            raise InputError(
                f"--tasks {c.tasks}: the serializability oracle compares with every serial "
                f"order of the calls, so at most {serial.MAX_CALLS} concurrent calls are supported"
            )
        return load_workload(path, c.cls, c.method, c.tasks, c.args, c.init_args)
    if c.args is not None or c.init_args is not None:
        raise InputError("--args and --init-args need --cls and --method")
    return load_scenario(path, c.scenario)


def oracle_with_invariant(program: Program, name: str | None) -> Callable[[Any], Any] | None:
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
