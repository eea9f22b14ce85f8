"""Schedule files: round trip, validation with clean errors, program fingerprint."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from chaossloth import schedule
from chaossloth.errors import InputError
from chaossloth.runner import Failure, Step
from chaossloth.scenario import file_sha256

PROGRAM = """\
import asyncio

async def main():
    await asyncio.sleep(0)
    return 1
"""


def _sample(path: str = "/tmp/prog.py", sha: str = "0" * 64) -> schedule.ScheduleFile:
    return schedule.ScheduleFile(
        program={"path": path, "sha256": sha, "scenario": "main"},
        strategy="random",
        seed=7,
        timers="strict",
        steps=[Step(0, "Task main"), Step(1, "Task main/0"), Step(0, "Task main")],
        actors=[(None, 0), (0, 0)],
        failure=Failure("assertion", "AssertionError", "lost update", "Traceback...", "Task main"),
        max_steps=500,
    )


def test_round_trip(tmp_path: Path) -> None:
    s = _sample()
    p = schedule.write(s, tmp_path / "sub" / "s.json")
    back = schedule.read(p)
    assert back.to_json() == s.to_json()
    assert back.schedule == [0, 1, 0]
    assert back.actors == [(None, 0), (0, 0)]
    assert back.failure is not None and back.failure.kind == "assertion"
    data = json.loads(p.read_text())
    assert data["format"] == "chaossloth-schedule" and data["version"] == 1
    assert data["steps"][1] == {"actor": 1, "name": "Task main/0"}
    # no temporary files left behind by the atomic write
    assert sorted(x.name for x in p.parent.iterdir()) == ["s.json"]


def test_round_trip_workload_program(tmp_path: Path) -> None:
    s = _sample()
    s.program = {
        "path": "/x.py",
        "sha256": "ab",
        "cls": "Server",
        "method": "handle",
        "tasks": 2,
        "args": "'audit'",
        "init_args": None,
    }
    back = schedule.read(schedule.write(s, tmp_path / "w.json"))
    assert back.program["cls"] == "Server" and back.program["tasks"] == 2


def _write_json(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="something-else"), "not a ChaosSloth schedule"),
        (lambda d: d.update(version=99), "version 99 is not supported"),
        (lambda d: d.pop("version"), "'version'"),
        (lambda d: d.pop("steps"), "missing key 'steps'"),
        (lambda d: d.pop("program"), "missing key 'program'"),
        (lambda d: d["program"].pop("sha256"), "missing key 'sha256'"),
        (lambda d: d["program"].pop("scenario"), "needs 'scenario', or 'cls' and 'method'"),
        (lambda d: d.update(seed="x"), "'seed' must be int"),
        (lambda d: d.update(timers="fast"), "'timers' must be 'strict' or 'relaxed'"),
        (lambda d: d.update(steps={"a": 1}), "'steps' must be list"),
        (lambda d: d["steps"].__setitem__(0, 3), "steps[0]: must be an object"),
        (lambda d: d["steps"][1].pop("actor"), "steps[1]: missing key 'actor'"),
        (lambda d: d["steps"][1].update(actor=-1), "'actor' must be an integer from 0 to"),
        (lambda d: d["steps"][1].update(actor=5), "not in 'actors'"),
        (lambda d: d["actors"].__setitem__(1, [3, 0]), "actors[1]"),
        (lambda d: d.update(failure=[1]), "'failure' must be an object"),
    ],
)
def test_bad_files_give_one_clean_error(tmp_path: Path, mutate, message: str) -> None:
    data = _sample().to_json()
    mutate(data)
    with pytest.raises(InputError) as info:
        schedule.read(_write_json(tmp_path, data))
    assert message in str(info.value)
    assert "bad.json" in str(info.value)


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match=r"x.json:1: not valid JSON"):
        schedule.read(p)
    with pytest.raises(InputError, match="no such schedule file"):
        schedule.read(tmp_path / "missing.json")
    p.write_text("[1, 2]")
    with pytest.raises(InputError, match="expected a JSON object"):
        schedule.read(p)


def test_changed_program_warns(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    s = _sample(str(prog), file_sha256(prog))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = schedule.load_program(s)  # unchanged: no warning
    assert loaded.scenario == "main"
    prog.write_text(PROGRAM + "\n# edited\n")
    with pytest.warns(schedule.ProgramChangedWarning, match="changed since the schedule"):
        schedule.load_program(s)
