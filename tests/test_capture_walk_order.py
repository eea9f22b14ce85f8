"""What a walk of a library's state records does not depend on addresses.

A library holding its objects in a set (a scheduler's jobs, a pool's idle connections, a
registry of waiters) is walked when uninstrumented code is called (ext/hooks.c, "walks of
object graphs").  A set of objects hashed by identity iterates in an order of addresses, and
the walk names the objects it meets in the order it meets them: the set's own order made every
execution of one schedule name them differently, so DPOR's replay check stopped the run with a
false "nondeterministic" (exit 2) under every hash seed.  The hooks visit a set's items in an
order of their own (set_items_ordered: named ones by canonical id, the others by what they
hold), so the program passes complete, and its racy twin still fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LIBRARY = """
class Job:
    def __init__(self, n):
        self.n = n
        self.state = 0


class Registry:
    def __init__(self):
        self.jobs = set()

    def add(self, n):
        j = Job(n)
        self.jobs.add(j)
        return j

    def touch_all(self):
        for j in self.jobs:
            j.state += 1
        return len(self.jobs)
"""

CORRECT = """
import asyncio
import cs_jobs_lib


async def scenario():
    reg = cs_jobs_lib.Registry()

    async def worker(k):
        for i in range(4):
            reg.add(k * 10 + i)
            await asyncio.sleep(0)
        reg.touch_all()

    await asyncio.gather(worker(1), worker(2))
    assert reg.touch_all() == 8
"""

RACY = """
import asyncio
import cs_jobs_lib


async def scenario():
    reg = cs_jobs_lib.Registry()

    async def worker(k):
        for i in range(2):
            reg.add(k * 10 + i)
            await asyncio.sleep(0)
        before = reg.touch_all()
        await asyncio.sleep(0)
        assert reg.touch_all() == before

    await asyncio.gather(worker(1), worker(2))
"""


def _check(tmp_path: Path, source: str, seed: int) -> subprocess.CompletedProcess[str]:
    lib = tmp_path / "lib" / "site-packages"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "cs_jobs_lib.py").write_text(LIBRARY)
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    (proj / "pyproject.toml").write_text("")
    f = proj / "prog.py"
    f.write_text(source)
    env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=str(lib))
    return subprocess.run(
        [sys.executable, "-m", "chaossloth", "check", str(f), "--scenario", "scenario", "-q"],
        check=False,
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_library_set_of_objects_passes_complete_under_every_hash_seed(
    tmp_path: Path, seed: int
) -> None:
    done = _check(tmp_path, CORRECT, seed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS (complete)" in done.stdout, done.stdout


def test_its_racy_twin_fails(tmp_path: Path) -> None:
    done = _check(tmp_path, RACY, 1)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL" in done.stdout
