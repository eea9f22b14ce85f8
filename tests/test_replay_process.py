"""Replay across processes: a schedule recorded in one process replays step for step in a fresh
one (different PYTHONHASHSEED); a program that depends on what ChaosSloth does not control
(unseeded random, the wall clock, hash order, I/O) diverges on replay with a message naming the
step."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

RECORD = """\
import json, sys
from chaossloth import runner, scenario, schedule
path, out, strategy, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
prog = scenario.load_scenario(path)
res = runner.explore(prog.factory, strategy=strategy, seed=seed, max_executions=300,
                     oracle=prog.oracle)
best = res.minimal_failure
if best is None:
    best = runner.run_once(prog.factory, strategy=strategy, seed=seed)
schedule.write(schedule.from_execution(best, prog.describe()), out)
print(json.dumps({"steps": [[s.actor, s.name] for s in best.steps],
                  "failed": best.failed}))
"""

REPLAY = """\
import json, sys
from chaossloth import schedule
s = schedule.read(sys.argv[1])
prog = schedule.load_program(s)
try:
    r = schedule.replay(s, prog.factory, oracle=prog.oracle)
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
else:
    print(json.dumps({"steps": [[st.actor, st.name] for st in r.steps],
                      "failure": r.failure.to_json() if r.failure else None}))
"""

LOST_UPDATE = """\
import asyncio

class Account:
    def __init__(self):
        self.balance = {"alice": 100, "bob": 100}

    async def move(self, src, dst, amount, pause):
        for _ in range(pause):
            await asyncio.sleep(0)
        a = self.balance[src]
        b = self.balance[dst]
        await asyncio.sleep(0)
        self.balance[src] = a - amount
        self.balance[dst] = b + amount

async def main():
    acc = Account()
    owners = {"alice", "bob"}          # hash order must not matter to the schedule
    await asyncio.gather(acc.move("alice", "bob", 10, 0), acc.move("bob", "alice", 5, 2))
    assert acc.balance == {"alice": 95, "bob": 105}, f"lost update: {acc.balance} ({len(owners)})"
"""


def _py(script: str, *args: str, hashseed: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED=str(hashseed))
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_random_schedule_replays_identically_in_a_fresh_process(tmp_path: Path) -> None:
    prog = tmp_path / "bank.py"
    prog.write_text(LOST_UPDATE)
    sched = tmp_path / "bank.schedule.json"
    rec = _py(RECORD, str(prog), str(sched), "random", "7", hashseed=1)
    assert rec["failed"], "random exploration should find the lost update"
    data = json.loads(sched.read_text())
    assert data["strategy"] == "random" and data["seed"] == 7
    assert [[s["actor"], s["name"]] for s in data["steps"]] == rec["steps"]
    assert data["failure"]["type"] == "AssertionError"
    for hashseed in (2, 12345):
        rep = _py(REPLAY, str(sched), hashseed=hashseed)
        assert "error" not in rep, rep
        assert rep["steps"] == rec["steps"]
        assert rep["failure"]["type"] == "AssertionError"
        assert rep["failure"]["message"] == data["failure"]["message"]


def _set_order(names: str, hashseed: int) -> list[str]:
    return _py(f"import json; print(json.dumps(list({names})))", hashseed=hashseed)  # type: ignore[return-value]


HASH_ORDER = """\
import asyncio

async def worker(name):
    for _ in range(len(name)):
        await asyncio.sleep(0)

async def main():
    names = NAMES
    await asyncio.gather(*(worker(n) for n in names))
"""


def _assert_divergence_message(rep: dict[str, Any]) -> None:
    assert rep.get("error") == "ScheduleDivergedError", rep
    msg = rep["message"]
    assert re.search(r"replay diverged: at step \d+ of \d+ ", msg), msg
    assert re.search(r"expects (Task|callback) main\S* .* to run|schedule had ended", msg), msg
    assert "unseeded random" in msg


def test_hash_order_dependence_diverges_with_the_step(tmp_path: Path) -> None:
    names = '{"a", "bb", "ccc", "dddd", "eeeee", "ffffff"}'
    base = _set_order(names, 1)
    other = next(h for h in range(2, 50) if _set_order(names, h) != base)
    prog = tmp_path / "hashy.py"
    prog.write_text(HASH_ORDER.replace("NAMES", names))
    sched = tmp_path / "hashy.json"
    _py(RECORD, str(prog), str(sched), "random", "3", hashseed=1)
    same = _py(REPLAY, str(sched), hashseed=1)
    assert "error" not in same, same  # same hash seed: same order, same steps
    rep = _py(REPLAY, str(sched), hashseed=other)
    _assert_divergence_message(rep)


def test_io_dependence_diverges(tmp_path: Path) -> None:
    counter = tmp_path / "counter.txt"
    counter.write_text("0")
    prog = tmp_path / "io.py"
    prog.write_text(
        textwrap.dedent(
            f"""\
            import asyncio

            async def worker():
                await asyncio.sleep(0)

            async def main():
                with open({str(counter)!r}) as f:
                    n = int(f.read())
                with open({str(counter)!r}, "w") as f:
                    f.write(str(n + 1))
                await asyncio.gather(*(worker() for _ in range(1 + n % 2)))
            """
        )
    )
    sched = tmp_path / "io.json"
    counter.write_text("0")
    _py(RECORD, str(prog), str(sched), "random", "1", hashseed=1)
    counter.write_text("1")
    _assert_divergence_message(_py(REPLAY, str(sched), hashseed=1))


def test_unseeded_random_and_wall_clock_diverge(tmp_path: Path) -> None:
    """datetime.now() (a C method of a C type) is real in a controlled run; the time module's
    clocks read the loop's virtual clock and os.urandom draws from the program's seeded
    generator (capture/entropy.py), and both replay: test_the_loops_clock_replays_in_a_fresh_
    process, test_os_urandom_replays_in_a_fresh_process."""
    expr = "datetime.datetime.now().microsecond % 59 + 1"
    prog = tmp_path / "chance.py"
    prog.write_text(
        textwrap.dedent(
            f"""\
            import asyncio, datetime, os

            async def worker(n):
                for _ in range(n):
                    await asyncio.sleep(0)

            async def main():
                await asyncio.gather(worker({expr}), worker(2))
            """
        )
    )
    sched = tmp_path / "chance.json"
    _py(RECORD, str(prog), str(sched), "random", "5", hashseed=1)
    # each replay draws again: it follows the schedule only if it draws the same n
    # (probability 1/59); three agreeing draws in a row would be a 1-in-200000 event
    reps = [_py(REPLAY, str(sched), hashseed=1) for _ in range(3)]
    diverged = [r for r in reps if "error" in r]
    assert diverged, f"{expr}: three replays followed the schedule"
    _assert_divergence_message(diverged[0])


def test_os_urandom_replays_in_a_fresh_process(tmp_path: Path) -> None:
    """A count of steps drawn from os.urandom follows the schedule in other processes: while
    the program runs it draws from the program's seeded generator."""
    prog = tmp_path / "chance.py"
    prog.write_text(
        textwrap.dedent(
            """\
            import asyncio, os

            async def worker(n):
                for _ in range(n):
                    await asyncio.sleep(0)

            async def main():
                await asyncio.gather(worker(os.urandom(1)[0] % 59 + 1), worker(2))
            """
        )
    )
    _assert_replays_elsewhere(prog)


def test_the_loops_clock_replays_in_a_fresh_process(tmp_path: Path) -> None:
    """A count of steps drawn from time.perf_counter_ns() and time.time() follows the schedule
    in another process: while the program runs they read the loop's virtual clock."""
    prog = tmp_path / "clocked.py"
    prog.write_text(
        textwrap.dedent(
            """\
            import asyncio, time

            async def worker(n):
                for _ in range(n):
                    await asyncio.sleep(0.25)

            async def main():
                await asyncio.sleep(1.5)
                n = time.perf_counter_ns() // 500_000_000 + int(time.time()) % 3
                await asyncio.gather(worker(n), worker(2))
            """
        )
    )
    _assert_replays_elsewhere(prog)


def _assert_replays_elsewhere(prog: Path) -> None:
    """A random schedule of `prog`, recorded in one process, replays to the same steps in two
    others (under two hash seeds)."""
    sched = prog.with_suffix(".json")
    rec = _py(RECORD, str(prog), str(sched), "random", "5", hashseed=1)
    for hashseed in (1, 2):
        rep = _py(REPLAY, str(sched), hashseed=hashseed)
        assert "error" not in rep, rep
        assert rep["steps"] == rec["steps"]


def test_the_random_module_and_uuid4_replay_in_a_fresh_process(tmp_path: Path) -> None:
    """random, uuid.uuid4 and secrets are seeded per program and reset per execution
    (capture/entropy.py): the draws a schedule depends on are the same in another process."""
    prog = tmp_path / "drawn.py"
    prog.write_text(
        textwrap.dedent(
            """\
            import asyncio, random, secrets, uuid

            async def worker(n):
                for _ in range(n):
                    await asyncio.sleep(0)

            async def main():
                ids = {uuid.uuid4().hex[:1] for _ in range(3)}
                await asyncio.gather(
                    worker(random.randrange(1, 60)),
                    worker(len(ids)),
                    worker(secrets.randbelow(20) + int(secrets.token_hex(1), 16) % 7),
                )
            """
        )
    )
    _assert_replays_elsewhere(prog)


def test_the_command_fixes_the_hash_seed(tmp_path: Path) -> None:
    """The chaossloth command runs with PYTHONHASHSEED=0 unless it is set (chaossloth/__init__),
    so a failure whose schedule follows the order of a set of strings replays in another run."""
    prog = tmp_path / "hashy.py"
    prog.write_text(
        textwrap.dedent(
            """\
            import asyncio, os

            TOTAL = {"n": 0}

            async def worker(name):
                for _ in range(len(name)):
                    await asyncio.sleep(0)
                n = TOTAL["n"]
                await asyncio.sleep(0)
                TOTAL["n"] = n + 1

            async def main():
                with open("seed.txt", "w") as f:
                    f.write(os.environ.get("PYTHONHASHSEED", "unset"))
                names = {"a", "bb", "ccc", "dddd", "eeeee", "ffffff"}
                await asyncio.gather(*(worker(n) for n in names))
                assert TOTAL["n"] == 6, TOTAL
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "chaossloth", *args],
            check=False,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    r = command("check", "hashy.py", "--scenario", "main", "--no-telemetry")
    assert r.returncode == 1 and "FAIL" in r.stdout, r.stdout + r.stderr
    assert (tmp_path / "seed.txt").read_text() == "0"
    (sched,) = (tmp_path / ".chaossloth").glob("*.schedule.json")
    again = command("replay", str(sched))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "the failure reproduces" in again.stdout, again.stdout
