"""The real-suite tier: published asyncio libraries' own test suites, from their sdists on PyPI
at pinned releases, run plainly and under ``pytest --chaossloth`` as a user would add the flag
(the library installed as a library and instrumented, its tests run from its source tree).

A test that passes plainly must pass under the plugin: any that does not is a failure of
ChaosSloth's (a false finding, a refusal, a crash), unless the suite lists it in ``known`` with
the reason, in which case it must still fail that way (a listed test that passes is an error:
remove it from the list).  The sdists are downloaded once into ``build/real-libs/sdists``; the
libraries are installed as the real-library tier installs them (its ``_library_dir``).  Each
suite's counts and both wall times are appended to ``build/real-libs/suites-<python>.jsonl``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_real_libraries import CACHE, PY, _env, _library_dir

pytestmark = pytest.mark.real_libraries

#: one suite's budget per run (plain or plugin): catches a hang
RUN_TIMEOUT = 900

#: the project's pytest settings, less what needs plugins the tier does not install (coverage,
#: pytest-timeout); a suite is run with ``-c`` on a file of these
SUITES: dict[str, dict[str, Any]] = {
    "janus": {
        "sdist": "janus==2.0.0",
        "package": "janus",
        "tests": ["tests/test_async.py"],
        "ini": {
            "asyncio_mode": "strict",
            "asyncio_default_fixture_loop_scope": "function",
            "filterwarnings": [
                "error",
                "ignore:unclosed event loop:ResourceWarning",
                "ignore:unclosed <socket.socket.+>:ResourceWarning",
            ],
        },
        # test_mixed.py and test_sync.py drive the queue from threads, which the controlled
        # loop does not see (issue 37): not run here
        "known": {},
    },
    "async-lru": {
        "sdist": "async-lru==2.0.5",
        "package": "async_lru",
        "tests": ["tests"],
        "ini": {
            "asyncio_mode": "auto",
            "asyncio_default_fixture_loop_scope": "function",
            "filterwarnings": ["error"],
            "xfail_strict": "true",
        },
        "known": {},
    },
}


def _sdist_tree(spec: str, dest: Path) -> Path:
    """The unpacked sdist of `spec` (name==version) under `dest`, downloaded once."""
    cache = CACHE / "sdists"
    cache.mkdir(parents=True, exist_ok=True)
    name, _, version = spec.partition("==")
    stem = f"{name.replace('-', '_')}-{version}".lower()

    def cached() -> list[Path]:
        return [p for p in cache.glob("*.tar.gz") if p.name.lower().startswith(stem)]

    if not cached():
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
        cmd += ["--disable-pip-version-check", "-d", str(cache), spec]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"pip download {spec} failed:\n{done.stderr[-3000:]}"
    found = cached()
    assert len(found) == 1, found
    with tarfile.open(found[0]) as tar:
        tar.extractall(dest, filter="data")
    (root,) = [p for p in dest.iterdir() if p.is_dir()]
    return root


def _ini(settings: dict[str, Any]) -> str:
    lines = ["[pytest]"]
    for key, value in settings.items():
        if isinstance(value, list):
            lines.append(f"{key} =")
            lines += [f"    {v}" for v in value]
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def _outcomes(junit: Path) -> dict[str, str]:
    """test id (classname::name) -> passed, failed, error or skipped, from a JUnit XML file."""
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
        out[tid] = status
    return out


def _run(root: Path, suite: dict[str, Any], site: Path, junit: Path, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "tier.ini"]
    cmd += ["--rootdir", ".", f"--junitxml={junit}", *extra, *suite["tests"]]
    t0 = time.monotonic()
    done = subprocess.run(
        cmd,
        check=False,
        cwd=root,
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    seconds = time.monotonic() - t0
    # 0: all passed, 1: some failed; anything else (usage, internal error) is the tier's
    assert done.returncode in (0, 1), f"exit {done.returncode}\n{done.stdout[-4000:]}"
    assert junit.exists(), done.stdout[-4000:]
    return seconds


@pytest.mark.parametrize("name", sorted(SUITES))
def test_suite_passes_under_the_plugin(name: str, tmp_path: Path) -> None:
    suite = SUITES[name]
    site = _library_dir([suite["sdist"]])
    assert site is not None
    root = _sdist_tree(suite["sdist"], tmp_path)
    # the tests import the installed library (as the project's CI does after `pip install .`)
    shutil.rmtree(root / suite["package"])
    (root / "tier.ini").write_text(_ini(suite["ini"]))
    plain_s = _run(root, suite, site, tmp_path / "plain.xml", [])
    plain = _outcomes(tmp_path / "plain.xml")
    flags = ["--chaossloth", "-o", f"chaossloth_instrument={suite['package']}"]
    plugin_s = _run(root, suite, site, tmp_path / "plugin.xml", flags)
    plugin = _outcomes(tmp_path / "plugin.xml")
    passing = sorted(t for t, s in plain.items() if s == "passed")
    assert passing, f"{name}: no test passes plainly: {plain}"
    broken = [t for t in passing if plugin.get(t) != "passed" and t not in suite["known"]]
    healed = [t for t in suite["known"] if plugin.get(t) == "passed"]
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"suites-{PY}.jsonl", "a") as out:
        row = {
            "suite": suite["sdist"],
            "plain_passed": len(passing),
            "plugin_passed": sum(plugin.get(t) == "passed" for t in passing),
            "plain_seconds": round(plain_s, 2),
            "plugin_seconds": round(plugin_s, 2),
        }
        out.write(json.dumps(row) + "\n")
    assert not broken, f"{name}: pass plainly, not under --chaossloth: {broken}"
    assert not healed, f"{name}: listed as known failures but pass now: {healed}"
