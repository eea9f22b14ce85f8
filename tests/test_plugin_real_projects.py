"""The pytest plugin in projects laid out the usual way (issue 12): a package under ``src/``,
tests under ``tests/``, pytest-asyncio (strict and auto mode) and anyio's plugin installed,
fixtures in the test file and in ``conftest.py``.

Every scenario is one real pytest run in a subprocess (the real pytest-asyncio and anyio of the
``[test]`` extra, no mocks); the budgets are small (max_executions=200: every exploration here
is complete or fails long before).  The pure helpers (which fixture values are immutable, the
marker's wording of CLI flags) are checked in-process.
"""

from __future__ import annotations

import enum
import json
import os
import re
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path, PurePosixPath

import pytest
from test_project_instrumentation import CACHE, SERVICE  # the same src-layout package

from chaossloth.pytest_plugin import is_immutable, marker_words

pytest.importorskip("pytest_asyncio", reason="the [test] extra installs pytest-asyncio")
pytest.importorskip("anyio", reason="the [test] extra installs anyio")


# the race and its locked twin, marked; an unmarked pytest-asyncio test and an anyio test next
# to them (in strict mode the asyncio one carries its marker; in auto mode it needs none)
TEST_SERVICE = """
import asyncio

import anyio
import pytest

from myapp.service import Service


@pytest.mark.chaossloth(max_executions=200)
async def test_racy_cache():
    s = Service()
    await asyncio.gather(s.handle("a"), s.handle("a"))
    assert s.cache.loads == 1, f"loaded {s.cache.loads} times"


@pytest.mark.chaossloth(max_executions=200)
async def test_locked_cache():
    s = Service(locked=True)
    await asyncio.gather(s.handle("a"), s.handle("a"))
    assert s.cache.loads == 1, f"loaded {s.cache.loads} times"


@ASYNCIO_MARK
async def test_left_to_pytest_asyncio():
    # the stock loop of pytest-asyncio: ChaosSloth's controlled loop is not running
    assert type(asyncio.get_running_loop()).__module__.startswith("asyncio")
    await asyncio.sleep(0)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_left_to_anyio():
    assert type(asyncio.get_running_loop()).__module__.startswith("asyncio")
    await anyio.sleep(0)
"""

# fixtures of every kind: in conftest.py (built from an import the test file does not have)
CONFTEST = """
import pytest

from myapp.service import Service


@pytest.fixture
def locked_service():
    return Service(locked=True)


@pytest.fixture
def racy_service():
    return Service()
"""

TEST_FIXTURES = """
import asyncio
import enum

import pytest

from myapp.service import Service


class Color(enum.Enum):
    RED = 1


@pytest.fixture
def key():
    return "a"


@pytest.fixture
def settings(tmp_path):
    return (Color.RED, tmp_path, 3, frozenset({"x"}))


@pytest.fixture
async def service():
    await asyncio.sleep(0)
    return Service()


@pytest.fixture
def service_cache(service):
    # a synchronous fixture taking an async one: re-created with it in every execution
    return service.cache


@pytest.fixture
async def checked_service():
    s = Service()
    yield s
    await asyncio.sleep(0)
    assert s.cache.loads == 1, f"teardown: loaded {s.cache.loads} times"


@pytest.mark.chaossloth(max_executions=200)
async def test_fresh_object(locked_service, key, settings):
    # a shared (not re-created) service would hold the previous execution's entry
    assert not locked_service.cache.data, "an execution saw the previous one's state"
    assert settings[0] is Color.RED and key == "a"
    await asyncio.gather(locked_service.handle(key), locked_service.handle(key))
    assert locked_service.cache.loads == 1


@pytest.mark.chaossloth(max_executions=200)
async def test_async_fixture_races(service, key, service_cache):
    assert service_cache is service.cache
    await asyncio.gather(service.handle(key), service.handle(key))
    assert service.cache.loads == 1, f"loaded {service.cache.loads} times"


@pytest.mark.chaossloth(max_executions=200)
async def test_teardown_inside(checked_service):
    await asyncio.gather(checked_service.handle("a"), checked_service.handle("a"))


@pytest.mark.chaossloth(max_executions=200)
async def test_conftest_fixture_races(racy_service):
    await asyncio.gather(racy_service.handle("a"), racy_service.handle("a"))
    assert racy_service.cache.loads == 1, f"loaded {racy_service.cache.loads} times"


@pytest.mark.chaossloth(max_executions=200)
async def test_monkeypatch(monkeypatch):
    await asyncio.sleep(0)
"""

TEST_ERRORS = """
import asyncio

import pytest


@pytest.mark.chaossloth(strategy="bogus")
async def test_bogus():
    await asyncio.sleep(0)


@pytest.mark.chaossloth(max_exec=3)
async def test_unknown():
    await asyncio.sleep(0)


@pytest.mark.chaossloth(max_executions="many")
async def test_wrong_type():
    await asyncio.sleep(0)


@pytest.mark.chaossloth(require_complete="yes")
async def test_require_complete_type():
    await asyncio.sleep(0)


@pytest.mark.chaossloth(max_steps=50)
async def test_forever():
    while True:
        await asyncio.sleep(0)


@pytest.mark.chaossloth
async def test_real_io():
    await asyncio.open_connection("127.0.0.1", 9)


@pytest.mark.chaossloth
def test_not_async():
    pass
"""

TEST_BUDGET = """
import asyncio

import pytest

from myapp.service import Service


@pytest.mark.chaossloth(max_executions=2)
async def test_incomplete():
    s = Service(locked=True)
    await asyncio.gather(s.handle("a"), s.handle("a"))


@pytest.mark.chaossloth(max_executions=2, require_complete=True)
async def test_required():
    s = Service(locked=True)
    await asyncio.gather(s.handle("a"), s.handle("a"))


async def late(s):
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return await s.handle("a")


# passes in the stock loop's order (the late call finds the value stored): only a reordered
# schedule shows the race
async def test_unmarked():
    s = Service()
    await asyncio.gather(s.handle("a"), late(s))
    assert s.cache.loads == 1, f"loaded {s.cache.loads} times"


def test_sync():
    pass
"""

# the three lines of the check-then-act, as the CLI names them
THREE_LINES = (
    "src/myapp/cache.py:10 `if key not in self.data:`",
    "src/myapp/cache.py:11 `await asyncio.sleep(0)`",
    'src/myapp/cache.py:13 `self.data[key] = f"value-{key}"`',
)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A src-layout project: ``src/myapp`` (the cache and the service) and ``tests/``."""
    proj = tmp_path / "proj"
    _write(proj / "pyproject.toml", '[project]\nname = "myapp"\nversion = "0"\n')
    _write(proj / "src" / "myapp" / "__init__.py", "")
    _write(proj / "src" / "myapp" / "cache.py", CACHE)
    _write(proj / "src" / "myapp" / "service.py", SERVICE)
    _write(proj / "tests" / "conftest.py", CONFTEST)
    return proj


def _pytest(project: Path, *args: str) -> tuple[str, int]:
    """Plain ``pytest`` in the project, its package on the path as an editable install puts
    it; pytest-asyncio's unset-loop-scope notice is silenced so outputs stay readable."""
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    env["PYTHONPATH"] = str(project / "src")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            *args,
        ],
        check=False,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return r.stdout + r.stderr, r.returncode


def _section(out: str, test: str) -> str:
    """The failure section of `test` in pytest's output."""
    m = re.search(rf"_+ {test} _+\n(.*?)(?=\n_{{3,}} |\n={{3,}} )", out, re.DOTALL)
    assert m is not None, out
    return m.group(1)


def _summary(out: str) -> str:
    m = re.search(r"=+ chaossloth =+\n(.*?)(?=\n=+ )", out, re.DOTALL)
    assert m is not None, out
    return m.group(1)


# ------------------------------------------------------------------ the done-when run


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_src_layout_race_is_found_in_both_asyncio_modes(project: Path, mode: str) -> None:
    mark = "@pytest.mark.asyncio" if mode == "strict" else "# (auto mode: no marker)"
    _write(project / "tests" / "test_service.py", TEST_SERVICE.replace("@ASYNCIO_MARK", mark))
    args = ("-o", f"asyncio_mode={mode}", "tests/test_service.py", "--chaossloth-report", "out")
    out, rc = _pytest(project, *args)
    assert rc == 1, out
    assert "1 failed, 3 passed" in out, out
    assert "FAILED tests/test_service.py::test_racy_cache" in out, out
    assert "needs an async def test" not in out, out
    racy = _section(out, "test_racy_cache")
    assert "failing schedule of test_racy_cache: check-then-act" in racy, racy
    for line in THREE_LINES:
        assert line in racy, racy
    # the schedule step by step (report.timeline_lines), the top finding's steps marked
    assert "the failing schedule, step by step" in racy, racy
    assert re.search(r">>\s+\d+\. Task main/\d \(Service\.handle\)", racy), racy
    assert "replay it with: chaossloth replay " in racy, racy
    assert "Traceback" not in racy, racy
    summary = _summary(out)
    assert "tests/test_service.py::test_locked_cache: passed, 4 executions, complete" in summary
    assert "tests/test_service.py::test_racy_cache: FAILED (check-then-act)" in summary
    # the other plugins' tests are theirs
    assert "test_left_to" not in summary, summary
    assert "PASSED tests/test_service.py::test_left_to_pytest_asyncio" in out, out
    assert "PASSED tests/test_service.py::test_left_to_anyio" in out, out
    # --chaossloth-report: the SARIF log and the page of the failing test, named after it
    stem = "tests_test_service.py_test_racy_cache"
    sarif, page = project / "out" / f"{stem}.sarif", project / "out" / f"{stem}.html"
    log = json.loads(sarif.read_text(encoding="utf-8"))
    assert log["runs"][0]["results"][0]["ruleId"] == "check-then-act", log
    assert "check-then-act" in page.read_text(encoding="utf-8")
    assert f"reports: {sarif}, {page}" in racy, racy
    assert sorted(p.name for p in (project / "out").iterdir()) == [page.name, sarif.name]
    # the next run replays the saved failing schedule first, and the summary says so
    out, rc = _pytest(project, *args[:3])
    assert rc == 1, out
    summary = _summary(out)
    assert "test_racy_cache: FAILED (check-then-act) after 1 execution(s)" in summary, summary
    assert "replayed 1 saved schedule(s) first" in summary, summary


# ------------------------------------------------------------------ fixtures


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_fixtures_are_shared_when_immutable_and_recreated_otherwise(
    project: Path, mode: str
) -> None:
    """In auto mode pytest-asyncio would set the async fixtures up on its own loop: they are
    left to the executions all the same."""
    _write(project / "tests" / "test_fixtures.py", TEST_FIXTURES)
    out, rc = _pytest(project, "-o", f"asyncio_mode={mode}", "tests/test_fixtures.py")
    assert rc == 1, out
    assert "4 failed, 1 passed" in out, out
    # every execution builds its own service from the conftest fixture
    assert "PASSED tests/test_fixtures.py::test_fresh_object" in out, out
    summary = _summary(out)
    assert "test_fresh_object: passed, 4 executions, complete" in summary, summary
    # an async fixture, re-created on the controlled loop: its object's race is found
    racy = _section(out, "test_async_fixture_races")
    assert "check-then-act" in racy and THREE_LINES[0] in racy, racy
    assert "run it again with: pytest 'tests/test_fixtures.py::test_async_fixture_races'" in racy
    # an async generator fixture's teardown runs inside the execution: its assertion fails
    teardown = _section(out, "test_teardown_inside")
    assert "AssertionError: teardown: loaded 2 times" in teardown, teardown
    assert "check-then-act" in teardown, teardown
    # conftest.py's fixture builds the service from its own import: instrumented too
    conftest = _section(out, "test_conftest_fixture_races")
    assert "check-then-act" in conftest and THREE_LINES[0] in conftest, conftest
    # pytest's own mutable fixture: one message
    mp = _section(out, "test_monkeypatch").strip()
    assert mp.count("\n") == 0, mp
    assert "fixture 'monkeypatch'" in mp and "cannot be re-created" in mp, mp


# ------------------------------------------------------------------ one clean message


def test_every_error_is_one_line_in_the_markers_words(project: Path) -> None:
    _write(project / "tests" / "test_errors.py", TEST_ERRORS)
    out, rc = _pytest(project, "tests/test_errors.py")
    assert rc == 1, out
    assert "7 failed" in out, out
    expected = {
        "test_bogus": "option strategy must be one of auto, dpor, pct, pos, random, fifo",
        "test_unknown": "unknown option(s) max_exec (options: strategy, max_executions,",
        "test_wrong_type": "option max_executions must be an integer of at least 1, not 'many'",
        "test_require_complete_type": "option require_complete must be True or False, not 'yes'",
        "test_forever": "still running after 50 steps, 50 of them by Task main (test_forever) "
        "(a loop that awaits); raise max_steps= if it is merely long",
        "test_real_io": "the workload does real I/O, which cannot be explored",
        "test_not_async": "@pytest.mark.chaossloth needs an async def test",
    }
    for test, words in expected.items():
        text = _section(out, test).strip()
        assert words in text, text
        assert text.count("\n") == 0, text  # one line: no traceback, not printed twice
    assert "require_complete" in _section(out, "test_unknown"), out
    assert "--max-steps" not in out and "Traceback" not in out, out


# ------------------------------------------------------------------ budgets and completeness


def test_incomplete_exploration_passes_or_fails_and_the_summary_says_so(project: Path) -> None:
    _write(project / "tests" / "test_budget.py", TEST_BUDGET)
    # a project that turns warnings into errors: an incomplete exploration is still a pass
    out, rc = _pytest(project, "-o", "asyncio_mode=auto", "-W", "error", "tests/test_budget.py")
    assert rc == 1, out
    assert "1 failed, 3 passed" in out, out
    assert "Warning" not in out, out
    # said in the test's own report section
    assert "Captured chaossloth call" in out, out
    assert re.search(
        r"test_incomplete is incomplete after 2 executions \(budget max_executions=2\)", out
    ), out
    required = _section(out, "test_required")
    assert "(require_complete=True)" in required, required
    summary = _summary(out)
    assert "test_incomplete: passed, 2 executions, incomplete (budget max_executions=2)" in summary
    assert "test_required: FAILED (incomplete, require_complete=True) after 2" in summary
    assert "explored 2: 0 complete, 1 incomplete, 1 failed; 4 schedules in" in summary, summary
    # unmarked: pytest-asyncio's (auto mode), on its stock loop, where the race does not show
    assert "test_unmarked" not in summary, summary


TEST_MANY_SCHEDULES = """
import asyncio

from myapp.service import Service


async def test_many():
    s = Service(locked=True)
    await asyncio.gather(*(s.handle(k) for k in "abcdef"))


async def test_many_more():
    s = Service(locked=True)
    await asyncio.gather(*(s.handle(k) for k in "abcdefg"))
"""


def test_a_total_budget_is_split_across_the_explored_tests(project: Path) -> None:
    _write(project / "tests" / "test_many.py", TEST_MANY_SCHEDULES)
    _write(project / "pytest.ini", "[pytest]\nchaossloth_total_budget = 0.0001\n")
    out, rc = _pytest(project, "-o", "asyncio_mode=auto", "--chaossloth", "tests/test_many.py")
    assert rc == 0, out
    summary = _summary(out)
    # each test gets what is left of the spent total (the least share): a pass, incomplete
    for name in ("test_many", "test_many_more"):
        assert re.search(
            rf"{name}: passed, \d+ executions, incomplete \(budget time_limit=0.05\)", summary
        ), summary
    _write(project / "pytest.ini", "[pytest]\nchaossloth_total_budget = soon\n")
    out, rc = _pytest(project, "--chaossloth", "tests/test_many.py")
    assert rc == 4, out
    assert (
        "ini option chaossloth_total_budget must be a positive number of seconds, not 'soon'" in out
    ), out


def test_chaossloth_flag_explores_every_async_test(project: Path) -> None:
    _write(project / "tests" / "test_budget.py", TEST_BUDGET)
    out, rc = _pytest(
        project,
        "-o",
        "asyncio_mode=auto",
        "--chaossloth",
        "--chaossloth-budget",
        "5",
        "tests/test_budget.py",
    )
    assert rc == 1, out
    assert "2 failed, 2 passed" in out, out
    unmarked = _section(out, "test_unmarked")
    assert "check-then-act" in unmarked and THREE_LINES[0] in unmarked, unmarked
    summary = _summary(out)
    assert "tests/test_budget.py::test_unmarked: FAILED (check-then-act)" in summary, summary
    # the marker's own budget wins over the flag's
    assert "test_incomplete: passed, 2 executions, incomplete (budget max_executions=2)" in summary
    assert "test_sync" not in summary, summary


def test_chaossloth_budget_must_be_positive(project: Path) -> None:
    _write(project / "tests" / "test_budget.py", TEST_BUDGET)
    out, rc = _pytest(project, "--chaossloth", "--chaossloth-budget", "0", "tests/test_budget.py")
    assert rc == 4, out
    assert "--chaossloth-budget must be a positive number of seconds, not 0" in out, out


# ------------------------------------------------------------------ test classes

TEST_CLASSES = """
import asyncio

import pytest

from myapp.service import Service


class TestService:
    def setup_method(self, method):
        self.calls = []

    @pytest.fixture
    def service(self):
        # a fixture of the class: bound to the instance the test runs on
        self.calls.append("fixture")
        return Service()

    async def test_racy(self, service):
        await asyncio.gather(service.handle("a"), service.handle("a"))
        assert service.cache.loads == 1, f"loaded {service.cache.loads} times"

    async def test_locked(self):
        s = Service(locked=True)
        await asyncio.gather(s.handle("a"), s.handle("a"))
        assert s.cache.loads == 1 and self.calls == []

    async def test_fixture_bound_to_the_instance(self, service):
        assert self.calls == ["fixture"]
        await asyncio.sleep(0)



class TestOuter:
    class TestNested:
        async def test_nested(self):
            s = Service(locked=True)
            await asyncio.gather(s.handle("b"), s.handle("b"))
            assert s.cache.loads == 1


class _ServiceMixin:
    locked = None  # set by each test class: the method runs on the collected class

    async def test_inherited(self):
        s = Service(locked=self.locked)
        await asyncio.gather(s.handle("c"), s.handle("c"))
        assert s.cache.loads == 1


class TestMixedLocked(_ServiceMixin):
    locked = True
"""


def test_methods_of_test_classes_are_explored(project: Path) -> None:
    _write(project / "tests" / "test_classes.py", TEST_CLASSES)
    out, rc = _pytest(project, "-o", "asyncio_mode=auto", "--chaossloth", "tests/test_classes.py")
    assert rc == 1, out
    assert "1 failed, 4 passed" in out, out
    racy = _section(out, "TestService.test_racy")
    assert "check-then-act" in racy and THREE_LINES[0] in racy, racy
    assert "pytest 'tests/test_classes.py::TestService::test_racy'" in racy, racy
    summary = _summary(out)
    for name in (
        "test_locked",
        "test_fixture_bound_to_the_instance",
        "TestNested::test_nested",
        "TestMixedLocked::test_inherited",
    ):
        assert re.search(rf"{name}: passed, \d+ executions, complete", summary), summary
    assert "module level" not in out, out


def test_a_test_module_with_relative_imports_is_explored(project: Path) -> None:
    """A test file of a tests package importing a sibling relatively (``from .helpers import``)
    is loaded instrumented under its package, as pytest imports it."""
    _write(project / "tests" / "__init__.py", "")
    _write(
        project / "tests" / "helpers.py",
        """
        from myapp.service import Service


        def make(locked):
            return Service(locked=locked)
        """,
    )
    _write(
        project / "tests" / "test_relative.py",
        """
        import asyncio

        from .helpers import make


        async def test_racy():
            s = make(False)
            await asyncio.gather(s.handle("a"), s.handle("a"))
            assert s.cache.loads == 1, f"loaded {s.cache.loads} times"


        async def test_locked():
            s = make(True)
            await asyncio.gather(s.handle("a"), s.handle("a"))
            assert s.cache.loads == 1
        """,
    )
    out, rc = _pytest(project, "-o", "asyncio_mode=auto", "--chaossloth", "tests/test_relative.py")
    assert rc == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "check-then-act" in _section(out, "test_racy"), out
    assert "relative import" not in out, out
    assert re.search(r"test_locked: passed, \d+ executions, complete", _summary(out)), out


# ------------------------------------------------------------------ the pure helpers


class _Flag(enum.Enum):
    ON = 1


class _Str(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        2.5,
        1j,
        "s",
        b"b",
        Decimal("1.5"),
        _Flag.ON,
        Path("/tmp"),
        PurePosixPath("a"),
        (1, ("a", None)),
        frozenset({1, "x"}),
        range(3),
    ],
)
def test_immutable_values_are_shared(value: object) -> None:
    assert is_immutable(value)


@pytest.mark.parametrize(
    "value",
    [[], {}, set(), bytearray(b"x"), (1, []), frozenset({(1, object())}), object(), _Str("s")],
)
def test_mutable_values_are_recreated(value: object) -> None:
    assert not is_immutable(value)


def test_cli_flags_become_the_markers_options() -> None:
    assert marker_words("Raise --max-steps if long") == "Raise max_steps= if long"
    assert marker_words("use --no-telemetry") == "use telemetry=False"
    assert marker_words("--max-executions N, --strategy x") == "max_executions= N, strategy= x"
    # a longer flag that starts like another is not cut
    assert marker_words("--max-stepsy") == "--max-stepsy"
