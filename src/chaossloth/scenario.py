"""Scenarios: what one execution runs.

A *scenario* is an ``async def`` with no required parameters, defined in the user's file; the
file is loaded through the capture instrumentation so that its reads and writes are reported to
the engine.  A *workload* (``--cls/--method``) is built from a class instead: construct
``CLASS(*init_args)`` and run K concurrent ``METHOD(*args)`` calls with ``asyncio.gather``.

Every user-facing problem becomes one :class:`~chaossloth.errors.InputError` with a readable
message; nothing here lets a traceback from ChaosSloth's internals reach the user.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import hashlib
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from chaossloth import arguments, serial
from chaossloth.capture import escapes, importer
from chaossloth.capture.importer import Activation, load_file
from chaossloth.config import Config
from chaossloth.errors import InputError
from chaossloth.loop import ControlledLoop
from chaossloth.serial import Call, SerialError, SerialOracle

ScenarioFactory = Callable[[], Coroutine[Any, Any, Any]]


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file's bytes (the program fingerprint in schedule files)."""
    return sha256_of(Path(path).read_bytes())


def sha256_of(data: bytes) -> str:
    """The program fingerprint of a file's bytes already read (see :func:`file_sha256`)."""
    return hashlib.sha256(data).hexdigest()


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


def load_module(
    path: str | os.PathLike[str],
    instrument: Sequence[str] = (),
    rootdir: str | os.PathLike[str] | None = None,
) -> ModuleType:
    """Loads the user's file as an instrumented module (through the capture import hook: a file
    loaded without instrumentation would report no access, and DPOR would call any program
    race-free after one execution).  See :func:`load_instrumented`."""
    return load_instrumented(path, instrument, rootdir)[0]


def load_instrumented(
    path: str | os.PathLike[str],
    instrument: Sequence[str] = (),
    rootdir: str | os.PathLike[str] | None = None,
    also: Sequence[str] = (),
) -> tuple[ModuleType, Activation]:
    """Loads the user's file as an instrumented module with its project instrumented (the
    project of the file and of `rootdir`, pytest's rootdir, the current directory, and the
    installed packages of `instrument` and of pyproject.toml's ``[tool.chaossloth]``: see
    :mod:`chaossloth.capture.importer`); returns the module and the activation of that scope
    (:meth:`~chaossloth.capture.importer.Activation.restore` puts the modules imported before
    back).  An unknown package name is an InputError.

    The file's directory is put on ``sys.path`` (as ``python file.py`` would) so that it can
    import its siblings.  `also`: top-level packages re-imported instrumented although the
    file does not reach them (those a pytest fixture's conftest.py reaches).
    """
    p = Path(path).resolve()
    _check_source(p)
    scope = importer.scope_for(p, instrument, rootdir)
    directory = str(p.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    importer.begin_program()
    activation = importer.activate(scope, p, also=also)
    try:
        module = load_file(str(p), siblings=False)
        unseen = activation.unseen()
        if unseen:
            # imported before the run by a way the static reading of the imports missed: load
            # again with their packages re-imported too
            activation.restore()
            activation = importer.activate(scope, p, also=[*also, *unseen])
            module = load_file(str(p), siblings=False)
            unseen = activation.unseen()
        if unseen:
            raise InputError(
                f"{p}: {', '.join(unseen)} would run uninstrumented: imported before the run "
                "and not re-imported instrumented (import it by name in the file)"
            )
        escapes.raise_if_called()  # the file's own top-level code called os._exit
        importer.program_loaded()
        return module, activation
    except BaseException as exc:  # noqa: BLE001 - re-raised as the user is told it
        activation.restore()
        importer.end_program()
        raise _load_error(exc, p) from None


def _load_error(exc: BaseException, p: Path) -> BaseException:
    """What loading the user's file raised, as the user is told it: one InputError, except an
    interrupt or exit."""
    escaped = escapes.take()
    if escaped is not None:  # whatever the file's code did with the ProcessEnding
        return InputError(escaped)
    if isinstance(exc, (InputError, KeyboardInterrupt, SystemExit)):
        return exc
    if isinstance(exc, SyntaxError):
        line = exc.lineno if exc.lineno is not None else "?"
        return InputError(f"{exc.filename or p}:{line}: syntax error: {exc.msg}")
    where = _user_frame_summary(exc, p) or str(p)
    return InputError(f"{where}: loading the file raised {type(exc).__name__}: {exc}")


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
    #: the literal text of the call arguments (given with --args, or synthesized); None: none
    args: str | None = None
    init_args: str | None = None
    #: the arguments were synthesized from the signature (the option was absent)
    args_synthesized: bool = False
    init_args_synthesized: bool = False
    oracle: Callable[[Any], Any] | None = None
    #: the --cls/--method workload (its parsed or synthesized argument values), or None
    workload: Workload | None = field(default=None, repr=False)
    module: ModuleType | None = field(default=None, repr=False)
    #: the installed packages instrumented on request (--instrument, pyproject.toml)
    instrument: tuple[str, ...] = ()
    #: the instrumented scope of the run; `release` ends it
    imports: Activation | None = field(default=None, repr=False)
    released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Ends the run's instrumentation scope: the modules imported before the program was
        loaded are back in ``sys.modules`` (the pytest plugin, after each test)."""
        if self.imports is not None and not self.released:
            self.released = True
            self.imports.restore()
            importer.end_program()

    def instrumented_modules(self) -> list[str]:
        """The names of the modules this program runs instrumented (so far: a module the
        program imports later is instrumented when it is imported), sorted."""
        names = set(self.imports.instrumented()) if self.imports is not None else set()
        if self.module is not None:
            names.add(self.module.__name__)
        return sorted(names)

    def describe(self) -> dict[str, Any]:
        """The `program` section of a schedule file."""
        d: dict[str, Any] = {"path": self.path, "sha256": self.sha256}
        if self.instrument:
            d["instrument"] = list(self.instrument)
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
            if self.args_synthesized:
                d["args_synthesized"] = True
            if self.init_args_synthesized:
                d["init_args_synthesized"] = True
        return d

    def arguments_line(self) -> str | None:
        """Stage 1's line naming the calls of a workload (None for a scenario)."""
        if self.cls is None or self.method is None or self.tasks is None:
            return None
        return arguments.arguments_line(
            self.cls,
            self.method,
            self.tasks,
            self.args,
            self.init_args,
            self.args_synthesized,
            self.init_args_synthesized,
        )


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


def load_scenario(
    path: str | os.PathLike[str],
    name: str | None = None,
    instrument: Sequence[str] = (),
    rootdir: str | os.PathLike[str] | None = None,
) -> Program:
    """Loads the file (its project instrumented, see :func:`load_instrumented`) and returns the
    program running scenario `name`."""
    p = Path(path).resolve()
    module, imports = load_instrumented(p, instrument, rootdir)
    try:
        chosen = find_scenario(module, p, name)
    except BaseException:
        imports.restore()
        importer.end_program()
        raise
    fn = vars(module)[chosen]
    return Program(
        path=str(p),
        sha256=file_sha256(p),
        factory=fn,
        scenario=chosen,
        module=module,
        instrument=tuple(instrument),
        imports=imports,
    )


# ------------------------------------------------------------------ workloads


def parse_literal(
    text: str | None, what: str, namespace: dict[str, Any] | None = None
) -> tuple[Any, ...]:
    """Parses a Python literal given on the command line into a tuple of arguments (see
    :func:`chaossloth.arguments.parse`: names in it must be Enum members of `namespace`).

    A tuple (``"('a', 1)"``) or list gives several positional arguments; any other literal
    (``"'audit'"``, ``"3"``) is the single argument; empty text gives none.
    """
    return arguments.parse(text, what, namespace)


@dataclass
class Workload:
    """K concurrent calls of one async method on one fresh object.

    Every call, and the constructor of every object, gets its own deep copy of the argument
    values (as the literal written in each call would give): a mutable argument (``[]``) shared
    by the calls, the executions or the serial runs would carry one's mutations into the
    next, and a race on the argument would be reported as one of the class.  The serial
    oracle copies each call's arguments the same way (:class:`~chaossloth.serial.Call`)."""

    cls_obj: type
    cls: str
    method: str
    tasks: int
    args: tuple[Any, ...]
    init_args: tuple[Any, ...]

    def __post_init__(self) -> None:
        #: the argument tuples a deep copy gives back unchanged (see _copy_is_identity): then
        #: the tuple itself is passed, the very objects a deep copy would give
        self._init_shared = _copy_is_identity(self.init_args)
        self._args_shared = _copy_is_identity(self.args)

    def construct(self) -> Any:
        """A fresh object, from a fresh copy of the constructor's arguments."""
        init_args = self.init_args if self._init_shared else copy.deepcopy(self.init_args)
        return self.cls_obj(*init_args)

    def call_args(self) -> tuple[Any, ...]:
        """A fresh copy of one call's arguments."""
        return self.args if self._args_shared else copy.deepcopy(self.args)

    async def concurrent(self) -> tuple[Any, list[Any]]:
        """The scenario: the calls run as K tasks (children of the scenario's task); a call
        that raised is an outcome, compared like a return value against the serial runs."""
        obj = self.construct()
        bound = getattr(obj, self.method)
        results = await asyncio.gather(
            *(bound(*self.call_args()) for _ in range(self.tasks)),
            return_exceptions=True,
        )
        return obj, list(results)

    def make_oracle(self) -> Callable[[Any], str | None]:
        oracle = SerialOracle(
            factory=self.construct,
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


#: the types whose deep copy is the object itself (copy's ``_deepcopy_atomic``: the same on
#: 3.11 to 3.13), exactly these types (a subclass may define __deepcopy__)
_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes})


def _copy_is_identity(value: Any) -> bool:
    """``copy.deepcopy(value) is value``, always, decided from the types alone: an atomic
    value (_ATOMIC), an Enum member whose copy is Enum's own (``__deepcopy__`` returns the
    member), or an exact tuple of such values (deepcopy returns a tuple itself when each of
    its items copies to itself).  False when unsure (the caller copies)."""
    t = type(value)
    if t in _ATOMIC:
        return True
    if t is tuple:
        return all(_copy_is_identity(v) for v in value)
    return (
        isinstance(value, enum.Enum)
        and getattr(t, "__deepcopy__", None) is enum.Enum.__deepcopy__
        and "__deepcopy__" not in getattr(value, "__dict__", {})
    )


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
    instrument: Sequence[str] = (),
    rootdir: str | os.PathLike[str] | None = None,
) -> Program:
    """Loads the file (its project instrumented, see :func:`load_instrumented`) and builds the
    `--cls/--method` workload with its serializability oracle.

    `args`/`init_args` are the options' literal text; None (the option absent) synthesizes the
    required arguments from the signature (:mod:`chaossloth.arguments`), while an explicit empty
    text passes none.  The program records the text either way, and whether it was
    synthesized."""
    p = Path(path).resolve()
    if not isinstance(tasks, int) or tasks < 1:
        raise InputError(f"the number of concurrent calls must be at least 1 (got {tasks!r})")
    arguments.check_syntax(args, "--args")
    arguments.check_syntax(init_args, "--init-args")
    module, imports = load_instrumented(p, instrument, rootdir)
    try:
        program = _workload(p, module, cls, method, tasks, args, init_args)
    except BaseException:
        imports.restore()
        importer.end_program()
        raise
    program.instrument, program.imports = tuple(instrument), imports
    return program


def _workload(
    p: Path,
    module: ModuleType,
    cls: str,
    method: str,
    tasks: int,
    args: str | None,
    init_args: str | None,
) -> Program:
    """The workload of class `cls` in the loaded module (its names checked, its arguments
    parsed or synthesized)."""
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
    namespace = vars(module)
    ctor = _arguments(
        init_args, "--init-args", _signature(cls_obj), _init_function(cls_obj), namespace, cls
    )
    try:
        _signature(cls_obj).bind(*ctor.values)
    except TypeError as exc:
        raise InputError(
            f"{cls}{ctor.values!r}: the constructor does not accept these --init-args ({exc})"
        ) from None
    except ValueError:
        pass
    # a plain function looked up on the class takes the instance first; a staticmethod does
    # not, and a classmethod comes bound
    takes_self = not isinstance(inspect.getattr_static(cls_obj, method, None), staticmethod)
    call_sig = _signature(fn, skip_first=takes_self and inspect.isfunction(fn))
    call = _arguments(args, "--args", call_sig, fn, namespace, f"{cls}.{method}")
    try:
        call_sig.bind(*call.values)
    except TypeError as exc:
        raise InputError(
            f"{cls}.{method}{call.values!r}: the method does not accept these --args ({exc})"
        ) from None
    work = Workload(cls_obj, cls, method, tasks, call.values, ctor.values)
    return Program(
        path=str(p),
        sha256=file_sha256(p),
        factory=work.concurrent,
        cls=cls,
        method=method,
        tasks=tasks,
        args=call.text,
        init_args=ctor.text,
        args_synthesized=call.synthesized,
        init_args_synthesized=ctor.synthesized,
        oracle=work.make_oracle(),
        workload=work,
        module=module,
    )


def _signature(obj: Any, skip_first: bool = False) -> inspect.Signature:
    """The signature of `obj` (without its first parameter when `skip_first`); a callable
    without one (a builtin) gets ``(*args, **kwargs)``, which accepts anything."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        var = inspect.Parameter.VAR_POSITIONAL
        return inspect.Signature(
            [
                inspect.Parameter("args", var),
                inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
            ]
        )
    params = list(sig.parameters.values())
    return sig.replace(parameters=params[1:]) if skip_first and params else sig


def _init_function(cls_obj: type) -> Any:
    """The function whose annotations the constructor's parameters carry: ``__init__`` when
    the class (or a base) defines one in Python, else ``__new__``."""
    init = getattr(cls_obj, "__init__", None)
    if inspect.isfunction(init):
        return init
    new = getattr(cls_obj, "__new__", None)
    return new if inspect.isfunction(new) else None


def _arguments(
    text: str | None,
    option: str,
    sig: inspect.Signature,
    annotated: Any,
    namespace: dict[str, Any],
    where: str,
) -> arguments.Arguments:
    """The option's arguments as given (`text`), or synthesized from `sig` when it is absent
    (None) and the callable has required parameters."""
    if text is not None:
        return arguments.Arguments(arguments.parse(text, option, namespace), text)
    params = list(sig.parameters.values())
    required = [
        prm
        for prm in params
        if prm.default is inspect.Parameter.empty
        and prm.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if not required:
        return arguments.Arguments((), None)
    return arguments.synthesize(params, annotated, namespace, where, option)


# ------------------------------------------------------------------ the program of a run


def load(path: str, config: Config, *, rootdir: str | os.PathLike[str] | None = None) -> Program:
    """Loads the program under test that `config` names: its scenario, or its --cls/--method
    workload (``tasks``, ``args``, ``init_args``), with its project and the packages of
    ``instrument`` instrumented (`rootdir`: pytest's rootdir, whose project is instrumented
    too)."""
    c = config
    if c.cls is not None or c.method is not None:
        if c.cls is None or c.method is None:
            raise InputError("--cls and --method go together (name the class and its method)")
        if c.scenario is not None:
            raise InputError("give either --scenario or --cls/--method, not both")
        if c.tasks > serial.MAX_CALLS:
            raise InputError(
                f"--tasks {c.tasks}: at most {serial.MAX_CALLS} concurrent calls (the "
                f"serializability oracle's search can visit every subset of the calls)"
            )
        return load_workload(
            path, c.cls, c.method, c.tasks, c.args, c.init_args, c.instrument, rootdir
        )
    if c.args is not None or c.init_args is not None:
        raise InputError("--args and --init-args need --cls and --method")
    return load_scenario(path, c.scenario, c.instrument, rootdir)


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
