"""The real-library tier: published asyncio libraries from PyPI, at pinned releases, checked as
a user checks them (the installed ``chaossloth`` command, a scenario file in a project of its
own, the library installed as a library).  tests/real_libraries/README.md is the interface of
the scenario files; each of their CASES is one test here, and each case that runs (expected
``complete`` or ``fail``) is also checked for determinism: its steps recorded in two processes
with other hash seeds, with garbage allocated between runs, must be the same.

The libraries are installed once per interpreter and requirement set into
``build/real-libs/<python>/<set>/site-packages`` (``pip install --target``; the directory is
named site-packages, so ChaosSloth takes it for installed libraries), reused by later runs.
Each case's result is appended to ``build/real-libs/results-<python>.jsonl`` (library, release,
case, verdict, executions, seconds), the table of the tier's report.
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIER = ROOT / "tests" / "real_libraries"
SCENARIOS = TIER / "scenarios"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CACHE = ROOT / "build" / "real-libs"
#: one case's budget for the check process (the scenarios take seconds; this catches a hang)
CASE_TIMEOUT = 600

pytestmark = pytest.mark.real_libraries


def _literal(tree: ast.Module, name: str, default: Any) -> Any:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            return ast.literal_eval(node.value)
    return default


def _cases() -> list[Any]:
    params = []
    for path in sorted(SCENARIOS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        cases = _literal(tree, "CASES", None)
        assert isinstance(cases, list) and cases, f"{path.name}: CASES must be a non-empty list"
        meta = {
            "instrument": list(_literal(tree, "INSTRUMENT", [])),
            "args": list(_literal(tree, "ARGS", [])),
        }
        for i, case in enumerate(cases):
            assert case.get("expect") in ("complete", "fail", "refused", "incomplete"), (
                path.name,
                case,
            )
            reqs = case.get("requires", [])
            label = "-".join(r.replace("==", "") for r in reqs) or "stdlib"
            marks = []
            pythons = case.get("pythons")
            if pythons and PY not in pythons:
                marks.append(pytest.mark.skip(reason=f"{label} does not install on {PY}"))
            if case.get("known_limitation"):
                # ChaosSloth's answer is known to be wrong here (the case states the right one);
                # not strict: a wrong answer that depends on addresses may come and go
                marks.append(pytest.mark.xfail(strict=False, reason=case["known_limitation"]))
            params.append(pytest.param(path, case, meta, id=f"{path.stem}[{label}]", marks=marks))
    return params


CASES = _cases()


def _steps_cases() -> list[Any]:
    """The cases whose steps are recorded (those that run: complete or fail), each with its
    skip, and an xfail where the case says its steps differ ("steps_differ", see the README)."""
    params = []
    for p in CASES:
        case = p.values[1]
        if case["expect"] not in ("complete", "fail"):
            continue
        marks = [m for m in p.marks if m.name == "skip"]
        if case.get("steps_differ"):
            marks.append(pytest.mark.xfail(strict=False, reason=case["steps_differ"]))
        params.append(pytest.param(*p.values, id=p.id, marks=marks))
    return params


def _library_dir(requires: list[str]) -> Path | None:
    """The site-packages directory holding `requires` for this interpreter, installed at first
    use (a lock file serializes pytest-xdist workers installing the same set)."""
    if not requires:
        return None
    key = hashlib.sha256("\n".join(sorted(requires)).encode()).hexdigest()[:12]
    slug = "-".join(r.replace("==", "-") for r in requires)[:60]
    home = CACHE / PY / f"{slug}-{key}"
    target = home / "site-packages"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".installed").exists():
            shutil.rmtree(target, ignore_errors=True)
            cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-input"]
            cmd += ["--disable-pip-version-check", "--target", str(target), *requires]
            done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"pip install {requires} failed:\n{done.stderr[-3000:]}"
            (home / ".installed").write_text("\n".join(requires) + "\n")
    return target


def _env(target: Path | None, hash_seed: str = "0") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAOSSLOTH_")}
    env["PYTHONHASHSEED"] = hash_seed
    env.pop("PYTHONPATH", None)
    if target is not None:
        env["PYTHONPATH"] = str(target)
    return env


def _project(tmp_path: Path, path: Path) -> Path:
    """The scenario as a user has it: a file in a project of its own."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[project]\nname = "scenario"\nversion = "0"\n')
    dest = proj / path.name
    shutil.copyfile(path, dest)
    return dest


_TRACEBACK_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def _frames(text: str) -> list[tuple[str, int]]:
    """The (file, line) of every frame of the tracebacks in text."""
    return [(Path(f).as_posix(), int(n)) for f, n in _TRACEBACK_LINE.findall(text)]


def _named_lines(report: dict[str, Any]) -> set[tuple[str, int]]:
    """The lines the report names: the findings' lines and the failure's traceback frames
    (where a callback raised before a deadlock, say)."""
    out = set(_frames((report.get("failure") or {}).get("traceback", "")))
    for f in report.get("findings") or []:
        places = [f.get(k) for k in ("local_access", "await", "remote_access")]
        places += [f.get("second_local_access"), *(f.get("lines") or [])]
        for p in places:
            if isinstance(p, dict) and p.get("file") and p.get("line"):
                out.add((Path(p["file"]).as_posix(), int(p["line"])))
    return out


def _record(path: Path, case: dict[str, Any], report: dict[str, Any], seconds: float) -> None:
    row = {
        "scenario": path.stem,
        "requires": case.get("requires", []),
        "expect": case["expect"],
        "verdict": report.get("verdict"),
        "hazard": report.get("hazard"),
        "complete": report.get("complete"),
        "executions": report.get("executions"),
        "seconds": round(seconds, 2),
    }
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"results-{PY}.jsonl", "a") as out:
        out.write(json.dumps(row) + "\n")


@pytest.mark.parametrize(("path", "case", "meta"), CASES)
def test_case(path: Path, case: dict[str, Any], meta: dict[str, Any], tmp_path: Path) -> None:
    target = _library_dir(case.get("requires", []))
    file = _project(tmp_path, path)
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "chaossloth", "check", str(file), "--scenario", "scenario"]
    cmd += ["--json", str(out), "-q"]
    for pkg in meta["instrument"]:
        cmd += ["--instrument", pkg]
    cmd += meta["args"]
    t0 = time.monotonic()
    done = subprocess.run(
        cmd,
        check=False,
        cwd=file.parent,
        env=_env(target),
        capture_output=True,
        text=True,
        timeout=CASE_TIMEOUT,
    )
    seconds = time.monotonic() - t0
    said = f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # the program's own output may hold tracebacks (asyncio logs a callback's exception on the
    # stock loop of stage 4); none may come from ChaosSloth's code
    assert not [f for f, _ in _frames(done.stderr) if "/chaossloth/" in f], said
    assert "internal error" not in done.stderr, said
    expect = case["expect"]
    if expect == "refused":
        assert done.returncode == 2, said
        assert case["message"] in done.stderr, said
        assert len(done.stderr.strip().splitlines()) == 1, said
        return
    assert out.exists(), said
    report = json.loads(out.read_text())
    _record(path, case, report, seconds)
    if expect == "complete":
        assert done.returncode == 0, said
        assert report["complete"] is True, said
        return
    if expect == "incomplete":
        assert done.returncode == 0, said
        assert report["verdict"] == "pass" and report["complete"] is False, said
        assert case["message"] in report["incomplete_reason"], said
        return
    assert done.returncode == 1, said
    assert report["hazard"] == case["hazard"], said
    named = _named_lines(report)
    for want in case.get("lines", []):
        suffix, _, line = want.rpartition(":")
        assert any(f.endswith("/" + suffix) and n == int(line) for f, n in named), (
            f"{want} is not among the lines the findings name: {sorted(named)}\n{said}"
        )


@pytest.mark.parametrize(("path", "case", "meta"), _steps_cases())
def test_case_records_the_same_steps(
    path: Path, case: dict[str, Any], meta: dict[str, Any], tmp_path: Path
) -> None:
    """Under the same schedules, two processes with other hash seeds, and two runs in one
    process with garbage allocated between them, record the same steps: what a step records is
    a function of the program's state and the schedule only."""
    target = _library_dir(case.get("requires", []))
    file = _project(tmp_path, path)
    files = []
    for seed, extra in (("1", []), ("2", ["--garbage"])):
        dest = tmp_path / f"steps-{seed}.json"
        cmd = [sys.executable, str(TIER / "record_steps.py"), str(file), str(dest), *extra]
        for pkg in meta["instrument"]:
            cmd += ["--instrument", pkg]
        done = subprocess.run(
            cmd,
            check=False,
            cwd=file.parent,
            env=_env(target, seed),
            capture_output=True,
            text=True,
            timeout=CASE_TIMEOUT,
        )
        assert done.returncode == 0, f"hash seed {seed}: {done.stderr[-3000:]}"
        files.append(json.loads(dest.read_text()))
    first, second = files
    assert first.keys() == second.keys()
    for label in first:
        a, b = first[label]["steps"], second[label]["steps"]
        assert [s["actor"] for s in a] == [s["actor"] for s in b], label
        for i, (x, y) in enumerate(zip(a, b)):
            assert x == y, f"{label}: step {i} ({x['actor']}) differs between hash seeds"
