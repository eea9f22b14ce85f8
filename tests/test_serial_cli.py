"""`chaossloth check --cls/--method` with more concurrent calls than the enumeration of every
serial order allowed (end to end, subprocess, small budgets)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import EXAMPLES, SEED, SEED_WORKLOAD, cli

from chaossloth.serial import MAX_CALLS

CORRECT = str(EXAMPLES / "correct_counter.py")


def check(tmp: Path, *args: str) -> tuple[int, dict, str]:
    out = tmp / "r.json"
    r = cli("check", *args, "--json", str(out), "--no-telemetry", cwd=tmp)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(out.read_text()) if out.exists() else {}, r.stderr


def test_eight_calls_report_the_lost_update(tmp_path: Path) -> None:
    rc, rep, err = check(
        tmp_path, SEED, *SEED_WORKLOAD, "--tasks", "8", "--strategy", "random",
        "--max-executions", "20",
    )  # fmt: skip
    assert rc == 1, err
    assert rep["failure"]["type"] == "NotSerializable"
    assert rep["failure"]["message"].startswith(
        "not serializable: after 8 calls the object has sessions={'audit': 1}"
    )
    assert "run one after another they give sessions={'audit': 8}" in rep["failure"]["message"]
    assert rep["hazard"] == "lost-update"


def test_eight_calls_of_a_correct_class_pass(tmp_path: Path) -> None:
    # results 1..8 in some order: each schedule's outcome must be found among the 8! orders
    rc, rep, err = check(
        tmp_path, CORRECT, "--cls", "Counter", "--method", "increment", "--tasks", "8",
        "--strategy", "random", "--max-executions", "30",
    )  # fmt: skip
    assert rc == 0, err
    assert rep["verdict"] == "pass" and rep["executions"] == 30


def test_too_many_calls_name_the_limit(tmp_path: Path) -> None:
    rc, _, err = check(
        tmp_path, SEED, *SEED_WORKLOAD, "--tasks", str(MAX_CALLS + 1), "--max-executions", "1"
    )
    assert rc == 2
    assert f"--tasks {MAX_CALLS + 1}: at most {MAX_CALLS} concurrent calls" in err
