"""The program's randomness is part of the schedule (capture/entropy.py): the module-level
generator of `random` and `uuid.uuid4` draw the same values in every execution and process."""

from __future__ import annotations

import random
import secrets
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

from conftest import cli

from chaossloth.capture import entropy, importer, load_file


def test_every_execution_draws_what_the_first_drew(tmp_path: Path) -> None:
    outer = random.getstate()
    outer_uuid4 = uuid.uuid4  # the real one, or a program's another test left loaded
    f = tmp_path / "user_entropy_mod.py"
    f.write_text("import random\nfrom uuid import uuid4\nAT_IMPORT = random.random()\n")
    importer.begin_program()
    try:
        mod = load_file(f)
        importer.program_loaded()
        assert mod.uuid4 is entropy._seeded_uuid4  # bound while loading
        draws = []
        for _ in range(3):
            importer.reset_modules()
            u = mod.uuid4()
            assert u.version == 4
            token = (secrets.token_hex(8), secrets.randbelow(1000), secrets.choice("abcdef"))
            draws.append((random.random(), random.randrange(1000), u, token))
        assert draws[0] == draws[1] == draws[2]
        assert len({d[2] for d in draws}) == 1
        assert mod.AT_IMPORT == random.Random(entropy.SEED).random()
    finally:
        importer.end_program()
        sys.modules.pop("user_entropy_mod", None)
    assert random.getstate() == outer and uuid.uuid4 is outer_uuid4


def test_a_program_seeding_at_import_keeps_its_seed(tmp_path: Path) -> None:
    f = tmp_path / "user_seeding_mod.py"
    f.write_text("import random\nrandom.seed(1234)\n")
    importer.begin_program()
    try:
        load_file(f)
        importer.program_loaded()
        importer.reset_modules()
        assert random.random() == random.Random(1234).random()
    finally:
        importer.end_program()
        sys.modules.pop("user_seeding_mod", None)


JITTER = """
import asyncio
import random
import uuid

SESSIONS = {}
STATS = {"logins": 0}

async def login(user):
    sid = str(uuid.uuid4())
    seen = STATS["logins"]
    await asyncio.sleep(random.uniform(0, 0.01))  # retry jitter
    STATS["logins"] = seen + 1
    SESSIONS[sid] = user

async def main():
    await asyncio.gather(login("a"), login("b"))
    assert len(SESSIONS) == 2, SESSIONS
    assert STATS["logins"] == 2, STATS
"""


def test_random_jitter_and_uuids_are_explored_and_replayed(tmp_path: Path) -> None:
    """Random sleeps and uuid4 ids made every execution differ ("nondeterministic", exit 2);
    now the failure is found and its schedule replays in another process."""
    (tmp_path / "jitter.py").write_text(textwrap.dedent(JITTER))
    r = cli("check", "jitter.py", "--scenario", "main", "--no-telemetry", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL" in r.stdout, r.stdout
    schedules = list((tmp_path / ".chaossloth").glob("*.schedule.json"))
    assert len(schedules) == 1, schedules
    again = cli("replay", str(schedules[0]), cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "the failure reproduces" in again.stdout, again.stdout


AS_COMPLETED = """
import asyncio

TOTAL = {"n": 0}

async def fetch(i):
    await asyncio.sleep(0)
    n = TOTAL["n"]
    await asyncio.sleep(0)
    TOTAL["n"] = n + i
    return i

async def main():
    got = [await f for f in asyncio.as_completed([fetch(1), fetch(2), fetch(3)])]
    assert sorted(got) == [1, 2, 3]
"""


def test_as_completed_of_coroutines_starts_its_tasks_in_one_order(tmp_path: Path) -> None:
    """as_completed makes its tasks in the order of a set of coroutines (addresses), which
    differed between executions of one schedule: exit 2 "nondeterministic" from DPOR's replay
    check.  While the program is loaded the tasks are made in the order given."""
    (tmp_path / "fanout.py").write_text(textwrap.dedent(AS_COMPLETED))
    for jobs in ("1", "2"):
        r = cli("check", "fanout.py", "--scenario", "main", "--no-telemetry", "--jobs", jobs,
                "--no-database", cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        assert "PASS" in r.stdout and "complete" in r.stdout, r.stdout


SHUTDOWN = """
import asyncio

STOPPED = []

async def worker(i):
    try:
        while True:
            await asyncio.sleep(1)
    except asyncio.CancelledError:
        STOPPED.append(i)
        raise

async def main():
    workers = [asyncio.create_task(worker(i)) for i in range(4)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    assert tasks == workers  # in creation order
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert len(STOPPED) == 4, STOPPED
"""


def test_all_tasks_iterates_in_creation_order(tmp_path: Path) -> None:
    """A shutdown that cancels asyncio.all_tasks() cancelled them in an order of addresses, a
    different one in each execution ("two runs in the same order diverged", exit 2)."""
    (tmp_path / "shutdown.py").write_text(textwrap.dedent(SHUTDOWN))
    r = cli("check", "shutdown.py", "--scenario", "main", "--no-telemetry", "--no-database",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "nondeterministic" not in r.stderr, r.stderr
    # its failures are of the last assertion (a worker cancelled before it first ran, which
    # the exploration's reordering of ready steps allows), never of the order of all_tasks()
    assert "PASS" in r.stdout or "AssertionError: [" in r.stdout, r.stdout


WAIT = """
import asyncio

async def worker(i):
    await asyncio.sleep(i)
    return i

async def main():
    tasks = [asyncio.create_task(worker(i)) for i in range(1, 6)]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    assert list(pending) == tasks[1:], (pending, tasks)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    assert [t.result() for t in done] == [1]
"""


def test_wait_returns_sets_that_iterate_in_creation_order(tmp_path: Path) -> None:
    """Cancelling what asyncio.wait left pending cancelled it in an order of addresses."""
    (tmp_path / "first.py").write_text(textwrap.dedent(WAIT))
    r = cli("check", "first.py", "--scenario", "main", "--no-telemetry", "--no-database",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_the_replaced_functions_are_put_back_when_the_program_is_released() -> None:
    import asyncio
    import asyncio.tasks

    names = ("as_completed", "all_tasks", "wait")
    before = {n: getattr(asyncio.tasks, n) for n in names}, uuid.uuid4
    drawing = [getattr(secrets, n) for n in entropy._SECRETS]
    entropy.begin()
    try:
        for n in names:
            assert getattr(asyncio, n) is getattr(asyncio.tasks, n)
            assert getattr(asyncio.tasks, n).__module__ == "asyncio.tasks"
            assert getattr(asyncio.tasks, n).__name__ == n
        assert uuid.uuid4 is entropy._seeded_uuid4
        assert secrets._sysrand is entropy._ids
    finally:
        entropy.end()
    assert [getattr(secrets, n) for n in entropy._SECRETS] == drawing
    assert ({n: getattr(asyncio.tasks, n) for n in names}, uuid.uuid4) == before
    assert all(getattr(asyncio, n) is before[0][n] for n in names)


SESSIONS = """
import asyncio
import secrets

SESSIONS = {}
STATS = {"logins": 0}

async def login(user):
    token = secrets.token_urlsafe(16)
    SESSIONS[token] = user
    await asyncio.sleep(0)
    n = STATS["logins"]
    await asyncio.sleep(0)
    STATS["logins"] = n + 1

async def main():
    await asyncio.gather(login("a"), login("b"), login("c"))
    assert len(SESSIONS) == 3, SESSIONS
"""


def test_a_session_store_keyed_by_secrets_tokens_is_explored(tmp_path: Path) -> None:
    """Tokens from secrets were other keys in every execution: DPOR's replay of a step saw other
    accesses ("nondeterministic", exit 2)."""
    (tmp_path / "sessions.py").write_text(textwrap.dedent(SESSIONS))
    r = cli("check", "sessions.py", "--scenario", "main", "--no-telemetry", "--no-database",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_the_clock_the_program_reads_is_the_loops_while_it_runs() -> None:
    """time.monotonic() and friends read the running controlled loop's clock for the program,
    the real clock for ChaosSloth's own code, with no such loop running, and after end()."""
    import asyncio
    import time

    from chaossloth.loop import ControlledLoop

    real = {n: getattr(time, n) for n in entropy._CLOCKS}
    ours: dict[str, Any] = {"__name__": "chaossloth.someone", "time": time}
    exec("def reads(): return time.monotonic()", ours)  # noqa: S102
    entropy.begin()
    try:
        assert abs(time.monotonic() - real["monotonic"]()) < 60  # no loop running: real
        seen: list[Any] = []

        async def program() -> None:
            for _ in range(2):
                seen.append((time.monotonic(), time.perf_counter(), time.time(),
                             time.monotonic_ns(), time.time_ns(), ours["reads"]()))  # fmt: skip
                await asyncio.sleep(2.5)
            seen.append((time.gmtime(), time.strftime("%Y-%m-%d %H:%M:%S"), time.ctime()))
            seen.append(time.gmtime(0))  # given a time: the real function

        loop = ControlledLoop()
        try:
            loop.run_until_complete(program())
        finally:
            loop.close()
        (m0, p0, t0, mns0, tns0, ours0), (m1, p1, t1, mns1, tns1, _), dated, epoch = seen
        assert (m0, p0, t0, mns0, tns0) == (0.0, 0.0, entropy.WALL_EPOCH, 0,
                                            entropy.WALL_EPOCH * 10**9)  # fmt: skip
        assert (m1, p1, t1, mns1) == (2.5, 2.5, entropy.WALL_EPOCH + 2.5, 2_500_000_000)
        assert tns1 == entropy.WALL_EPOCH * 10**9 + 2_500_000_000
        assert ours0 > 60 or abs(ours0 - real["monotonic"]()) < 60  # ChaosSloth's own: real
        assert dated[0] == real["gmtime"](entropy.WALL_EPOCH + 5.0)
        assert dated[1] == real["strftime"]("%Y-%m-%d %H:%M:%S",
                                            real["localtime"](entropy.WALL_EPOCH + 5.0))  # fmt: skip
        assert dated[2] == real["ctime"](entropy.WALL_EPOCH + 5.0)
        assert epoch == real["gmtime"](0)
        assert time.monotonic.__name__ == "monotonic" and time.monotonic.__module__ == "time"
    finally:
        entropy.end()
    assert {n: getattr(time, n) for n in entropy._CLOCKS} == real


DEADLINE = """
import asyncio
import time


class Service:
    def __init__(self):
        self.ready = False

    async def start(self):
        await asyncio.sleep(STARTUP)
        self.ready = True

    async def wait_ready(self):
        deadline = time.monotonic() + 2.0
        while not self.ready:
            if time.monotonic() > deadline:
                raise TimeoutError("not ready in 2 s")
            await asyncio.sleep(0.1)


async def main():
    s = Service()
    await asyncio.gather(s.start(), s.wait_ready())
"""


def test_a_deadline_on_time_monotonic_expires_as_on_the_stock_loop(tmp_path: Path) -> None:
    """A deadline read from time.monotonic() and polled with asyncio.sleep(0.1) never expired:
    the sleeps took no real time, so a startup of 5 s that fails every stock run passed every
    schedule ("PASS (complete)").  Now the program reads the loop's clock."""
    (tmp_path / "slow.py").write_text(textwrap.dedent(DEADLINE).replace("STARTUP", "5.0"))
    r = cli("check", "slow.py", "--scenario", "main", "--no-database", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "TimeoutError: not ready in 2 s" in r.stdout, r.stdout
    assert "natural failure rate on the stock loop: 0/" not in r.stdout, r.stdout
    (tmp_path / "quick.py").write_text(textwrap.dedent(DEADLINE).replace("STARTUP", "0.5"))
    r = cli("check", "quick.py", "--scenario", "main", "--no-telemetry", "--no-database",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and "PASS" in r.stdout and "complete" in r.stdout, r.stdout + r.stderr


STAMPED = """
import asyncio
import logging
import time

LOG = []


class Collect(logging.Handler):
    def emit(self, record):
        LOG.append(self.format(record))


log = logging.getLogger("stamped")
log.propagate = False
handler = Collect()
handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
log.addHandler(handler)
log.setLevel(logging.INFO)
TOTAL = {"n": 0}


async def handle(request_id):
    log.info("start %s", request_id)
    n = TOTAL["n"]
    await asyncio.sleep(0.01)
    TOTAL["n"] = n + 1
    log.info("done %s at %s", request_id, time.time())


async def main():
    stamp = time.strftime("%H%M%S")
    await asyncio.gather(*[handle(f"{stamp}-{time.time_ns()}-{i}") for i in range(2)])
    assert len(LOG) == 4, LOG
"""


def test_timestamps_handed_to_tasks_are_the_same_in_every_execution(tmp_path: Path) -> None:
    """Request ids made from time.time_ns() and strftime, and log records stamped with the
    time, differed in every execution: DPOR's replay check stopped the run (exit 2,
    "nondeterministic").  Now they are read from the loop's clock, and the exploration
    completes."""
    (tmp_path / "stamped.py").write_text(textwrap.dedent(STAMPED))
    for jobs in ("1", "2"):
        r = cli("check", "stamped.py", "--scenario", "main", "--no-telemetry", "--no-database",
                "--jobs", jobs, cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        assert "PASS" in r.stdout and "complete" in r.stdout, r.stdout
