"""Diagnosis drops access patterns that the program's own structure imposes (creation, then
join) and keeps those a schedule can change; the deadlock finding uses the runner's blocked
tasks; the pipeline reaches everything through the runner's public API."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from conftest import DEADLOCK_PROGRAM

from chaossloth import diagnosis, pipeline, scenario, stages
from chaossloth.config import Config

JOINED = """\
import asyncio

class Box:
    def __init__(self):
        self.x = 0

async def worker(box):
    box.x = 2

async def main():
    box = Box()
    box.x = 1
    await asyncio.create_task(worker(box))
    assert box.x == 1, "the worker overwrote x"
"""

# the same, but main does not wait for the worker: it merely yields once
UNJOINED = JOINED.replace(
    "    await asyncio.create_task(worker(box))\n",
    "    t = asyncio.create_task(worker(box))\n    await asyncio.sleep(0)\n",
)

LOST_UPDATE = """\
import asyncio

class Counter:
    def __init__(self):
        self.value = 0

    async def incr(self):
        v = self.value
        await asyncio.sleep(0)
        self.value = v + 1

async def main():
    c = Counter()
    await asyncio.gather(c.incr(), c.incr())
    assert c.value == 2
"""


def _check(tmp_path: Path, src: str) -> pipeline.Result:
    p = tmp_path / "prog.py"
    p.write_text(textwrap.dedent(src))
    program = scenario.load(str(p), Config(scenario="main"))
    opts = Config(telemetry=False, schedule_out=str(tmp_path / "s.json"), database="")
    return pipeline.run(program, opts, None)


def test_setup_worker_join_check_is_not_an_interleaving(tmp_path: Path) -> None:
    res = _check(tmp_path, JOINED)
    assert res.failed and res.failure_type == "AssertionError"
    # p (box.x = 1), r (the worker's write), c (the assert) are ordered by creation and join
    assert res.findings == [] and res.hazard == "exception"


def test_unjoined_worker_is_an_order_hazard(tmp_path: Path) -> None:
    res = _check(tmp_path, UNJOINED)
    assert res.failed
    (f,) = [f for f in res.findings if f.resource.endswith("x")]
    assert f.pattern == "W-W-R" and f.hazard == "order-violation"
    assert "worker" in f.other_task
    assert res.hazard == "order-violation"


def test_sibling_lost_update_is_kept(tmp_path: Path) -> None:
    res = _check(tmp_path, LOST_UPDATE)
    assert res.hazard == "lost-update"
    assert res.findings[0].pattern == "R-W-W"


def test_pipeline_uses_no_private_runner_names() -> None:
    files = [Path(pipeline.__file__), Path(diagnosis.__file__)]
    files += sorted(Path(stages.__file__).parent.glob("*.py"))
    private = {
        node.attr
        for f in files
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "runner"
        and node.attr.startswith("_")
    }
    assert private == set()


DEADLOCK = DEADLOCK_PROGRAM


def test_deadlock_cycle_names_locks_by_their_source_names(tmp_path: Path) -> None:
    res = _check(tmp_path, DEADLOCK)
    assert res.hazard == "deadlock"
    cycle = res.findings[0].cycle
    assert [c["resource"].split(" (taken at")[0] for c in cycle] == [
        "self.locks['b']",
        "self.locks['a']",
    ]
    assert {c["task"] for c in cycle} == {c["held_by"] for c in cycle}


def test_waited_name() -> None:
    assert diagnosis._waited_name("Lock.acquire() on self.locks['a'] (locked)") == "self.locks['a']"
    assert diagnosis._waited_name("Event.wait() on ev (never set)") == "ev"
    assert diagnosis._waited_name("Lock.acquire() on an unnamed Lock at 0x7f (locked)") is None
    assert diagnosis._waited_name("its TaskGroup's tasks to finish (none left)") is None
