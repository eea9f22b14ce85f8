"""Report pieces: the stage lines, the hazard mapping and wording, the Mermaid diagram."""

from __future__ import annotations

import io
import re

from chaossloth import report as rp
from chaossloth.stages import STAGES


def test_stage_lines_have_the_seed_form() -> None:
    out = io.StringIO()
    pr = rp.StagePrinter(out, [(s.name, s.title) for s in STAGES])
    with pr.stage("capture"):
        pr.say("12 steps")
    pr.skipped("synthesis", "not implemented yet")
    lines = out.getvalue().splitlines()
    assert re.fullmatch(
        r"\[1/8\] Capture: record two default-order runs \.{3,} \d+\.\d\ds", lines[0]
    )
    assert lines[1].strip() == "12 steps"
    assert lines[2].startswith("[6/8] Synthesize ordered locks") and "not implemented" in lines[2]
    assert [t.name for t in pr.times] == ["capture"]


def test_a_stage_that_reruns_another_says_so() -> None:
    out = io.StringIO()
    pr = rp.StagePrinter(out, [(s.name, s.title) for s in STAGES])
    with pr.stage("collision window"):
        pr.rerun("collapse", "because")
    with pr.stage("verdict"):
        pass
    assert "re-running stage 3 (collapse): because" in out.getvalue()
    assert [t.to_json().get("reran") for t in pr.times] == ["collapse", None]
    assert pr.times[0].to_json()["note"] == "because"


def test_hazard_mapping() -> None:
    plain = rp.Site("f.py", 3, "v = self.balance")
    cond = rp.Site("f.py", 3, "if self.conn is None:")
    assert rp.hazard_of_pattern("R-W-W", plain) == "lost-update"
    assert rp.hazard_of_pattern("R-W-W", cond) == "check-then-act"
    assert rp.hazard_of_pattern("R-W-R", plain) == "check-then-act"
    assert rp.hazard_of_pattern("W-R-W", plain) == "dirty-read"
    assert rp.hazard_of_pattern("W-W-R", plain) == "order-violation"
    assert rp.hazard_of_pattern("lost_update", plain) == "lost-update"
    assert rp.hazard_of_pattern("order_violation", plain) == "order-violation"
    assert set(rp.PATTERN_HAZARD.values()) <= set(rp.HAZARDS)


def test_finding_wording_names_every_line() -> None:
    f = rp.Finding(
        pattern="R-W-W",
        hazard="lost-update",
        task="Task main/1",
        other_task="Task main/0",
        resource="self.sessions",
        local=rp.Site("srv.py", 7, "curr = self.sessions.get(c, 0)"),
        await_site=rp.Site("srv.py", 9, "await asyncio.sleep(0.0001)"),
        remote=rp.Site("srv.py", 10, "self.sessions[c] = curr + 1"),
        second=rp.Site("srv.py", 10, "self.sessions[c] = curr + 1"),
    )
    text = rp.word_finding(f)
    for needle in ("lost update", "srv.py:7", "srv.py:9", "srv.py:10", "Task main/0"):
        assert needle in text
    assert f.to_json()["local_access"] == {
        "file": "srv.py",
        "line": 7,
        "text": "curr = self.sessions.get(c, 0)",
    }


def test_mermaid_has_tasks_and_resources_as_participants() -> None:
    steps = [
        rp.DiagramStep("Task main", [], "", True),
        rp.DiagramStep("Task main/0", [("self.sessions", "read", "line 7: x")], "sleep (line 9)"),
        rp.DiagramStep("Task main/1", [("self.sessions", "read", "line 7: x")], "sleep (line 9)"),
        rp.DiagramStep("Task main/0", [("self.sessions", "write", "line 10: y; z # w")]),
        rp.DiagramStep("timer", [], "", False),
    ]
    text = rp.mermaid(steps, title="lost update")
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram"
    parts = [ln for ln in lines if ln.strip().startswith("participant")]
    assert len(parts) == 3  # two tasks and one resource; the idle main task is left out
    assert any("->>" in ln and "write" in ln for ln in lines)
    assert any("-->>" in ln and "read" in ln for ln in lines)
    assert sum("Note over" in ln for ln in lines) == 2
    assert not any(";" in ln or "#" in ln for ln in lines[1:])


def _step(n: int, *, line: int = 0, hot: bool = False) -> dict[str, object]:
    acc = [
        {
            "resource": "self.x",
            "kind": "write",
            "file": "f.py",
            "line": line,
            "text": "self.x += 1",
            "highlight": hot,
        }
    ]
    return {"step": n, "task": f"Task t{n % 2}", "accesses": acc if line else [], "await": None}


def test_timeline_lines_fold_quiet_steps_and_count_every_step() -> None:
    tl = [_step(1, line=3), _step(2), _step(3), _step(4, line=5, hot=True), _step(5)]
    lines = rp.timeline_lines(tl)
    assert lines[0].strip() == "1. Task t1"
    assert "write self.x at f.py:3 `self.x += 1`" in lines[1]
    assert lines[2].strip() == "steps 2-3: 2 steps without shared accesses"
    assert lines[3].startswith(">>") and "4. Task t0" in lines[3]
    assert lines[-1].strip() == "step 5: 1 step without shared accesses"


def test_timeline_lines_beyond_the_limit_keep_the_marked_steps() -> None:
    tl = [_step(n, line=n, hot=n == 50) for n in range(1, 101)]
    lines = rp.timeline_lines(tl, limit=10)
    shown = [ln.split(".")[0].split()[-1] for ln in lines if "Task" in ln]
    assert shown == ["49", "50", "51"]
    folds = [ln for ln in lines if "not shown (away from the finding's lines)" in ln]
    assert [f.strip().split(":")[0] for f in folds] == ["steps 1-48", "steps 52-100"]


def test_timeline_lines_keep_a_marked_last_step() -> None:
    """The marked step is the last one shown: its neighbour after it does not exist."""
    tl = [_step(n, line=n, hot=n in (1, 100)) for n in range(1, 101)]
    lines = rp.timeline_lines(tl, limit=10)
    shown = [ln.split(".")[0].split()[-1] for ln in lines if "Task" in ln]
    assert shown == ["1", "2", "99", "100"]
