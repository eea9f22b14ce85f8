"""`chaossloth check` options, end to end (subprocess), on the seed example and a correct one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, SEED, SEED_WORKLOAD, cli

CORRECT = str(EXAMPLES / "correct_counter.py")


def report(tmp: Path, *args: str, rc: int) -> dict:
    out = tmp / "r.json"
    r = cli(*args, "--json", str(out), "--no-telemetry", cwd=tmp)
    assert r.returncode == rc, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("strategy", ["auto", "dpor", "pct", "pos", "random", "fifo"])
def test_every_strategy_finds_the_seed_bug(tmp_path: Path, strategy: str) -> None:
    rep = report(
        tmp_path,
        "check",
        SEED,
        "--scenario",
        "two_requests",
        "--strategy",
        strategy,
        "--max-executions",
        "200",
        rc=1,
    )
    assert rep["hazard"] == "lost-update" and rep["strategy"] == strategy


def test_no_stop_on_failure_counts_failing_schedules(tmp_path: Path) -> None:
    # relaxed timers: a sleep may end at any point, so some schedules serialise the requests
    rep = report(
        tmp_path,
        "check",
        SEED,
        "--scenario",
        "two_requests",
        "--strategy",
        "random",
        "--timers",
        "relaxed",
        "--no-stop-on-failure",
        "--max-executions",
        "100",
        rc=1,
    )
    assert rep["executions"] == 100 and rep["complete"] is False
    assert 2 <= rep["failing_executions"] < rep["executions"]
    # the kept schedule is the minimal one: the default order already fails
    assert rep["deviations"] == 0


def test_budget_makes_a_pass_incomplete(tmp_path: Path) -> None:
    rep = report(
        tmp_path,
        "check",
        CORRECT,
        "--cls",
        "Counter",
        "--method",
        "increment",
        "--tasks",
        "3",
        "--strategy",
        "dpor",
        "--max-executions",
        "1",
        rc=0,
    )
    assert rep["verdict"] == "pass" and rep["complete"] is False and rep["executions"] == 1
    r = cli(
        "check",
        CORRECT,
        "--scenario",
        "two_increments",
        "--max-executions",
        "1",
        "--strategy",
        "dpor",
        "--no-telemetry",
        cwd=tmp_path,
    )
    assert "incomplete" in r.stdout


def test_seeded_sampling_is_reproducible(tmp_path: Path) -> None:
    steps = []
    for i in range(2):
        sched = tmp_path / f"s{i}.json"
        r = cli(
            "check",
            SEED,
            "--scenario",
            "two_requests",
            "--strategy",
            "random",
            "--seed",
            "7",
            "--schedule-out",
            str(sched),
            "--no-telemetry",
            cwd=tmp_path,
        )
        assert r.returncode == 1, r.stdout + r.stderr
        steps.append(json.loads(sched.read_text())["steps"])
    assert steps[0] == steps[1]


def test_relaxed_timers(tmp_path: Path) -> None:
    rep = report(tmp_path, "check", SEED, "--scenario", "two_requests", "--timers", "relaxed", rc=1)
    assert rep["hazard"] == "lost-update"
    sched = json.loads(Path(tmp_path / rep["schedule_file"]).read_text())
    assert sched["timers"] == "relaxed"
    assert cli("replay", rep["schedule_file"], cwd=tmp_path).returncode == 1


def test_invariant_on_a_workload(tmp_path: Path) -> None:
    rep = report(
        tmp_path,
        "check",
        SEED,
        *SEED_WORKLOAD,
        "--invariant",
        "consistent",
        rc=1,
    )
    # each request keeps counters == 10 * sessions, so the failure is the serializability one
    assert rep["failure"]["type"] == "NotSerializable"
    assert rep["program"]["invariant"] == "consistent"


def test_quiet_prints_one_line(tmp_path: Path) -> None:
    r = cli("check", SEED, "--scenario", "two_requests", "-q", "--no-telemetry", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith("FAIL lost-update:") and len(r.stdout.splitlines()) == 1


def test_trace_is_delegated(tmp_path: Path) -> None:
    r = cli("trace", "--help", cwd=tmp_path)
    if importlib.util.find_spec("chaossloth.trace_cmd") is None:
        assert r.returncode == 2 and "not available" in r.stderr
    else:
        assert r.returncode == 0 and "usage" in r.stdout.lower()
