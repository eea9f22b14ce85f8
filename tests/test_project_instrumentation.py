"""The user's project is instrumented, not only the file's directory (issues 9 and 12).

A src-layout project (``src/myapp`` with a check-then-act on a dict in ``cache.py`` called from
``service.py``; ``tests/`` with a scenario file and a ``@pytest.mark.chaossloth`` test) is
checked from the project root with no flag, by the CLI and by the pytest plugin.  A package
outside the project (a temporary "site-packages" directory on PYTHONPATH) is not instrumented by
default, and is with ``--instrument``, with pyproject.toml's ``[tool.chaossloth]``, with the
marker's option and with the ini key.  The editable install is modelled by PYTHONPATH pointing
at ``src/`` (what its ``.pth`` does); one slow test makes a real ``pip install -e``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest

from chaossloth.capture import importer
from chaossloth.errors import InputError

CACHE = """
import asyncio


class Cache:
    def __init__(self):
        self.data = {}
        self.loads = 0

    async def get(self, key):
        if key not in self.data:
            await asyncio.sleep(0)
            self.loads += 1
            self.data[key] = f"value-{key}"
        return self.data[key]


class LockedCache(Cache):
    def __init__(self):
        super().__init__()
        self.lock = asyncio.Lock()

    async def get(self, key):
        async with self.lock:
            return await super().get(key)
"""

# handle() awaits (the request's own work) before it looks the key up: tasks start in the order
# they were created, so lookups in the tasks' first steps would run in that order on every loop
# (the locked cache's gets in one order, the plain one's checks both before either load)
SERVICE = """
import asyncio

from myapp.cache import Cache, LockedCache


class Service:
    def __init__(self, locked=False):
        self.cache = LockedCache() if locked else Cache()

    async def handle(self, key):
        await asyncio.sleep(0)  # the request's own work
        return await self.cache.get(key)
"""

SCENARIO = """
import asyncio

from myapp.service import Service


async def main():
    s = Service()
    await asyncio.gather(s.handle("a"), s.handle("a"))
    assert s.cache.loads == 1, f"loaded {s.cache.loads} times"
"""

# collection imports myapp.cache before any exploration: it must be re-imported instrumented
CONFTEST = """
import myapp.cache  # noqa: F401
"""

TEST_SERVICE = """
import asyncio
import sys

import myapp.cache as cache_before
import pytest

from chaossloth.capture.importer import is_instrumented
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


def test_modules_imported_before_are_back():
    assert sys.modules["myapp.cache"] is cache_before
    assert not is_instrumented(cache_before)
"""

# the same cache as an installed third-party package, outside the project
EXT_CACHE = CACHE

# the default order passes (the second task checks after the first one stored the value): only
# a reordered schedule fails, which needs the accesses inside extcache
EXT_SCENARIO = """
import asyncio

from extcache import Cache


async def late(c):
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return await c.get("a")


async def main():
    c = Cache()
    await asyncio.gather(c.get("a"), late(c))
    assert c.loads == 1, f"loaded {c.loads} times"
"""

# fails in the default order already: the failure runs through extcache's frames.  Each get
# comes after a first yield: the tasks start in the order gather created them, so two gets in
# their first steps would both miss in every schedule (no passing order to tell the failing
# one from); after that yield a get can also end before the other one checks
EXT_FAILS = """
import asyncio

from extcache import Cache


async def get(c):
    await asyncio.sleep(0)
    return await c.get("a")


async def main():
    c = Cache()
    await asyncio.gather(get(c), get(c))
    assert c.loads == 1, f"loaded {c.loads} times"
"""

EXT_TEST = """
import asyncio

import pytest

from extcache import Cache


async def late(c):
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return await c.get("a")


@pytest.mark.chaossloth(max_executions=200, instrument=["extcache"])
async def test_ext_marker():
    c = Cache()
    await asyncio.gather(c.get("a"), late(c))
    assert c.loads == 1, f"loaded {c.loads} times"
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A src-layout project and, next to it, a "site-packages" directory holding extcache."""
    proj = tmp_path / "proj"
    _write(proj / "pyproject.toml", '[project]\nname = "myapp"\nversion = "0"\n')
    _write(proj / "src" / "myapp" / "__init__.py", "")
    _write(proj / "src" / "myapp" / "cache.py", CACHE)
    _write(proj / "src" / "myapp" / "service.py", SERVICE)
    _write(proj / "tests" / "scenario_service.py", SCENARIO)
    _write(proj / "tests" / "conftest.py", CONFTEST)
    _write(proj / "tests" / "test_service.py", TEST_SERVICE)
    _write(proj / "tests" / "scenario_ext.py", EXT_SCENARIO)
    _write(proj / "tests" / "scenario_ext_fails.py", EXT_FAILS)
    _write(tmp_path / "site" / "extcache" / "__init__.py", EXT_CACHE)
    return proj


def _run(
    args: list[str], cwd: Path, pythonpath: list[Path], python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    else:
        env.pop("PYTHONPATH", None)
    return subprocess.run(
        [python, *args], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _paths(project: Path) -> list[Path]:
    return [project / "src", project.parent / "site"]


def _check(project: Path, *args: str, python: str = sys.executable) -> tuple[Any, str, int]:
    out = project / "out.json"
    r = _run(
        ["-m", "chaossloth", "check", *args, "--no-telemetry", "--json", str(out)],
        project,
        _paths(project),
        python,
    )
    text = r.stdout + r.stderr
    report = json.loads(out.read_text()) if out.exists() else None
    return report, text, r.returncode


def _has_check_then_act_in(report: dict[str, Any], file_tail: str) -> bool:
    for f in report["findings"]:
        local = f["local_access"] or {}
        if f["hazard"] == "check-then-act" and local.get("file", "").endswith(file_tail):
            return local["text"] == "if key not in self.data:"
    return False


# ------------------------------------------------------------------ the scope, in-process


def test_project_root_is_the_nearest_marked_ancestor(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "setup.cfg").write_text("")
    f = tmp_path / "a" / "b" / "t.py"
    f.write_text("")
    assert importer.project_root(f) == (tmp_path / "a").resolve()
    bare = tmp_path / "c"
    bare.mkdir()
    (bare / "t.py").write_text("")
    # no marker up to / : the file's own directory (tmp dirs hold no marker above them)
    if not any((p / m).exists() for p in bare.resolve().parents for m in importer.PROJECT_MARKERS):
        assert importer.project_root(bare / "t.py") == bare.resolve()


def test_scope_leaves_out_venvs_build_and_libraries(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    for rel in (
        "src/myapp/m.py",
        ".venv/lib/x.py",
        "venv/lib/x.py",
        "env2/lib/x.py",
        "build/lib/myapp/m.py",
        "vendor/site-packages/x.py",
    ):
        _write(root / rel, "")
    (root / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    scope = importer.Scope((str(root.resolve()),))
    assert scope.wants("myapp.m", str(root / "src/myapp/m.py"))
    for rel in (".venv/lib/x.py", "venv/lib/x.py", "env2/lib/x.py", "build/lib/myapp/m.py"):
        assert not scope.wants("x", str(root / rel)), rel
    assert not scope.wants("x", str(root / "vendor/site-packages/x.py"))
    assert not scope.wants("json", str(Path(sysconfig.get_paths()["stdlib"]) / "json/__init__.py"))
    assert not scope.wants("chaossloth.runner", importer.__file__)
    # a named package is instrumented wherever it is installed
    named = importer.Scope((str(root.resolve()),), ("x",))
    assert named.wants("x", str(root / ".venv/lib/x.py"))


def test_unknown_or_stdlib_package_is_an_input_error(tmp_path: Path) -> None:
    f = tmp_path / "t.py"
    f.write_text("")
    with pytest.raises(InputError, match="no installed package or module named 'no_such_pkg_x'"):
        importer.scope_for(f, ["no_such_pkg_x"])
    with pytest.raises(InputError, match="standard library"):
        importer.scope_for(f, ["asyncio"])
    (tmp_path / "pyproject.toml").write_text('[tool.chaossloth]\ninstrument = "pytest"\n')
    with pytest.raises(InputError, match="must be a list of package names"):
        importer.scope_for(f)
    (tmp_path / "pyproject.toml").write_text('[tool.chaossloth]\ninstrument = ["pytest"]\n')
    assert importer.scope_for(f).modules == ("pytest",)


# ------------------------------------------------------------------ the CLI


def test_cli_finds_the_race_in_the_src_package_with_no_flag(project: Path) -> None:
    report, text, rc = _check(project, "tests/scenario_service.py")
    assert rc == 1, text
    assert report["hazard"] == "check-then-act", text
    assert _has_check_then_act_in(report, "src/myapp/cache.py"), report["findings"]
    assert {"myapp", "myapp.cache", "myapp.service", "scenario_service"} <= set(
        report["instrumented"]
    )
    assert report["uninstrumented"] == []
    assert "instrumented: " in text and "myapp.cache" in text, text


def test_cli_leaves_an_outside_package_alone_by_default(project: Path) -> None:
    report, text, rc = _check(project, "tests/scenario_ext.py")
    assert rc in (0, 1), text
    assert "extcache" not in report["instrumented"], report["instrumented"]
    assert "scenario_ext" in report["instrumented"]


def test_failure_through_uninstrumented_code_says_so(project: Path) -> None:
    report, text, rc = _check(project, "tests/scenario_ext_fails.py")
    assert rc == 1, text
    assert report["uninstrumented"] == ["extcache"], text
    # what the library's coroutines write, seen coarsely (a call into it writes its receiver;
    # each resumed frame writes what it can reach, at the line it resumes: ext/hooks.c), orders
    # the two gets; the detail needs the package instrumented
    assert report["hazard"] == "order-violation", text
    assert "order violation on c: " in text, text
    assert "write at ../site/extcache/__init__.py:11 `await asyncio.sleep(0)`" in text, text
    assert "write what extcache.Cache.get reaches" in text, text
    assert "the failure passes through uninstrumented module extcache" in text, text
    assert "add --instrument extcache" in text, text


def test_cli_instrument_flag_finds_the_race_in_the_package(project: Path) -> None:
    report, text, rc = _check(project, "tests/scenario_ext.py", "--instrument", "extcache")
    assert rc == 1, text
    assert "extcache" in report["instrumented"]
    assert _has_check_then_act_in(report, "extcache/__init__.py"), report["findings"]
    # the schedule file records the option: the replay instruments the package too
    sched = json.loads(Path(project, report["schedule_file"]).read_text())
    assert sched["program"]["instrument"] == ["extcache"]
    rep = _run(["-m", "chaossloth", "replay", report["schedule_file"]], project, _paths(project))
    assert rep.returncode == 1, rep.stdout + rep.stderr


def test_pyproject_instrument_finds_the_race_in_the_package(project: Path) -> None:
    with open(project / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write('\n[tool.chaossloth]\ninstrument = ["extcache"]\n')
    report, text, rc = _check(project, "tests/scenario_ext.py")
    assert rc == 1, text
    assert "extcache" in report["instrumented"]
    assert _has_check_then_act_in(report, "extcache/__init__.py"), report["findings"]


def test_unknown_package_exits_2(project: Path) -> None:
    report, text, rc = _check(project, "tests/scenario_ext.py", "--instrument", "no_such_pkg_x")
    assert rc == 2, text
    assert "--instrument: no installed package or module named 'no_such_pkg_x'" in text
    assert report is None


# ------------------------------------------------------------------ the pytest plugin


def _pytest(project: Path, *args: str, python: str = sys.executable) -> tuple[str, int]:
    r = _run(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *args],
        project,
        _paths(project),
        python,
    )
    return r.stdout + r.stderr, r.returncode


def test_pytest_plugin_finds_the_race_in_the_src_package(project: Path) -> None:
    out, rc = _pytest(project, "tests/test_service.py")
    assert rc == 1, out
    assert "1 failed, 2 passed" in out, out
    assert "FAILED tests/test_service.py::test_racy_cache" in out, out
    assert "check-then-act" in out, out
    assert "src/myapp/cache.py:10 `if key not in self.data:`" in out, out
    assert "myapp.cache" in out.split("instrumented:")[1], out


def test_pytest_marker_and_ini_instrument_an_installed_package(project: Path) -> None:
    _write(project / "tests" / "test_ext.py", EXT_TEST)
    out, rc = _pytest(project, "tests/test_ext.py")
    assert rc == 1, out
    assert "extcache/__init__.py:10 `if key not in self.data:`" in out, out
    # the ini key, for a marker without the option
    _write(
        project / "tests" / "test_ext.py",
        EXT_TEST.replace(', instrument=["extcache"]', ""),
    )
    out, rc = _pytest(project, "tests/test_ext.py", "-o", "chaossloth_instrument=extcache")
    assert rc == 1, out
    assert "extcache/__init__.py:10 `if key not in self.data:`" in out, out


# a helper next to the tests that conftest imports, reached by the test only dynamically
DYN_CONFTEST = """
import myapp.cache  # noqa: F401
import dyn_helper  # noqa: F401
"""

DYN_TEST = """
import asyncio
import importlib

import pytest

helper = importlib.import_module("dyn_helper")


@pytest.mark.chaossloth(max_executions=200)
async def test_dynamic():
    c = helper.Cache()
    await asyncio.gather(c.get("a"), c.get("a"))
    assert c.loads == 1, f"loaded {c.loads} times"
"""


def test_module_imported_before_and_reached_dynamically_is_reimported(project: Path) -> None:
    _write(project / "tests" / "dyn_helper.py", CACHE)
    _write(project / "tests" / "conftest.py", DYN_CONFTEST)
    _write(project / "tests" / "test_dyn.py", DYN_TEST)
    out, rc = _pytest(project, "tests/test_dyn.py")
    assert rc == 1, out
    assert "tests/dyn_helper.py:10 `if key not in self.data:`" in out, out
    assert "dyn_helper" in out.split("instrumented:")[1], out


# ------------------------------------------------------------------ a real editable install


@pytest.mark.slow
def test_real_editable_install(project: Path, tmp_path: Path) -> None:
    """``pip install -e`` of the project into a fresh virtualenv that sees this ChaosSloth:
    the CLI and the plugin instrument the package through the editable install."""
    if importlib.util.find_spec("setuptools") is None:
        # the build backend must come from here: the test runs offline (--no-index)
        pytest.skip("this interpreter has no setuptools to build the editable install with")
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
        timeout=120,
    )
    py = str(venv / "bin" / "python")
    site_dir = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # this interpreter's site-packages (ChaosSloth, pytest, setuptools) as a site dir of the venv
    ours = sysconfig.get_paths()["purelib"]
    Path(site_dir, "_chaossloth_tests.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    pip = subprocess.run(  # noqa: PLW1510 - its failure is asserted with pip's output
        [
            py,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-e",
            str(project),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if pip.returncode != 0 and "No module named pip" in pip.stderr:
        pytest.skip("this interpreter's site-packages holds no pip to install with")
    assert pip.returncode == 0, pip.stdout + pip.stderr
    env_paths: list[Path] = []  # no PYTHONPATH: the editable install finds myapp
    r = _run(
        [
            "-m",
            "chaossloth",
            "check",
            "tests/scenario_service.py",
            "--no-telemetry",
            "--json",
            "out.json",
        ],
        project,
        env_paths,
        py,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads((project / "out.json").read_text())
    assert _has_check_then_act_in(report, "src/myapp/cache.py"), report["findings"]
    r = _run(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_service.py"],
        project,
        env_paths,
        py,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "1 failed, 2 passed" in out, out
    assert "src/myapp/cache.py:10 `if key not in self.data:`" in out, out
