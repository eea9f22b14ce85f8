"""pytest glue: run an async test under ChaosSloth's exploration.

Two ways in, both small:

* the marker ``@pytest.mark.chaossloth(max_executions=..., strategy=..., seed=...)`` on an
  ``async def`` test with no parameters: the test body is the scenario; it is explored and the
  test fails with the path of a replay file when some schedule fails;
* the fixture ``chaossloth``: ``chaossloth.explore(scenario, **options)`` does the same for a
  scenario (an ``async def`` with no parameters defined at module level) and returns the
  pipeline result when no schedule fails.

Options are the exploration options of :class:`chaossloth.config.Config` (``strategy``,
``max_executions``, ``time_limit``, ``max_steps``, ``seed``, ``timers``, ``stop_on_failure``,
``telemetry``, ``telemetry_budget``) and ``instrument`` (installed packages to instrument, a
list of top-level import names; the ini key ``chaossloth_instrument`` adds names for every
test); an unknown option or a bad value fails the test with one message.  Here ``telemetry``
defaults to False (stage 4's runs on the stock loop cost time that a test suite seldom wants).

The scenario's file is loaded again through ChaosSloth's instrumentation (so its reads and writes
are recorded) with the project instrumented as the CLI instruments it: the project of the file
and of pytest's rootdir, the current directory, and the packages of ``instrument`` and of
pyproject.toml's ``[tool.chaossloth]``.  Modules imported before (by collection, a conftest) are
re-imported instrumented for the exploration and put back after it.  The schedule file is
written under ``<rootdir>/.chaossloth/`` (marker) or the test's ``tmp_path`` (fixture).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from chaossloth import config as cfg
from chaossloth import pipeline, scenario
from chaossloth import report as rp
from chaossloth.errors import InputError

OPTIONS = (*cfg.names_of("exploration"), "instrument")
#: the ini key naming installed packages to instrument in every explored test
INI_INSTRUMENT = "chaossloth_instrument"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        INI_INSTRUMENT,
        "installed packages (top-level import names) ChaosSloth instruments in every explored "
        "test, besides the project",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "chaossloth(**options): explore the schedules of this async test with ChaosSloth "
        f"(options: {', '.join(OPTIONS)})",
    )


def options_config(options: Mapping[str, Any], schedule_out: str | os.PathLike[str]) -> cfg.Config:
    """The configuration of a marked test or a fixture call; an option that is not an
    exploration option, or a bad value, is an InputError naming it."""
    not_here = sorted(set(options) - set(OPTIONS))
    if not_here:
        raise InputError(
            f"unknown chaossloth option(s): {', '.join(not_here)} (options: {', '.join(OPTIONS)})"
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


def check_function(
    fn: Callable[[], Any], config: cfg.Config, rootdir: str | os.PathLike[str] | None = None
) -> Any:
    """Explores an ``async def`` scenario defined at module level in a file, its project (and
    `rootdir`'s, pytest's rootdir) instrumented; returns the pipeline's Result."""
    if not inspect.iscoroutinefunction(fn):
        raise InputError("a scenario must be an async def with no parameters")
    path = inspect.getsourcefile(fn)
    if path is None:
        raise InputError(f"cannot find the source file of {fn.__qualname__}")
    if "." in fn.__qualname__:
        raise InputError(f"{fn.__qualname__}: a scenario must be defined at module level")
    program = scenario.load(path, config.replace(scenario=fn.__name__), rootdir=rootdir)
    try:
        return pipeline.run(program, config, None)
    finally:
        program.release()


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

    def explore(self, scenario: Callable[[], Any], **options: Any) -> Any:
        name = getattr(scenario, "__name__", "scenario")
        try:
            config = options_config(options, self.out_dir / f"{name}.schedule.json")
            if self.instrument:
                config = config.replace(instrument=(*self.instrument, *config.instrument))
            if self.rootdir is not None:
                config = config.replace(database=str(Path(self.rootdir) / ".chaossloth"))
        except InputError as exc:
            pytest.fail(f"chaossloth: {exc}", pytrace=False)
        try:
            result = check_function(scenario, config, self.rootdir)
        except InputError as exc:
            pytest.fail(f"ChaosSloth cannot explore {name}: {exc}", pytrace=False)
        if result.failed:
            findings = "".join(f"\n  {f.text}" for f in result.findings[:3])
            unseen = (
                f"\n  {rp.uninstrumented_line(result.uninstrumented)}"
                if result.uninstrumented
                else ""
            )
            pytest.fail(
                f"ChaosSloth found a failing schedule ({result.hazard}): "
                f"{result.failure_type}: {result.failure_message}{findings}{unseen}\n"
                f"{rp.instrumented_line(result.instrumented)}\n"
                f"replay it with: chaossloth replay {result.schedule_file}",
                pytrace=False,
            )
        return result


def _fixture_for(config: pytest.Config, out_dir: Path) -> ChaosSlothFixture:
    instrument = tuple(config.getini(INI_INSTRUMENT))
    return ChaosSlothFixture(out_dir, str(config.rootpath), instrument)


@pytest.fixture
def chaossloth(tmp_path: Path, request: pytest.FixtureRequest) -> ChaosSlothFixture:
    return _fixture_for(request.config, tmp_path)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    marker = pyfuncitem.get_closest_marker("chaossloth")
    if marker is None:
        return None
    func = pyfuncitem.obj
    if not inspect.iscoroutinefunction(func):
        pytest.fail("@pytest.mark.chaossloth needs an async def test", pytrace=False)
    if inspect.signature(func).parameters:
        pytest.fail(
            "@pytest.mark.chaossloth tests take no arguments (the body is the scenario)",
            pytrace=False,
        )
    if marker.args:
        pytest.fail(
            "@pytest.mark.chaossloth takes keyword options only "
            f"({', '.join(OPTIONS)}), not {marker.args!r}",
            pytrace=False,
        )
    out_dir = Path(str(pyfuncitem.config.rootpath)) / ".chaossloth"
    out_dir.mkdir(parents=True, exist_ok=True)
    _fixture_for(pyfuncitem.config, out_dir).explore(func, **dict(marker.kwargs))
    return True
