"""The bundled examples, end to end through the command a user types.

Each buggy example must be found, classified, and its schedule must replay the failure 10 times
out of 10 (from the file, in a fresh process); the correct program must pass with a complete
exploration.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import EXAMPLES, SEED_WORKLOAD, cli

BUGS = [
    # (file, how to run it, hazard)
    ("multi_resource.py", ["--scenario", "two_requests"], "lost-update"),
    (
        "multi_resource.py",
        ["--cls", "MultiResourceServer", "--method", "handle_request", "--args", "'audit'"],
        "lost-update",
    ),
    ("bank_transfer.py", ["--scenario", "two_transfers"], "check-then-act"),
    (
        "bank_transfer.py",
        [
            "--cls",
            "Bank",
            "--method",
            "transfer",
            "--args",
            "('alice', 'bob', 80)",
            "--invariant",
            "no_overdraft",
        ],
        "check-then-act",
    ),
    ("cache_stampede.py", ["--scenario", "concurrent_misses"], "check-then-act"),
    (
        "cache_stampede.py",
        ["--cls", "Cache", "--method", "get", "--args", "'user:1'"],
        "check-then-act",
    ),
    ("lazy_init.py", ["--scenario", "two_callers"], "check-then-act"),
    ("lazy_init.py", ["--cls", "Client", "--method", "connection"], "check-then-act"),
    ("lock_order_deadlock.py", ["--scenario", "opposite_transfers"], "deadlock"),
    ("timeout_cancel.py", ["--scenario", "withdraw_with_timeout"], "cancellation"),
    # passes in asyncio's own order; relaxed timers (the pipeline switches to them by itself
    # when the stock loop fails with jitter: tests/test_pipeline_timers.py) expose the race
    ("flaky_inventory.py", ["--scenario", "last_item", "--timers", "relaxed"], "check-then-act"),
]


@pytest.mark.parametrize("file,how,hazard", BUGS, ids=[f"{b[0][:-3]}-{b[1][1]}" for b in BUGS])
def test_bug_found_classified_and_replayed(
    tmp_path: Path, file: str, how: list[str], hazard: str
) -> None:
    out = tmp_path / "report.json"
    sched = tmp_path / "failing.schedule.json"
    diagram = tmp_path / "failing.mmd"
    r = cli(
        "check",
        str(EXAMPLES / file),
        *how,
        "--json",
        str(out),
        "--schedule-out",
        str(sched),
        "--mermaid",
        str(diagram),
        cwd=tmp_path,
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout + r.stderr
    rep = json.loads(out.read_text())
    assert rep["verdict"] == "fail"
    assert rep["hazard"] == hazard, rep["findings"]
    assert rep["failure"]["type"] and rep["executions"] >= 1
    assert rep["failing_executions"] >= 1
    assert rep["schedule_file"] == str(sched) and sched.exists()
    assert rep["replay_reproduces"] is True
    assert [s["name"] for s in rep["stages"]][:3] == ["capture", "alphabet", "collapse"]
    assert rep["stages"][-1]["name"] == "verdict"
    assert rep["natural_failure_rate"]["runs"] > 0
    assert rep["collision_window"]["kind"] in (
        "estimate",
        "lower_bound",
        "every_offset",
        "no_collision",
        "no_fit",
        "inconclusive",
        "not_applicable",
    )
    if hazard == "deadlock":
        cycle = rep["findings"][0]["cycle"]
        assert len(cycle) == 2 and {c["task"] for c in cycle} == {c["held_by"] for c in cycle}
    elif hazard == "cancellation":
        f = rep["findings"][0]
        assert f["hazard"] == "cancellation" and f["await"]["file"].endswith(file)
    else:
        f = rep["findings"][0]
        assert f["hazard"] == hazard
        for part in ("local_access", "remote_access", "second_local_access"):
            assert f[part]["file"].endswith(file) and f[part]["line"] > 0, f
    # the timeline: every step of the schedule, in order; a data race's steps carry the top
    # finding's lines, highlighted, in two tasks, and the text shows them marked with ">>"
    steps = rep["timeline"]
    assert [st["step"] for st in steps] == list(range(1, rep["schedule_steps"] + 1))
    marked = [st for st in steps if any(a["highlight"] for a in st["accesses"])]
    if hazard not in ("deadlock", "cancellation"):
        assert len({st["task"] for st in marked}) == 2, steps
        first = rep["findings"][0]["local_access"]
        line = f"{file}:{first['line']} `{first['text']}`"
        assert any(ln.lstrip().startswith(">>") for ln in r.stdout.splitlines()), r.stdout
        assert line in r.stdout.split("step by step")[1], r.stdout
    text = diagram.read_text()
    assert text.startswith("sequenceDiagram") and "participant" in text
    # the stages are printed with their timings, in the seed's form
    assert "[1/8] Capture: record two default-order runs" in r.stdout
    assert "[8/8] Verdict" in r.stdout

    again = cli("replay", str(sched), "--repeat", "10", cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "reproduces 10/10 times" in again.stdout


def test_seed_example_replays_in_ten_fresh_processes(tmp_path: Path) -> None:
    sched = tmp_path / "seed.schedule.json"
    r = cli(
        "check",
        str(EXAMPLES / "multi_resource.py"),
        "--scenario",
        "two_requests",
        "--schedule-out",
        str(sched),
        "--no-telemetry",
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    codes = [cli("replay", str(sched), cwd=tmp_path).returncode for _ in range(10)]
    assert codes == [1] * 10


@pytest.mark.parametrize(
    "how",
    [
        ["--scenario", "two_increments"],
        ["--cls", "Counter", "--method", "increment", "--tasks", "3"],
    ],
    ids=["scenario", "cls"],
)
def test_correct_program_passes_complete(tmp_path: Path, how: list[str]) -> None:
    out = tmp_path / "report.json"
    r = cli("check", str(EXAMPLES / "correct_counter.py"), *how, "--json", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(out.read_text())
    assert rep["verdict"] == "pass" and rep["hazard"] is None
    assert rep["complete"] is True
    assert rep["sleep_blocked"] == 0 and rep["distinct_traces"] == rep["executions"]
    assert rep["failing_executions"] == 0 and rep["executions"] >= 2
    assert rep["schedule_file"] is None
    assert rep["natural_failure_rate"]["failures"] == 0
    if "--cls" in how:  # the figure examples/README.md quotes is what the command prints
        m = re.search(
            r"shows a passing run: (\d+) executions", (EXAMPLES / "README.md").read_text()
        )
        assert m is not None and int(m[1]) == rep["executions"], rep["executions"]


def test_whole_pipeline_synthesizes_and_verifies_the_patch(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    r = cli(
        str(EXAMPLES / "multi_resource.py"),
        *SEED_WORKLOAD,
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "not implemented" not in r.stdout
    assert "async with self._lock_counters, self._lock_sessions:" in r.stdout
    rep = json.loads(out.read_text())
    assert rep["hazard"] == "lost-update"
    assert "not_implemented" not in rep
    assert rep["repair"]["verified"] and rep["repair"]["complete"]
    assert [lk["name"] for lk in rep["repair"]["locks"]] == ["_lock_counters", "_lock_sessions"]
    assert [st["name"] for st in rep["stages"]][5:7] == ["synthesis", "adversarial replay"]
    # the default schedule file lands under the working directory
    assert (tmp_path / rep["schedule_file"]).exists()
