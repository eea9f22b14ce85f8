"""Issue 37's reliability suite: nothing the program does ends the verifier or fakes its
verdict, the program's entropy is decided once, its strings reach the terminal and the reports
escaped, and nothing ChaosSloth writes lands where it must not.  Each case runs the installed
CLI in a subprocess (test_hostile_programs.run_cli) and asserts its exit code and first line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_hostile_programs import check, one_error_line, run_cli, write

# ------------------------------------------------------------------ the process's own end

ENDINGS = """
import asyncio, atexit, os, signal

async def _racer(n):
    await asyncio.sleep(0)
    return n

async def os_exit_0():
    await asyncio.gather(_racer(1), _racer(2))
    os._exit(0)

async def os_exit_7():
    await asyncio.sleep(0)
    os._exit(7)

async def os_exit_swallowed():
    await asyncio.sleep(0)
    try:
        os._exit(0)
    except BaseException:
        pass

async def os_abort():
    await asyncio.sleep(0)
    os.abort()

async def kill_self():
    await asyncio.sleep(0)
    os.kill(os.getpid(), signal.SIGTERM)

async def kill_group():
    await asyncio.sleep(0)
    os.killpg(0, signal.SIGKILL)

async def raise_sigint():
    await asyncio.sleep(0)
    signal.raise_signal(signal.SIGINT)

async def probe_self():
    await asyncio.sleep(0)
    os.kill(os.getpid(), 0)  # signal 0: a liveness probe, the real call

async def handlers_kept():
    seen = []
    def mine(*a):
        seen.append(a)

    old = signal.signal(signal.SIGINT, mine)
    assert signal.getsignal(signal.SIGINT) is mine
    assert signal.signal(signal.SIGINT, old) is mine  # the previous one: the program's own
    await asyncio.sleep(0)

async def exit_handler():
    atexit.register(os._exit, 5)
    await asyncio.sleep(0)
"""


@pytest.mark.parametrize(
    ("scenario", "call"),
    [
        ("os_exit_0", "os._exit(0)"),
        ("os_exit_7", "os._exit(7)"),
        ("os_exit_swallowed", "os._exit(0)"),
        ("os_abort", "os.abort()"),
        ("kill_self", "SIGTERM)"),
        ("kill_group", "os.killpg(0, SIGKILL)"),
        ("raise_sigint", "signal.raise_signal(SIGINT)"),
    ],
)
def test_a_process_ending_call_is_one_line_and_exit_2(
    tmp_path: Path, scenario: str, call: str
) -> None:
    write(tmp_path, "ends.py", ENDINGS)
    r = check(tmp_path, "ends.py", scenario)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = one_error_line(r)
    assert line.startswith("chaossloth: error: ends.py:"), line
    assert call in line and "would end or signal ChaosSloth's own process" in line, line


@pytest.mark.parametrize("scenario", ["probe_self", "handlers_kept", "exit_handler"])
def test_contained_calls_keep_the_verdict(tmp_path: Path, scenario: str) -> None:
    write(tmp_path, "ends.py", ENDINGS)
    r = check(tmp_path, "ends.py", scenario)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "PASS: every schedule of this workload passes (exploration complete)" in r.stdout


def test_os_exit_at_import_is_one_line(tmp_path: Path) -> None:
    write(
        tmp_path,
        "top.py",
        """
        import asyncio, os
        os._exit(3)

        async def scenario():
            await asyncio.sleep(0)
        """,
    )
    r = check(tmp_path, "top.py", "scenario")
    assert r.returncode == 2
    assert one_error_line(r).startswith(
        "chaossloth: error: top.py:3: the program called os._exit(3)"
    )


def test_os_exit_under_the_plugin_fails_that_test_only(tmp_path: Path) -> None:
    write(
        tmp_path,
        "test_ends.py",
        """
        import asyncio, os

        async def test_ends():
            await asyncio.sleep(0)
            os._exit(0)

        async def test_fine():
            await asyncio.sleep(0)
        """,
    )
    r = run_cli_pytest(tmp_path, "test_ends.py")
    assert r.returncode == 1, r.stdout
    assert "1 failed, 1 passed" in r.stdout
    assert "the program called os._exit(0)" in r.stdout


def run_cli_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--chaossloth", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# ------------------------------------------------------------------ entropy, decided once

URANDOM = """
import asyncio, os, random, secrets

class Counter:
    def __init__(self):
        self.n = 0

    async def bump(self):
        v = self.n
        # whether this request yields depends on the OS's entropy
        if os.urandom(1)[0] % 2 or random.SystemRandom().random() < 0.5 or secrets.randbits(1):
            await asyncio.sleep(0)
        self.n = v + 1

async def scenario():
    c = Counter()
    await asyncio.gather(c.bump(), c.bump(), c.bump())
    assert c.n == 3
"""


def test_os_urandom_gives_one_verdict_and_one_replay(tmp_path: Path) -> None:
    write(tmp_path, "urand.py", URANDOM)
    firsts = set()
    for _ in range(5):
        r = check(tmp_path, "urand.py", "scenario")
        assert r.returncode == 1, (r.stdout, r.stderr)
        firsts.add(next(ln for ln in r.stdout.splitlines() if "FAIL:" in ln).strip())
    assert len(firsts) == 1, firsts
    schedule = tmp_path / ".chaossloth" / "urand.scenario.schedule.json"
    for _ in range(5):
        r = run_cli("replay", str(schedule), cwd=tmp_path)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "reproduces" in r.stdout.lower() or "AssertionError" in r.stdout


# ------------------------------------------------------------------ the program's strings

STRINGS = """
import asyncio

class Counter:
    def __init__(self):
        self.n = 0

    async def bump(self):
        v = self.n
        await asyncio.sleep(0)
        self.n = v + 1

async def surrogate():
    c = Counter()
    await asyncio.gather(c.bump(), c.bump())
    assert c.n == 2, "lost \\ud800 update"

async def controls():
    await asyncio.sleep(0)
    raise ValueError("bad \\x1b[2J\\x07 end")
"""


def test_a_lone_surrogate_keeps_the_verdict_and_every_report(tmp_path: Path) -> None:
    write(tmp_path, "strings.py", STRINGS)
    r = check(
        tmp_path,
        "strings.py",
        "surrogate",
        "--json",
        "r.json",
        "--sarif",
        "r.sarif",
        "--html",
        "r.html",
    )
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr == ""
    assert "lost \\ud800 update" in r.stdout
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "fail" and "\\ud800" in report["failure"]["message"]
    json.loads((tmp_path / "r.sarif").read_text(encoding="utf-8"))
    assert "lost" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_control_characters_reach_the_terminal_escaped(tmp_path: Path) -> None:
    write(tmp_path, "strings.py", STRINGS)
    r = check(tmp_path, "strings.py", "controls")
    assert r.returncode == 1
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "bad \\x1b[2J\\x07 end" in r.stdout


# ------------------------------------------------------------------ files written


RACE = """
import asyncio

class Counter:
    def __init__(self): self.n = 0

    async def bump(self):
        v = self.n
        await asyncio.sleep(0)
        self.n = v + 1

async def scenario():
    c = Counter()
    await asyncio.gather(c.bump(), c.bump())
    assert c.n == 2
"""


def test_a_planted_schedule_symlink_leaves_its_target_untouched(tmp_path: Path) -> None:
    write(tmp_path, "race.py", RACE)
    victim = tmp_path / "victim.txt"
    victim.write_text("victim\n")
    (tmp_path / ".chaossloth").mkdir()
    planted = tmp_path / ".chaossloth" / "race.scenario.schedule.json"
    planted.symlink_to(victim)
    r = check(tmp_path, "race.py", "scenario")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert victim.read_text() == "victim\n"
    assert not planted.is_symlink() and planted.is_file()


def test_a_symlinked_state_directory_is_not_written_through(tmp_path: Path) -> None:
    write(tmp_path, "race.py", RACE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".chaossloth").symlink_to(elsewhere)
    r = check(tmp_path, "race.py", "scenario", "--no-database")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert list(elsewhere.iterdir()) == []
    assert "the schedule was written to" in r.stdout


def test_fix_write_leaves_a_planted_backup_symlinks_target_untouched(tmp_path: Path) -> None:
    write(tmp_path, "race.py", RACE)
    victim = tmp_path / "victim.txt"
    victim.write_text("victim\n")
    (tmp_path / ".chaossloth").mkdir()
    (tmp_path / ".chaossloth" / "race.orig.py").symlink_to(victim)
    r = run_cli("fix", "race.py", "--scenario", "scenario", "--write", "-q", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert victim.read_text() == "victim\n"
    backup = tmp_path / ".chaossloth" / "race.orig.py"
    assert not backup.is_symlink()
    assert "self.n = 0" in backup.read_text() and "Lock" not in backup.read_text()
    assert "asyncio.Lock()" in (tmp_path / "race.py").read_text()


def test_fix_write_refuses_a_read_only_file_unless_forced(tmp_path: Path) -> None:
    target = write(tmp_path, "race.py", RACE)
    target.chmod(0o444)
    before = target.read_text()
    r = run_cli("fix", "race.py", "--scenario", "scenario", "--write", "-q", cwd=tmp_path)
    assert r.returncode == 2
    assert one_error_line(r).endswith(
        "race.py: the file is read-only (mode 0444); not patched "
        "(fix --write --force patches it anyway)"
    )
    assert target.read_text() == before
    r = run_cli(
        "fix", "race.py", "--scenario", "scenario", "--write", "--force", "-q", cwd=tmp_path
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "asyncio.Lock()" in target.read_text()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o444


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_keeps_the_verdict_and_its_exit_code(tmp_path: Path) -> None:
    write(tmp_path, "race.py", RACE)
    r = check(tmp_path, "race.py", "scenario", "--json", "/dev/full", "-q")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout.startswith("FAIL lost-update: ")
    assert one_error_line(r) == (
        "chaossloth: error: /dev/full: cannot write the report (No space left on device)"
    )
    write(
        tmp_path, "fine.py", "import asyncio\nasync def scenario():\n    await asyncio.sleep(0)\n"
    )
    r = check(tmp_path, "fine.py", "scenario", "--json", "/dev/full", "-q")
    assert r.returncode == 2 and r.stdout.startswith("PASS")


# ------------------------------------------------------------------ threads on the boundary

THREADS = """
import asyncio, queue, threading
from concurrent.futures import ThreadPoolExecutor

async def canonical():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    t = threading.Thread(target=lambda: loop.call_soon_threadsafe(fut.set_result, 3))
    t.start()
    assert await fut == 3
    t.join()

async def lost_wakeup():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    t = threading.Thread(target=lambda: None)  # forgets to complete the future
    t.start()
    assert await fut == 3

async def coroutine_threadsafe():
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    box = []

    async def remote(v):
        box.append(v)
        done.set()
        return v * 2

    def work():
        box.append(asyncio.run_coroutine_threadsafe(remote(21), loop).result(timeout=30))

    t = threading.Thread(target=work)
    t.start()
    await done.wait()
    await asyncio.sleep(0.01)
    t.join(timeout=30)
    assert box == [21, 42], box

async def slow_thread_within_a_timeout():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def work():
        import time
        time.sleep(0.05)
        loop.call_soon_threadsafe(fut.set_result, 1)

    threading.Thread(target=work).start()
    assert await asyncio.wait_for(fut, 5) == 1

async def thread_writes():
    loop = asyncio.get_running_loop()
    acct = Account()
    fut = loop.create_future()

    def work():
        acct.balance += 5  # races with deposit's read-modify-write, on another thread
        loop.call_soon_threadsafe(fut.set_result, None)

    async def deposit():
        v = acct.balance
        await asyncio.sleep(0)
        acct.balance = v + 1

    threading.Thread(target=work).start()
    await asyncio.gather(deposit(), fut)
    assert acct.balance == 6, acct.balance

async def pool():
    with ThreadPoolExecutor(2) as ex:
        a = await asyncio.wrap_future(ex.submit(sum, [1, 2, 3]))
        b = await asyncio.wrap_future(ex.submit(max, [4, 5]))
    assert (a, b) == (6, 5)

class Account:
    def __init__(self):
        self.balance = 0

async def race_across_a_thread():
    loop = asyncio.get_running_loop()
    acct = Account()

    async def deposit_from_thread():
        fut = loop.create_future()
        threading.Thread(target=lambda: loop.call_soon_threadsafe(fut.set_result, 5)).start()
        v = acct.balance
        acct.balance = v + await fut

    async def deposit():
        v = acct.balance
        await asyncio.sleep(0)
        acct.balance = v + 1

    await asyncio.gather(deposit_from_thread(), deposit())
    assert acct.balance == 6, acct.balance

class Worker(threading.Thread):
    # aiosqlite's shape: requests on a SimpleQueue (whose get blocks in C, no Python frame
    # shows it waiting), each result sent back with call_soon_threadsafe

    def __init__(self, answers=True):
        super().__init__(daemon=True)
        self.requests = queue.SimpleQueue()
        self.answers = answers

    def run(self):
        while True:
            item = self.requests.get()
            if item is None:
                return
            fut, value = item
            if self.answers:
                fut.get_loop().call_soon_threadsafe(fut.set_result, value * 2)

    async def ask(self, value):
        fut = asyncio.get_running_loop().create_future()
        self.requests.put((fut, value))
        return await fut

async def c_blocked_worker():
    w = Worker()
    w.start()
    assert await w.ask(1) == 2
    await asyncio.sleep(0.5)  # a timer while the worker waits in C
    assert await asyncio.gather(w.ask(2), w.ask(3)) == [4, 6]
    w.requests.put(None)
    w.join()

async def c_blocked_worker_never_answers():
    w = Worker(answers=False)
    w.start()
    assert await w.ask(1) == 2
"""


@pytest.mark.parametrize("scenario", ["canonical", "slow_thread_within_a_timeout"])
def test_a_thread_completing_a_future_passes_complete(tmp_path: Path, scenario: str) -> None:
    write(tmp_path, "threads.py", THREADS)
    r = check(tmp_path, "threads.py", scenario)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "PASS: every schedule of this workload passes (exploration complete)" in r.stdout


@pytest.mark.parametrize("scenario", ["coroutine_threadsafe", "thread_writes"])
def test_a_thread_that_writes_shared_state_passes_incomplete_saying_why(
    tmp_path: Path, scenario: str
) -> None:
    """The thread's writes (box.append, acct.balance) are not interleaved with the loop's
    steps: never "complete"."""
    write(tmp_path, "threads.py", THREADS)
    r = check(tmp_path, "threads.py", scenario)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "exploration incomplete: a thread other than the loop's wrote state" in r.stdout
    assert "exploration complete" not in r.stdout


def test_a_thread_that_never_wakes_the_task_is_a_lost_wakeup(tmp_path: Path) -> None:
    write(tmp_path, "threads.py", THREADS)
    r = check(tmp_path, "threads.py", "lost_wakeup")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "FAIL: lost wake-up found" in r.stdout


def test_a_reused_pool_thread_passes_incomplete_saying_why(tmp_path: Path) -> None:
    write(tmp_path, "threads.py", THREADS)
    r = check(tmp_path, "threads.py", "pool")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "exploration incomplete: an event from another thread" in r.stdout


def test_a_thread_blocked_in_c_serving_requests_passes_incomplete(tmp_path: Path) -> None:
    """A worker thread waiting in a C call (SimpleQueue.get) between requests is seen still:
    the loop goes on at once (its timer fires, stage 4 runs), neither a deadlock nor the time
    limit; its events' placement is the one explored, so the verdict is incomplete."""
    write(tmp_path, "threads.py", THREADS)
    r = run_cli(
        "check", "threads.py", "--scenario", "c_blocked_worker", "--time-limit", "30", cwd=tmp_path
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "PASS: no failing schedule found (exploration incomplete: " in r.stdout
    assert "natural failure rate on the stock loop: 0/" in r.stdout


def test_a_thread_blocked_in_c_that_never_answers_is_a_lost_wakeup(tmp_path: Path) -> None:
    """The same worker forgetting to answer: after the loop waited threads.CONFIRM for the
    still thread, the task is deadlocked (a lost wake-up), well within the time limit."""
    write(tmp_path, "threads.py", THREADS)
    r = check(tmp_path, "threads.py", "c_blocked_worker_never_answers", "--time-limit", "30")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "FAIL: lost wake-up found" in r.stdout


def test_a_race_across_a_threads_event_is_found(tmp_path: Path) -> None:
    write(tmp_path, "threads.py", THREADS)
    r = check(tmp_path, "threads.py", "race_across_a_thread")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "FAIL: lost update found" in r.stdout
    schedule = tmp_path / ".chaossloth" / "threads.race_across_a_thread.schedule.json"
    for _ in range(3):
        assert run_cli("replay", str(schedule), cwd=tmp_path).returncode == 1


# ------------------------------------------------------------------ the program's output

PRINTS = """
import asyncio

class Counter:
    def __init__(self):
        self.n = 0

    async def bump(self):
        v = self.n
        print("bump read", v)
        await asyncio.sleep(0)
        print("x" * 1_000_000)
        self.n = v + 1

async def scenario():
    c = Counter()
    await asyncio.gather(c.bump(), c.bump())
    assert c.n == 2
"""


def test_the_programs_output_is_shown_once_bounded_after_the_verdict(tmp_path: Path) -> None:
    write(tmp_path, "prints.py", PRINTS)
    r = check(tmp_path, "prints.py", "scenario", "--json", "r.json")
    assert r.returncode == 1, r.stderr
    assert len(r.stdout) < 20_000  # every execution printed 2 MB
    head, _, shown = r.stdout.partition("the program's output in the failing execution (")
    assert "bump read" not in head and "FAIL: lost update" in head
    assert shown.count("| bump read 0") == 2
    assert "more characters)" in shown
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["program_output"]["text"].startswith("bump read 0\nbump read 0\n")
    assert report["program_output"]["more_characters"] > 1_000_000
    schedule = tmp_path / ".chaossloth" / "prints.scenario.schedule.json"
    r = run_cli("replay", str(schedule), cwd=tmp_path)
    assert r.returncode == 1 and "the program's output in the replay" in r.stdout


def test_a_program_that_closes_stdout_keeps_the_report(tmp_path: Path) -> None:
    write(
        tmp_path,
        "closes.py",
        """
        import asyncio, sys

        async def scenario():
            await asyncio.sleep(0)
            sys.stdout.close()
        """,
    )
    r = check(tmp_path, "closes.py", "scenario")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "PASS: every schedule of this workload passes (exploration complete)" in r.stdout
