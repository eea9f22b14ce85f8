"""The pytest plugin, end to end: a test marked chaossloth fails with the replay file path."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import cli, run_module

TEST_FILE = """
import asyncio

import pytest


class Box:
    def __init__(self):
        self.v = 0

    async def bump(self):
        v = self.v
        await asyncio.sleep(0)
        self.v = v + 1


class SafeBox(Box):
    async def bump(self):
        self.v += 1
        await asyncio.sleep(0)


@pytest.mark.chaossloth(max_executions=50)
async def test_racy():
    b = Box()
    await asyncio.gather(b.bump(), b.bump())
    assert b.v == 2


@pytest.mark.chaossloth
async def test_safe():
    b = SafeBox()
    await asyncio.gather(b.bump(), b.bump())
    assert b.v == 2


def test_fixture(chaossloth):
    result = chaossloth.explore(safe_scenario)
    assert result.verdict == "pass" and result.complete


async def safe_scenario():
    b = SafeBox()
    await asyncio.gather(b.bump(), b.bump())
    assert b.v == 2
"""


def test_marker_fails_with_replay_path(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(TEST_FILE))
    r = run_module("pytest", "-q", "-p", "no:cacheprovider", "test_user.py", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    assert "chaossloth replay" in out and ".schedule.json" in out, out
    sched = next((tmp_path / ".chaossloth").glob("test_racy*.schedule.json"))
    rep = cli("replay", str(sched), cwd=tmp_path)
    assert rep.returncode == 1, rep.stdout + rep.stderr
