"""The failure database (.chaossloth/failures): failing schedules saved, replayed first on the
next run, dropped when fixed or when they no longer fit; shared by the CLI and the pytest plugin.
End to end as a user runs it (the command and pytest in a subprocess), plus the database's own
rules (bound, symlinks, unwritable directory, concurrent writers) in-process."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import cli, run_module

from chaossloth import database, schedule
from chaossloth.runner import Step

#: passes in the default order; DPOR needs a few executions to reach the lost update
RACY = """
import asyncio


class Counter:
    def __init__(self):
        self.value = 0


async def worker(c, delay):
    for _ in range(delay):
        await asyncio.sleep(0)
    v = c.value
    await asyncio.sleep(0)
    c.value = v + 1


async def main():
    c = Counter()
    await asyncio.gather(worker(c, 0), worker(c, 2))
    assert c.value == 2, c.value
"""
#: the fix keeps every step (the read moves after the await): the saved schedule replays, passes
FIXED = RACY.replace(
    "    v = c.value\n    await asyncio.sleep(0)\n    c.value = v + 1\n",
    "    await asyncio.sleep(0)\n    c.value += 1\n",
)
#: still racy, with other steps: the saved schedule no longer fits (its replay diverges)
RESHAPED = RACY.replace("worker(c, 2)", "worker(c, 1)")

BUDGET = ("--max-executions", "200", "--no-telemetry")


def _check(tmp_path: Path, *extra: str) -> tuple[int, str, dict]:
    r = cli(
        "check", "racy.py", "--scenario", "main", *BUDGET, "--json", "r.json", *extra, cwd=tmp_path
    )
    assert r.returncode in (0, 1), r.stdout + r.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    return r.returncode, r.stdout, report


def _saved(root: Path) -> list[Path]:
    return sorted((root / ".chaossloth" / database.SUBDIR).glob("*/*.json"))


def test_saved_replayed_first_then_dropped_when_fixed(tmp_path: Path) -> None:
    (tmp_path / "racy.py").write_text(RACY)
    code, out, rep = _check(tmp_path)
    assert code == 1 and rep["executions"] > 1, out
    assert rep["database"]["replayed"] == 0 and rep["database"]["saved"], rep["database"]
    saved = _saved(tmp_path)
    assert len(saved) == 1 and "failure database: saved as" in out
    # the next run replays it first: the failure at execution 1, no exploration
    code, out, rep = _check(tmp_path)
    assert code == 1, out
    assert "failure database .chaossloth: replayed 1 saved schedule(s) first, 1 failed again" in out
    assert "found after 1 execution(s)" in out
    assert rep["executions"] == 1 and rep["hazard"] == "lost-update"
    assert rep["database"] == {
        "dir": ".chaossloth",
        "replayed": 1,
        "reproduced": 1,
        "dropped": [],
        "saved": None,
        "notes": [],
    }
    assert _saved(tmp_path) == saved
    # deleting the directory forgets: the run explores again (and saves again)
    shutil.rmtree(tmp_path / ".chaossloth")
    code, out, rep = _check(tmp_path)
    assert code == 1 and rep["executions"] > 1 and "saved schedule(s) first" not in out
    assert _saved(tmp_path) == saved
    # fixed: the schedule passes now, is dropped, and the run passes
    (tmp_path / "racy.py").write_text(FIXED)
    code, out, rep = _check(tmp_path)
    assert code == 0, out
    assert rep["database"]["replayed"] == 1 and rep["database"]["reproduced"] == 0
    assert rep["database"]["dropped"] == [
        {"file": str(saved[0].relative_to(tmp_path)), "reason": "passes now (fixed)"}
    ]
    assert "passes now (fixed)" in out and _saved(tmp_path) == []
    code, out, rep = _check(tmp_path)
    assert code == 0 and rep["database"]["replayed"] == 0 and "failure database" not in out


def test_schedules_that_no_longer_fit_are_dropped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "racy.py").write_text(RACY)
    assert _check(tmp_path)[0] == 1
    [good] = _saved(tmp_path)
    folder = good.parent
    (folder / "0000000000000001.json").write_text("{ not json")
    data = json.loads(good.read_text())
    data["version"] = 99
    (folder / "0000000000000002.json").write_text(json.dumps(data))
    (tmp_path / "racy.py").write_text(RESHAPED)
    code, out, rep = _check(tmp_path)
    # every misfit dropped with its reason; the exploration runs and finds the failure anew
    reasons = {Path(d["file"]).name: d["reason"] for d in rep["database"]["dropped"]}
    assert reasons.keys() == {good.name, "0000000000000001.json", "0000000000000002.json"}
    assert reasons[good.name].startswith("no longer fits the program: the replay diverged")
    assert "not valid JSON" in reasons["0000000000000001.json"]
    assert "version 99 is not supported" in reasons["0000000000000002.json"]
    assert f"dropped .chaossloth/failures/{folder.name}/0000000000000001.json: unreadable" in out
    assert code == 1 and rep["database"]["replayed"] == 1 and rep["executions"] > 1, out
    assert [p.name for p in _saved(tmp_path)] == [Path(rep["database"]["saved"]).name]


def test_database_off_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "racy.py").write_text(RACY)
    for off in (("--database", ""), ("--no-database",)):
        code, out, rep = _check(tmp_path, *off, "--schedule-out", "s.json")
        assert code == 1 and rep["database"] is None and "failure database" not in out
        assert not (tmp_path / ".chaossloth").exists()


def test_unwritable_database_is_a_note_not_a_lost_verdict(tmp_path: Path) -> None:
    (tmp_path / "racy.py").write_text(RACY)
    (tmp_path / "db").write_text("a file, not a directory")
    code, out, rep = _check(tmp_path, "--database", "db")
    assert code == 1 and rep["verdict"] == "fail" and rep["database"]["saved"] is None
    [note] = rep["database"]["notes"]
    assert note.startswith("cannot save to db (") and f"failure database: {note}" in out


PLUGIN_TEST = """
import asyncio

import pytest


class Box:
    def __init__(self):
        self.v = 0

    async def bump(self, delay):
        for _ in range(delay):
            await asyncio.sleep(0)
        v = self.v
        await asyncio.sleep(0)
        self.v = v + 1


@pytest.mark.chaossloth(max_executions=200)
async def test_bump():
    b = Box()
    await asyncio.gather(b.bump(0), b.bump(2))
    assert b.v == 2
"""


def test_plugin_and_cli_share_the_database(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "tests").mkdir()
    test_file = tmp_path / "tests" / "test_box.py"
    test_file.write_text(textwrap.dedent(PLUGIN_TEST))
    pytest_args = ("-q", "-p", "no:cacheprovider", "tests/test_box.py")
    r = run_module("pytest", *pytest_args, cwd=tmp_path)
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout + r.stderr
    [saved] = _saved(tmp_path)
    assert saved.parent.name.startswith("test_box.test_bump-")
    # the CLI on the test file's scenario reads the schedule the plugin saved
    r = cli("check", "tests/test_box.py", "--scenario", "test_bump", *BUDGET, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "replayed 1 saved schedule(s) first, 1 failed again" in r.stdout
    assert "found after 1 execution(s)" in r.stdout
    # fixed: the plugin's run replays it, it passes, it is dropped
    test_file.write_text(
        textwrap.dedent(PLUGIN_TEST).replace(
            "        v = self.v\n        await asyncio.sleep(0)\n        self.v = v + 1\n",
            "        await asyncio.sleep(0)\n        self.v += 1\n",
        )
    )
    r = run_module("pytest", *pytest_args, cwd=tmp_path)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert _saved(tmp_path) == [] and not saved.exists()


# ------------------------------------------------------------------ the database's own rules


def _schedule(n: int, scenario: str = "main") -> schedule.ScheduleFile:
    """A schedule file of `n` steps of the root actor (distinct n: distinct files)."""
    return schedule.ScheduleFile(
        program={"path": "/p/racy.py", "sha256": "0" * 64, "scenario": scenario},
        strategy="dpor",
        seed=0,
        timers="strict",
        steps=[Step(0, "Task main")] * n,
        actors=[(None, 0)],
    )


def _db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> database.Database:
    monkeypatch.chdir(tmp_path)
    db = database.open_for(".chaossloth", tmp_path / "racy.py", {"scenario": "main"})
    assert db is not None
    return db


def test_key_leaves_out_the_content_hash_and_is_relative_to_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    prog = {"path": str(tmp_path / "tests" / "t.py"), "sha256": "1" * 64, "scenario": "s"}
    key = database.program_key(prog["path"], prog)
    assert key == {"path": "tests/t.py", "scenario": "s"}
    monkeypatch.chdir(tmp_path / "tests")  # the project root, not the current directory
    assert database.program_key(prog["path"], dict(prog, sha256="2" * 64)) == key
    other = database.program_key(prog["path"], dict(prog, scenario="u"))
    assert database.key_dirname(other) != database.key_dirname(key)
    assert database.open_for("", prog["path"], prog) is None
    assert database.open_for(None, prog["path"], prog) is None


def test_at_most_max_per_program_oldest_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _db(tmp_path, monkeypatch)
    paths = []
    for n in range(1, database.MAX_PER_PROGRAM + 3):
        p = db.save(_schedule(n))
        assert p is not None
        os.utime(p, (1000 + n, 1000 + n))  # distinct ages whatever the clock's resolution
        paths.append(p)
    kept = [db.shown(p) for p in db.schedules()]
    assert kept == paths[::-1][: database.MAX_PER_PROGRAM]
    assert schedule.read(kept[0]).steps == _schedule(database.MAX_PER_PROGRAM + 2).steps


def test_key_directory_symlinked_outside_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _db(tmp_path, monkeypatch)
    outside = tmp_path / "outside"
    outside.mkdir()
    db.folder.parent.mkdir(parents=True)
    db.folder.symlink_to(outside)
    assert db.save(_schedule(1)) is None
    assert list(outside.iterdir()) == [] and "resolves outside" in db.notes[0]


def test_a_symlinked_schedule_file_is_replaced_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _db(tmp_path, monkeypatch)
    sched = _schedule(3)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    db.folder.mkdir(parents=True)
    (db.folder / database.schedule_filename(sched)).symlink_to(victim)
    saved = db.save(sched)
    assert saved is not None and not os.path.islink(saved)
    assert victim.read_text() == "keep me" and schedule.read(saved).steps == sched.steps


def _save_many(directory: str, start: int) -> None:
    os.chdir(directory)
    db = database.open_for(".chaossloth", os.path.join(directory, "racy.py"), {"scenario": "main"})
    assert db is not None
    for n in range(start, start + 6):
        assert db.save(_schedule(n)) is not None
        assert db.save(_schedule(1)) is not None  # every writer writes this one too


def test_concurrent_writers_leave_only_whole_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_save_many, args=(str(tmp_path), 10 * k)) for k in range(1, 5)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    db = _db(tmp_path, monkeypatch)
    files = db.schedules()
    # each writer prunes after its own save; one may save after another's prune
    assert 1 <= len(files) <= database.MAX_PER_PROGRAM + len(procs)
    assert [f.name for f in db.folder.iterdir() if not f.name.endswith(".json")] == []
    for f in files:
        schedule.read(f)  # each one whole and valid
