"""pytest glue: run an async test under ChaosSloth's exploration.

Three ways in:

* the marker ``@pytest.mark.chaossloth(max_executions=..., strategy=..., seed=...)`` on an
  ``async def`` test: the test body is the scenario; it is explored and the test fails with the
  CLI's report (hazard, findings with their source lines, the failing schedule step by step,
  the replay command) when some schedule fails;
* the command-line flag ``--chaossloth``: every ``async def`` test of the run is explored as if
  it were marked (``--chaossloth-budget SECONDS`` sets the wall-time budget of each test that
  names no budget of its own; default :data:`chaossloth.config.DEFAULT_TIME_LIMIT`);
* the fixture ``chaossloth``: ``chaossloth.explore(scenario, **options)`` does the same for a
  scenario (an ``async def`` with no parameters defined at module level) and returns the
  pipeline result when no schedule fails.

Options are the exploration options of :class:`chaossloth.config.Config` (``strategy``,
``max_executions``, ``time_limit``, ``max_steps``, ``seed``, ``timers``, ``stop_on_failure``,
``telemetry``, ``telemetry_budget``, ...), ``instrument`` (installed packages to instrument, a
list of top-level import names; the ini key ``chaossloth_instrument`` adds names for every
test) and, for the marker, ``require_complete`` (True: an exploration that ended incomplete
fails the test instead of passing it with a report section saying so).  A bad option is one line naming it and
the values it takes; every message speaks the marker's language (``max_steps=``, not a CLI
flag).  Here ``telemetry`` defaults to False.

Coexistence: a marked test (every async test under ``--chaossloth``) is ChaosSloth's whatever
pytest-asyncio's mode is; under ``asyncio_mode = auto`` pytest-asyncio wraps the test function
in a synchronous runner, and the plugin explores the ``async def`` it wraps.  Unmarked async
tests are left to pytest-asyncio or anyio.

Fixtures of an explored test (see :func:`is_immutable`): a synchronous fixture is resolved once
by pytest and its value handed to every execution when it is immutable; any other fixture
defined in the project (a mutable value, an ``async def`` or async generator fixture, or one
that depends on such a fixture) is re-created for every execution inside the controlled loop,
from the instrumented copy of its function, so every execution starts from the same state; a
generator fixture's teardown runs at the end of the execution.  A fixture that cannot be
re-created (pytest's or a plugin's, like ``request`` or ``monkeypatch``) with a mutable value is
refused with one message.

The scenario's file is loaded again through ChaosSloth's instrumentation with the project
instrumented as the CLI instruments it (see :mod:`chaossloth.capture.importer`).  The schedule
file is written under ``<rootdir>/.chaossloth/`` (marker) or the test's ``tmp_path`` (fixture);
the failure database is ``<rootdir>/.chaossloth``.  The terminal summary lists every explored
test with its executions and whether the exploration was complete.
"""

from __future__ import annotations

import decimal
import enum
import fractions
import inspect
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any

import pytest

from chaossloth import config as cfg
from chaossloth import html_report, pipeline, sarif, scenario
from chaossloth import report as rp
from chaossloth.capture import importer, output
from chaossloth.capture.importer import load_file
from chaossloth.errors import InputError

#: options of the marker that are not Config's
MARKER_ONLY = ("require_complete",)
OPTIONS = (*cfg.names_of("exploration"), "instrument")
MARKER_OPTIONS = (*OPTIONS, *MARKER_ONLY)
#: the ini key naming installed packages to instrument in every explored test
INI_INSTRUMENT = "chaossloth_instrument"
#: the ini keys of the budgets (the command line's options win)
INI_BUDGET = "chaossloth_budget"
INI_TOTAL_BUDGET = "chaossloth_total_budget"
#: lines of the failing schedule shown in a failure message
TIMELINE_LIMIT = 40

_RECORDS = pytest.StashKey[list["Explored"]]()
_BUDGET = pytest.StashKey["RunBudget"]()
#: how deep a chain of ``__wrapped__`` is followed (a cycle must not loop forever)
_WRAP_DEPTH = 20


class ChaosSlothIncompleteWarning(pytest.PytestWarning):
    """No longer emitted: an exploration that stops at its budget is a pass, said in the test's
    report and in the summary (a warning became a failure under ``filterwarnings = error``).
    Kept so that configurations filtering it still load."""


@dataclass
class Explored:
    """One explored test, for the terminal summary."""

    nodeid: str
    executions: int
    complete: bool
    #: None: passed; else why the test failed (the hazard, or "incomplete, require_complete=True")
    failed: str | None
    budget: str
    replayed: int
    #: wall time of the exploration, in seconds
    seconds: float = 0.0


# ------------------------------------------------------------------ options and messages


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        INI_BUDGET,
        "wall-time budget in seconds of each explored test that names none (--chaossloth-budget)",
        default=None,
    )
    parser.addini(
        INI_TOTAL_BUDGET,
        "wall-time budget in seconds of the whole run's explorations (--chaossloth-total-budget)",
        default=None,
    )
    parser.addini(
        INI_INSTRUMENT,
        "installed packages (top-level import names) ChaosSloth instruments in every explored "
        "test, besides the project",
        type="linelist",
        default=[],
    )
    group = parser.getgroup("chaossloth")
    group.addoption(
        "--chaossloth",
        action="store_true",
        default=False,
        help="explore every async def test of the run with ChaosSloth (as if marked)",
    )
    group.addoption(
        "--chaossloth-budget",
        metavar="SECONDS",
        type=float,
        default=None,
        help="wall-time budget of each explored test that names no budget in its marker "
        f"(max_executions or time_limit); default {cfg.DEFAULT_TIME_LIMIT:g}",
    )
    group.addoption(
        "--chaossloth-total-budget",
        metavar="SECONDS",
        type=float,
        default=None,
        help="wall-time budget of the whole run's explorations, split across the explored tests "
        "not run yet (each gets at most its share of what is left, and at most its own budget)",
    )
    group.addoption(
        "--chaossloth-report",
        metavar="DIR",
        default=None,
        help="write the SARIF log and the HTML page of every failing explored test into DIR "
        "(<test id>.sarif, <test id>.html; made if absent)",
    )


@dataclass
class RunBudget:
    """The run's budgets: `per_test` (None: the default time limit) and `total` (None: no
    limit), with what the explorations used so far and how many explored tests are left."""

    per_test: float | None
    total: float | None
    used: float = 0.0
    left: int = 0

    def for_next_test(self) -> float | None:
        """The wall-time budget of the next explored test: its own budget, capped by its share
        of what is left of the total."""
        if self.total is None:
            return self.per_test
        share = max(self.total - self.used, 0.0) / max(self.left, 1)
        own = self.per_test if self.per_test is not None else cfg.DEFAULT_TIME_LIMIT
        # an exploration needs a moment to run at all; a spent total still runs each test once
        return max(min(own, share), MIN_SHARE)


#: the least wall time a test gets from a spent total budget (one execution, the stock order)
MIN_SHARE = 0.05


def _budget_value(config: pytest.Config, option: str, ini: str, flag: str) -> float | None:
    value = config.getoption(option, None)
    where = flag
    if value is None:
        raw = config.getini(ini)
        if raw in (None, ""):
            return None
        where = f"ini option {ini}"
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise pytest.UsageError(
                f"{where} must be a positive number of seconds, not {raw!r}"
            ) from None
    if not 0 < value < float("inf"):
        raise pytest.UsageError(f"{where} must be a positive number of seconds, not {value:g}")
    return value


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "chaossloth(**options): explore the schedules of this async test with ChaosSloth "
        f"(options: {', '.join(MARKER_OPTIONS)})",
    )
    config.stash[_RECORDS] = []
    # a test's output is pytest's to capture (and to show for a failing test)
    output.ENABLED = False
    config.stash[_BUDGET] = RunBudget(
        _budget_value(config, "chaossloth_budget", INI_BUDGET, "--chaossloth-budget"),
        _budget_value(
            config, "chaossloth_total_budget", INI_TOTAL_BUDGET, "--chaossloth-total-budget"
        ),
    )


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    budget = config.stash.get(_BUDGET, None)
    if budget is not None:
        budget.left = sum(1 for item in items if _explored(item, config))


#: CLI flags as the marker writes them: ``--max-steps`` -> ``max_steps=``, and a
#: ``--no-...`` switch -> ``name=False``
_FLAG_WORDS = {
    flag: (f"{name}=False" if flag.startswith("--no-") else f"{name}=")
    for name in cfg.NAMES
    if (flag := cfg.flag_of(name)) is not None
}
_FLAG_RE = re.compile(
    "(?:"
    + "|".join(re.escape(f) for f in sorted(_FLAG_WORDS, key=len, reverse=True))
    + r")(?![\w-])"
)


def marker_words(message: str) -> str:
    """A message of the runner or the configuration in the marker's language: each CLI flag
    (``--max-steps``) becomes the option (``max_steps=``)."""
    return _FLAG_RE.sub(lambda m: _FLAG_WORDS[m.group(0)], message)


def options_config(
    options: Mapping[str, Any],
    schedule_out: str | os.PathLike[str],
    accepted: tuple[str, ...] = OPTIONS,
) -> cfg.Config:
    """The configuration of a marked test or a fixture call; an option that is not an
    exploration option, or a bad value, is an InputError naming it (and the values it takes;
    `accepted`: the options the caller takes, named in the message)."""
    not_here = sorted(set(options) - set(OPTIONS))
    if not_here:
        raise InputError(
            f"unknown option(s) {', '.join(not_here)} (options: {', '.join(accepted)})"
        )
    opts = dict(options)
    if "instrument" in opts:
        opts["instrument"] = _names(opts["instrument"])
    return cfg.DEFAULTS.replace(telemetry=False, schedule_out=str(schedule_out), **opts)


def _names(value: Any) -> tuple[str, ...]:
    """The marker's ``instrument``: a package name or a list of them."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InputError(f"option instrument must be a package name or a list of them, not {value!r}")


def budget_words(config: cfg.Config) -> str:
    """The budget an exploration ran with, in the marker's words."""
    parts = []
    if config.max_executions is not None:
        parts.append(f"max_executions={config.max_executions}")
    limit = config.time_budget()
    if limit is not None:
        default = "" if config.time_limit is not None else " (default)"
        parts.append(f"time_limit={limit:g}{default}")
    return ", ".join(parts) or "no limit"


# ------------------------------------------------------------------ fixtures


#: the types whose values an execution cannot change (exact types: a subclass may add state)
_IMMUTABLE_TYPES = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    range,
    decimal.Decimal,
    fractions.Fraction,
    type(Ellipsis),
)


def is_immutable(value: Any) -> bool:
    """Whether a fixture's value can be handed to every execution as it is: None, bool, the
    numbers (int, float, complex, Decimal, Fraction), str, bytes, range, an Enum member, a path
    (PurePath and its subclasses), and tuples and frozensets of those.  Exact types, except for
    Enum and PurePath: a subclass of str or tuple may carry mutable attributes."""
    if type(value) in _IMMUTABLE_TYPES:
        return True
    if isinstance(value, (enum.Enum, PurePath)):
        return True
    if type(value) in (tuple, frozenset):
        return all(is_immutable(v) for v in value)
    return False


def _is_async(fn: Any) -> bool:
    """The function, or one it wraps (pytest-asyncio's synchronizers), is async."""
    seen = 0
    while fn is not None and seen < _WRAP_DEPTH:
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            return True
        fn, seen = getattr(fn, "__wrapped__", None), seen + 1
    return False


def _raw_function(obj: Any) -> Any:
    """The plain function under a fixture definition or a wrapper (or None)."""
    get = getattr(obj, "_get_wrapped_function", None)
    if callable(get):
        obj = get()
    seen = 0
    while not inspect.isfunction(obj) and seen < _WRAP_DEPTH:
        if inspect.ismethod(obj):  # a fixture of a test class, bound to pytest's instance
            obj = obj.__func__
        elif hasattr(obj, "__wrapped__"):
            obj = obj.__wrapped__
        else:
            break
        seen += 1
    return obj if inspect.isfunction(obj) else None


def _original_test(fn: Any) -> Any:
    """The test's own function: under pytest-asyncio's auto mode ``item.obj`` is a synchronous
    wrapper of it (functools.wraps: ``__wrapped__``)."""
    seen = 0
    while not inspect.iscoroutinefunction(fn) and hasattr(fn, "__wrapped__") and seen < _WRAP_DEPTH:
        fn, seen = fn.__wrapped__, seen + 1
    return fn


class _Deferred:
    """The value pytest holds for an async fixture of an explored test: it is created in every
    execution instead."""

    def __repr__(self) -> str:
        return "<created in each ChaosSloth execution>"


_DEFERRED = _Deferred()


def _explored(item: Any, config: pytest.Config) -> bool:
    if not isinstance(item, pytest.Function):
        return False
    if item.get_closest_marker("chaossloth") is not None:
        return True
    return bool(config.getoption("chaossloth", False)) and inspect.iscoroutinefunction(
        _original_test(item.obj)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Any:
    """An async function-scoped fixture of an explored test is not run by pytest (nor by
    pytest-asyncio, on its own loop): each execution creates it on the controlled loop; so is
    a function-scoped fixture that takes a fixture left to the executions."""
    item = getattr(request, "_pyfuncitem", None)
    if item is None or fixturedef.scope != "function" or not _explored(item, request.config):
        return None
    if not _is_async(fixturedef.func) and not any(
        request.getfixturevalue(arg) is _DEFERRED for arg in fixturedef.argnames
    ):
        return None
    fixturedef.cached_result = (_DEFERRED, fixturedef.cache_key(request), None)
    return _DEFERRED


@dataclass
class _Make:
    """A fixture re-created in every execution: `raw` is pytest's function, defined in
    `source`; `fn` its instrumented copy (set once the program is loaded)."""

    name: str
    raw: Callable[..., Any]
    source: Path
    args: tuple[str, ...]
    fn: Callable[..., Any] | None = None
    #: a fixture defined in the test's class: called bound to the execution's instance
    is_method: bool = False


class _FixturePlan:
    """How each fixture the test takes gets its value in an execution: pytest's value (shared,
    immutable) or re-created (`_Make`), in dependency order.  Deciding needs no instrumented
    code (:meth:`decide`); the instrumented copies of the re-created fixtures are found once the
    program is loaded (:meth:`bind`)."""

    def __init__(self, item: pytest.Function, test_file: Path) -> None:
        self.item = item
        self.test_file = test_file.resolve()
        self.root = Path(str(item.config.rootpath)).resolve()
        self.shared: dict[str, Any] = {}
        self.make: dict[str, _Make] = {}
        self._visiting: set[str] = set()

    def decide(self, name: str) -> None:
        """Decides `name`: pytest's value when the fixture is synchronous and its value
        immutable (whatever it was computed from: the value itself cannot change), else
        re-created from the project's source, after what it depends on is decided."""
        if name in self.shared or name in self.make or name in self._visiting:
            return
        defs = self.item._fixtureinfo.name2fixturedefs.get(name)
        fixturedef = defs[-1] if defs else None
        raw = _raw_function(fixturedef.func) if fixturedef is not None else None
        value: Any = _DEFERRED
        if not (raw is not None and _is_async(raw)):
            # _DEFERRED for a fixture that takes a deferred one (pytest_fixture_setup)
            value = self.item._request.getfixturevalue(name)
            if is_immutable(value):
                self.shared[name] = value
                return
        source = self._project_source(raw)
        if raw is None or source is None:
            raise InputError(
                f"fixture {name!r}{_where(raw)} cannot be re-created for each execution "
                f"and its value ({type(value).__name__}) is mutable, so the executions would "
                "share it: build that state in a fixture of the project or in the test body"
            )
        self._visiting.add(name)
        argnames = tuple(fixturedef.argnames) if fixturedef is not None else ()
        for arg in argnames:
            self.decide(arg)
        self._visiting.discard(name)
        self.make[name] = _Make(name, raw, source, argnames, is_method=_is_method(raw))

    def _project_source(self, raw: Any) -> Path | None:
        """The file defining a fixture function of the project (the test file or a file under
        pytest's rootdir, outside site-packages), or None: pytest's or a plugin's fixture."""
        if raw is None:
            return None
        try:
            src = Path(inspect.getsourcefile(raw) or "").resolve()
        except TypeError:
            return None
        if not src.is_file() or "site-packages" in src.parts:
            return None
        if src != self.test_file and not src.is_relative_to(self.root):
            return None
        return src

    def other_sources(self) -> list[Path]:
        """The files besides the test file that define re-created fixtures (conftest.py)."""
        return sorted({m.source for m in self.make.values()} - {self.test_file})

    def bind(self, module: ModuleType) -> None:
        """Finds the instrumented copy of every re-created fixture: in the instrumented test
        module, or in its file loaded again instrumented (a conftest.py)."""
        modules: dict[Path, ModuleType] = {self.test_file: module}
        for m in self.make.values():
            mod = modules.get(m.source)
            if mod is None:
                # a new name: the module pytest imported stays in sys.modules, and the run's
                # end (Activation.restore) drops the instrumented copy
                name, n = m.source.stem, 1
                while f"{name}__cs{n}" in sys.modules:
                    n += 1
                mod = load_file(str(m.source), f"{name}__cs{n}", siblings=False)
                modules[m.source] = mod
            code = m.raw.__code__
            for obj in _definitions(mod):
                fn = _raw_function(obj)
                if (
                    fn is not None
                    and fn.__code__.co_name == code.co_name
                    and fn.__code__.co_firstlineno == code.co_firstlineno
                ):
                    m.fn = fn
                    break
            if m.fn is None:
                raise InputError(
                    f"{m.source}: fixture {m.name!r} not found in the instrumented copy of its file"
                )
        for name, value in list(self.shared.items()):
            self.shared[name] = _counterpart(value, modules)


def _definitions(mod: ModuleType) -> list[Any]:
    """What a module defines at its top level, and in its classes (nested ones too): where a
    fixture function of the file is found again in its instrumented copy."""
    found: list[Any] = []
    classes = [v for v in vars(mod).values() if isinstance(v, type)]
    found.extend(vars(mod).values())
    seen: set[int] = set()
    while classes:
        cls = classes.pop()
        if id(cls) in seen or getattr(cls, "__module__", None) != mod.__name__:
            continue
        seen.add(id(cls))
        for v in vars(cls).values():
            found.append(v.__func__ if isinstance(v, (staticmethod, classmethod)) else v)
            if isinstance(v, type):
                classes.append(v)
    return found


def _is_method(raw: Any) -> bool:
    """A function defined in a class body (a test method, a fixture of a test class)."""
    qual = getattr(raw, "__qualname__", "")
    return "." in qual and "<locals>" not in qual


def _class_path(fn: Any) -> list[str]:
    """The qualified name of the class a test method is defined in, part by part."""
    return str(getattr(fn, "__qualname__", "")).split(".")[:-1]


def _counterpart(value: Any, modules: Mapping[Path, ModuleType]) -> Any:
    """A shared immutable value as the instrumented program sees it: an Enum member of a
    module that runs instrumented is the same member of the instrumented copy of its class
    (``is`` and ``==`` compare members by identity); tuples and frozensets element by element."""
    if isinstance(value, enum.Enum):
        cls = type(value)
        try:
            src = Path(inspect.getfile(cls)).resolve()
        except (TypeError, OSError):
            return value
        module = modules.get(src) or sys.modules.get(cls.__module__)
        other: Any = module
        for part in cls.__qualname__.split("."):
            other = getattr(other, part, None)
        if isinstance(other, type) and issubclass(other, enum.Enum) and other is not cls:
            return other.__members__.get(value.name, value)
        return value
    if type(value) in (tuple, frozenset):
        return type(value)(_counterpart(v, modules) for v in value)
    return value


def _where(raw: Any) -> str:
    if raw is None:
        return " (pytest's)"
    mod = getattr(raw, "__module__", "") or ""
    return f" (from {mod})" if mod else ""


def _scenario_with_fixtures(
    test: Callable[..., Any],
    argnames: tuple[str, ...],
    plan: _FixturePlan,
    cls: type | None = None,
) -> Callable[[], Any]:
    """The execution's scenario: the re-created fixtures (in dependency order), the test, then
    the fixtures' teardowns (last created first), all on the controlled loop.  `cls`: the
    test's class (instrumented); each execution makes an instance of its own, as pytest makes
    one per test, with its ``setup_method`` / ``teardown_method`` around the test, and the
    class's fixtures bound to it."""

    async def scenario_with_fixtures() -> Any:
        values: dict[str, Any] = dict(plan.shared)
        teardowns: list[tuple[str, Any]] = []
        instance = cls() if cls is not None else None
        run = test if instance is None else test.__get__(instance, cls)

        async def make(name: str) -> Any:
            if name in values:
                return values[name]
            m = plan.make[name]
            fn = m.fn
            assert fn is not None  # bound before the exploration
            kwargs = {a: await make(a) for a in m.args}
            if m.is_method and instance is not None:
                fn = fn.__get__(instance, cls)
            elif m.is_method:
                raise InputError(f"fixture {name!r} is defined in a class the test is not in")
            if inspect.isasyncgenfunction(fn):
                gen = fn(**kwargs)
                value = await gen.__anext__()
                teardowns.append((name, gen))
            elif inspect.isgeneratorfunction(fn):
                gen = fn(**kwargs)
                value = next(gen)
                teardowns.append((name, gen))
            elif inspect.iscoroutinefunction(fn):
                value = await fn(**kwargs)
            else:
                value = fn(**kwargs)
            values[name] = value
            return value

        setup = getattr(instance, "setup_method", None) if instance is not None else None
        if setup is not None:
            setup(test)
        try:
            kwargs = {a: await make(a) for a in argnames}
            return await run(**kwargs)
        finally:
            teardown = getattr(instance, "teardown_method", None) if instance is not None else None
            if teardown is not None:
                teardown(test)
            while teardowns:
                name, gen = teardowns.pop()
                if inspect.isasyncgen(gen):
                    try:
                        await gen.__anext__()
                    except StopAsyncIteration:
                        continue
                else:
                    try:
                        next(gen)
                    except StopIteration:
                        continue
                raise RuntimeError(f"fixture {name!r} yielded more than once")

    return scenario_with_fixtures


# ------------------------------------------------------------------ exploring


def check_function(
    fn: Callable[..., Any],
    config: cfg.Config,
    rootdir: str | os.PathLike[str] | None = None,
    item: pytest.Function | None = None,
) -> Any:
    """Explores an ``async def`` defined at module level in a file (with `item`, also a method
    of a test class), its project (and `rootdir`'s, pytest's rootdir) instrumented; returns the
    pipeline's Result.  With `item` (an explored test) the function may take the item's
    fixtures."""
    if not inspect.iscoroutinefunction(fn):
        raise InputError("a scenario must be an async def")
    # a method inherited from a base class in another file runs on the class collected here
    path = (
        str(item.path) if item is not None and item.cls is not None else inspect.getsourcefile(fn)
    )
    if path is None:
        raise InputError(f"cannot find the source file of {fn.__qualname__}")
    if "<locals>" in fn.__qualname__ or ("." in fn.__qualname__ and item is None):
        raise InputError(f"{fn.__qualname__}: a scenario must be defined at module level")
    argnames = tuple(inspect.signature(fn).parameters)
    if (not argnames and "." not in fn.__qualname__) or item is None:
        program = scenario.load(path, config.replace(scenario=fn.__name__), rootdir=rootdir)
    else:
        program = _program_with_fixtures(Path(path), fn, argnames, config, rootdir, item)
    try:
        return pipeline.run(program, config, None)
    finally:
        program.release()


def _program_with_fixtures(
    path: Path,
    fn: Callable[..., Any],
    argnames: tuple[str, ...],
    config: cfg.Config,
    rootdir: str | os.PathLike[str] | None,
    item: pytest.Function,
) -> scenario.Program:
    """The program of a test that takes fixtures: the instrumented test, run by a scenario
    that creates its per-execution fixtures first (see :class:`_FixturePlan`)."""
    plan = _FixturePlan(item, path)
    for name in argnames:
        plan.decide(name)
    # the packages a conftest.py reaches are re-imported instrumented too: a fixture building
    # the object under test from an uninstrumented class would hide its accesses
    scope = importer.scope_for(path.resolve(), config.instrument, rootdir)
    also = sorted(
        {top for src in plan.other_sources() for top in importer.reached_packages(str(src), scope)}
    )
    module, imports = scenario.load_instrumented(path, config.instrument, rootdir, also=also)
    try:
        # the class pytest collected the test from, which may inherit it (a mixin's method)
        class_path = (
            str(item.cls.__qualname__).split(".") if item.cls is not None else _class_path(fn)
        )
        owner: Any = module
        for part in class_path:
            owner = vars(owner).get(part) if isinstance(owner, (type, ModuleType)) else None
        cls = owner if isinstance(owner, type) else None
        if class_path and cls is None:
            raise InputError(f"{path}: no class {'.'.join(class_path)} in the instrumented module")
        # as the class or module defines it (a base class's, for an inherited method), unbound
        raw = inspect.getattr_static(owner, fn.__name__, None) if owner is not None else None
        test = _original_test(raw)
        if not inspect.iscoroutinefunction(test):
            raise InputError(f"{path}: no async def {fn.__qualname__} in the instrumented module")
        plan.bind(module)
        unseen = imports.unseen()
        if unseen:
            raise InputError(
                f"{', '.join(unseen)} would run uninstrumented: imported before the run by a "
                "fixture's file and not re-imported instrumented (import it by name there)"
            )
    except BaseException:
        imports.restore()
        raise
    return scenario.Program(
        path=str(path.resolve()),
        sha256=scenario.file_sha256(path),
        factory=_scenario_with_fixtures(test, argnames, plan, cls),
        scenario=fn.__name__,
        module=module,
        instrument=tuple(config.instrument),
        imports=imports,
    )


def failure_report(result: Any, name: str, nodeid: str | None = None) -> str:
    """The failure message: the CLI's report of a failing schedule (`nodeid`: the test takes
    fixtures, which ``chaossloth replay`` cannot provide: pytest re-runs it)."""
    lines = [f"ChaosSloth found a failing schedule of {name}: {result.hazard}"]
    if result.failure_type or result.failure_message:
        lines.append(f"  {result.failure_type}: {result.failure_message}".rstrip())
    if result.findings:
        lines.append("findings:")
        for f in result.findings:
            lines.extend(f"  {t}" for t in str(f.text).splitlines())
    timeline = getattr(result, "timeline", None)
    if timeline:
        lines.append(f"the failing schedule, step by step ({len(timeline)} steps):")
        lines.extend(rp.timeline_lines(timeline, limit=TIMELINE_LIMIT))
    if result.uninstrumented:
        lines.append(rp.uninstrumented_line(result.uninstrumented))
    lines.append(rp.instrumented_line(result.instrumented))
    if result.schedule_file and nodeid is not None:
        lines.append(
            f"the schedule is saved in {result.schedule_file}; the test takes fixtures, "
            f"which chaossloth replay cannot provide: run it again with: pytest '{nodeid}'"
        )
    elif result.schedule_file:
        lines.append(f"replay it with: chaossloth replay {result.schedule_file}")
    else:
        lines.append("(the failure showed on the stock loop: no schedule to replay)")
    return "\n".join(lines)


def _replayed(result: Any) -> int:
    return int(result.database["replayed"]) if result.database else 0


def write_reports(result: Any, nodeid: str, directory: Path) -> str:
    """Writes the SARIF log and the HTML page of a failing test into `directory`, named after
    its node id; returns the line the failure message adds (where they are, or why they could
    not be written: the verdict stands either way)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_") or "test"
    report = result.to_json()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        written = [
            sarif.write_sarif(report, str(directory / f"{stem}.sarif")),
            html_report.write_html(report, str(directory / f"{stem}.html")),
        ]
    except (OSError, InputError) as exc:
        return f"the reports could not be written in {directory}: {exc}"
    return f"reports: {', '.join(written)}"


class ChaosSlothFixture:
    """What the ``chaossloth`` fixture hands a test: `rootdir` (pytest's) and `instrument`
    (the ini key's packages) set the instrumented scope with the options' ``instrument``."""

    def __init__(
        self,
        out_dir: Path,
        rootdir: str | os.PathLike[str] | None = None,
        instrument: tuple[str, ...] = (),
    ) -> None:
        self.out_dir = out_dir
        self.rootdir = rootdir
        self.instrument = instrument
        #: the configuration of the last exploration (its budget, for the plugin's report)
        self.config: cfg.Config | None = None

    def explore(
        self,
        scenario: Callable[..., Any],
        *,
        _item: pytest.Function | None = None,
        _time_limit: float | None = None,
        **options: Any,
    ) -> Any:
        name = getattr(scenario, "__name__", "scenario")
        problem = None
        try:
            accepted = MARKER_OPTIONS if _item is not None else OPTIONS
            config = options_config(options, self.out_dir / f"{name}.schedule.json", accepted)
            if _time_limit is not None and not {"time_limit", "max_executions"} & set(options):
                config = config.replace(time_limit=_time_limit)
            if self.instrument:
                config = config.replace(instrument=(*self.instrument, *config.instrument))
            if self.rootdir is not None:
                config = config.replace(database=str(Path(self.rootdir) / ".chaossloth"))
        except InputError as exc:
            problem = f"chaossloth: {marker_words(str(exc))}"
        if problem is not None:  # failed outside the except: no chained exception shown
            pytest.fail(problem, pytrace=False)
        self.config = config
        try:
            result = check_function(scenario, config, self.rootdir, _item)
        except InputError as exc:
            problem = f"ChaosSloth cannot explore {name}: {marker_words(str(exc))}"
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        if result.failed and _item is None:
            pytest.fail(failure_report(result, name), pytrace=False)
        return result


def _fixture_for(config: pytest.Config, out_dir: Path) -> ChaosSlothFixture:
    instrument = tuple(config.getini(INI_INSTRUMENT))
    return ChaosSlothFixture(out_dir, str(config.rootpath), instrument)


@pytest.fixture
def chaossloth(tmp_path: Path, request: pytest.FixtureRequest) -> ChaosSlothFixture:
    return _fixture_for(request.config, tmp_path)


def _marker_problem(item: pytest.Function, func: Any) -> str | None:
    """What is wrong with an explored test or its marker, in one line (None: nothing)."""
    marker = item.get_closest_marker("chaossloth")
    if not inspect.iscoroutinefunction(func):
        return "@pytest.mark.chaossloth needs an async def test"
    if marker is None:
        return None
    if marker.args:
        return (
            "@pytest.mark.chaossloth takes keyword options only "
            f"({', '.join(MARKER_OPTIONS)}), not {marker.args!r}"
        )
    rc = marker.kwargs.get("require_complete", False)
    if not isinstance(rc, bool):
        return f"chaossloth: option require_complete must be True or False, not {rc!r}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    config = pyfuncitem.config
    if not _explored(pyfuncitem, config):
        return None
    func = _original_test(pyfuncitem.obj)
    problem = _marker_problem(pyfuncitem, func)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    marker = pyfuncitem.get_closest_marker("chaossloth")
    options = dict(marker.kwargs) if marker is not None else {}
    require_complete = options.pop("require_complete", False)
    out_dir = Path(str(config.rootpath)) / ".chaossloth"
    out_dir.mkdir(parents=True, exist_ok=True)
    fixture = _fixture_for(config, out_dir)
    run_budget = config.stash[_BUDGET]
    started = time.monotonic()
    try:
        result = fixture.explore(
            func, _item=pyfuncitem, _time_limit=run_budget.for_next_test(), **options
        )
    finally:
        seconds = time.monotonic() - started
        run_budget.used += seconds
        run_budget.left = max(run_budget.left - 1, 0)
    assert fixture.config is not None
    budget = budget_words(fixture.config)
    failed = None
    if result.failed:
        failed = str(result.hazard)
    elif not result.complete and require_complete:
        failed = "incomplete, require_complete=True"
    record = Explored(
        pyfuncitem.nodeid,
        result.executions,
        result.complete,
        failed,
        budget,
        _replayed(result),
        seconds,
    )
    config.stash[_RECORDS].append(record)
    if result.failed:
        takes_fixtures = bool(inspect.signature(func).parameters) or _is_method(func)
        nodeid = pyfuncitem.nodeid if takes_fixtures else None
        message = failure_report(result, pyfuncitem.name, nodeid)
        report_dir = config.getoption("chaossloth_report", None)
        if report_dir:
            where = Path(config.invocation_params.dir) / report_dir
            message += "\n" + write_reports(result, pyfuncitem.nodeid, where)
        pytest.fail(message, pytrace=False)
    if not result.complete:
        why = f": {result.incomplete_reason}" if result.incomplete_reason else ""
        text = (
            f"ChaosSloth's exploration of {pyfuncitem.name} is incomplete after "
            f"{result.executions} executions (budget {budget}){why}; no failing schedule found "
            "among those explored"
        )
        if require_complete:
            pytest.fail(f"{text} (require_complete=True)", pytrace=False)
        # a pass: said in the test's report and the summary, never as a warning, which a
        # project's `filterwarnings = error` would turn into a failure
        pyfuncitem.add_report_section("call", "chaossloth", text)
        pyfuncitem.user_properties.append(
            ("chaossloth", f"incomplete ({result.executions} schedules)")
        )
    else:
        pyfuncitem.user_properties.append(
            ("chaossloth", f"complete ({result.executions} schedules)")
        )
    return True


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    records = config.stash.get(_RECORDS, [])
    if not records:
        return
    tr = terminalreporter
    tr.section("chaossloth")
    for r in records:
        if r.failed:
            line = f"FAILED ({r.failed}) after {r.executions} execution(s)"
        else:
            state = "complete" if r.complete else f"incomplete (budget {r.budget})"
            line = f"passed, {r.executions} executions, {state}"
        tr.write_line(f"{r.nodeid}: {line}, {r.seconds:.2f}s")
        if r.replayed:
            tr.write_line(f"  replayed {r.replayed} saved schedule(s) first")
    failed = sum(1 for r in records if r.failed)
    complete = sum(1 for r in records if not r.failed and r.complete)
    incomplete = len(records) - failed - complete
    seconds = sum(r.seconds for r in records)
    tr.write_line(
        f"explored {len(records)}: {complete} complete, {incomplete} incomplete, "
        f"{failed} failed; {sum(r.executions for r in records)} schedules in {seconds:.1f}s"
    )


__all__ = [
    "ChaosSlothFixture",
    "ChaosSlothIncompleteWarning",
    "check_function",
    "failure_report",
    "is_immutable",
    "marker_words",
    "options_config",
    "write_reports",
]
