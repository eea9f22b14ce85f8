"""pytest glue: run an async test under ChaosSloth's exploration.

Two ways in, both small:

* the marker ``@pytest.mark.chaossloth(max_executions=..., strategy=..., seed=...)`` on an
  ``async def`` test with no parameters: the test body is the scenario; it is explored and the
  test fails with the path of a replay file when some schedule fails;
* the fixture ``chaossloth``: ``chaossloth.explore(scenario, **options)`` does the same for a
  scenario (an ``async def`` with no parameters defined at module level) and returns the
  pipeline result when no schedule fails.

The scenario's file is loaded again through ChaosSloth's instrumentation (so its reads and writes
are recorded), and the schedule file is written under ``<rootdir>/.chaossloth/`` (marker) or the
test's ``tmp_path`` (fixture).  The plugin imports nothing from the engine until a test uses it, so loading it costs nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_OPTION_NAMES = ("strategy", "max_executions", "time_limit", "max_steps", "seed", "timers")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "chaossloth(**options): explore the schedules of this async test with ChaosSloth "
        "(options: strategy, max_executions, time_limit, max_steps, seed, timers)",
    )


class ChaosSlothFixture:
    """What the ``chaossloth`` fixture hands a test."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    def explore(self, scenario: Callable[[], Any], **options: Any) -> Any:
        unknown = set(options) - set(_OPTION_NAMES)
        if unknown:
            raise TypeError(f"unknown chaossloth option(s): {', '.join(sorted(unknown))}")
        from chaossloth import pipeline
        from chaossloth.errors import InputError

        name = getattr(scenario, "__name__", "scenario")
        schedule_out = self.out_dir / f"{name}.schedule.json"
        try:
            result = pipeline.check_function(scenario, schedule_out=schedule_out, **options)
        except InputError as exc:
            pytest.fail(f"ChaosSloth cannot explore {name}: {exc}", pytrace=False)
        if result.failed:
            pytest.fail(
                f"ChaosSloth found a failing schedule ({result.hazard}): "
                f"{result.failure_type}: {result.failure_message}\n"
                f"replay it with: chaossloth replay {result.schedule_file}",
                pytrace=False,
            )
        return result


@pytest.fixture
def chaossloth(tmp_path: Path) -> ChaosSlothFixture:
    return ChaosSlothFixture(tmp_path)


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
    out_dir = Path(str(pyfuncitem.config.rootpath)) / ".chaossloth"
    out_dir.mkdir(parents=True, exist_ok=True)
    ChaosSlothFixture(out_dir).explore(func, **dict(marker.kwargs))
    return True
