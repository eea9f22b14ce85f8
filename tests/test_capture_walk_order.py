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

import json
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


# A library object reaching more than a walk's budget of objects, through a set of nodes hashed
# by their names (an order PYTHONHASHSEED changes): the walk of an opaque call on it gives up.
BIG_LIBRARY = """
class Node:
    def __init__(self, name, depth):
        self.name = name
        self.kids = [Node(f"{name}.{i}", depth - 1) for i in range(4)] if depth else []

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return self is other


class Forest:
    def __init__(self):
        self.roots = {Node(f"r{i}", 5) for i in range(4)}

    def poke(self):
        return len(self.roots)
"""

BIG = """
import asyncio
import cs_forest_lib


async def scenario():
    forest = cs_forest_lib.Forest()
    forest.poke()
    await asyncio.sleep(0)
"""

#: runs the scenario twice in one process and prints what the step of `forest.poke()` recorded
DRIVER = """
import collections, json, sys
from chaossloth import _core, runner, scenario
from chaossloth.capture import sites

program = scenario.load_scenario(sys.argv[1], "scenario", ())
for _ in range(2):
    _core.hooks_log(True)
    try:
        runner.run_once(program.factory, strategy="fifo", raise_on_divergence=False)
    finally:
        log = _core.hooks_log(False)
seen = collections.Counter()
for ev, obj, key, kind, site, key_repr in log:
    if sites.get(int(site)).line == 8:
        seen["barrier" if obj == 2**64 - 1 else f"object {kind}"] += 1
print(json.dumps(seen))
"""


def test_a_walk_that_gives_up_records_its_barrier_alone(tmp_path: Path) -> None:
    """The part of a graph a walk reaches before its budget runs out depends on the order it
    meets objects in; the barrier it then records covers the whole graph, so the step keeps
    the barrier alone, the same under every hash seed."""
    lib = tmp_path / "lib" / "site-packages"
    lib.mkdir(parents=True)
    (lib / "cs_forest_lib.py").write_text(BIG_LIBRARY)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text("")
    (proj / "prog.py").write_text(BIG)
    (tmp_path / "driver.py").write_text(DRIVER)
    outs = []
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, str(tmp_path / "driver.py"), str(proj / "prog.py")],
            check=False,
            cwd=proj,
            env=dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(lib)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout.strip())
    assert outs[0] == outs[1]
    seen = json.loads(outs[0])
    # the barrier, and the read of `forest.poke` made before the call; none of the walk's writes
    assert seen == {"barrier": 1, "object 1": 1}, seen
