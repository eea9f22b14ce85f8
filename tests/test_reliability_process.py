"""Interrupted and killed runs (issue 37), end to end through the CLI in subprocesses: the
--jobs workers never outlive the main process (SIGKILL, SIGTERM, Ctrl-C), and a Ctrl-C during
the exploration exits 130 at once yet saves the failing schedule found so far (the schedule
file, which replays, and the failure database entry), or says in its one line that there is
none.  Workers are found through /proc (Linux); the only timings are liveness bounds."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not (hasattr(os, "fork") and os.path.isdir("/proc/self/task")),
    reason="--jobs needs os.fork; the workers are found through Linux's /proc",
)

#: liveness bounds (seconds): a run reaching stage 3, workers ending, a run ending
START = 60
GONE = 10
END = 60

#: fails in most schedules (a lost update), never in the default order
RACY = """
import asyncio

state = {"n": 0}


async def worker(i):
    for _ in range(i):
        await asyncio.sleep(0)
    v = state["n"]
    await asyncio.sleep(0)
    state["n"] = v + 1


async def main():
    state["n"] = 0
    await asyncio.gather(*(worker(i) for i in range(3)))
    assert state["n"] == 3, state["n"]
"""

PASSING = RACY.replace('    v = state["n"]\n    await asyncio.sleep(0)\n', '    v = state["n"]\n')

#: a sampling exploration far longer than any test: only a signal ends it
ENDLESS = (
    "--scenario",
    "main",
    "--no-telemetry",
    "--strategy",
    "random",
    "--max-executions",
    "100000000",
    "--time-limit",
    "600",
)

#: the CLI with libc's prctl hidden: the workers' portable check of their parent alone
WITHOUT_PRCTL = """
import sys

from chaossloth import cli, parallel

parallel._prctl = lambda: None
sys.exit(cli.main())
"""


def _preexec() -> None:
    """Ctrl-C's default disposition, which a background job started without job control
    inherits as ignored (Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(
    tmp_path: Path, *args: str, command: list[str] | None = None, session: bool = False
) -> subprocess.Popen[str]:
    """The CLI (or `command`) with `args` in tmp_path; with `session`, in a process group of
    its own (a terminal's Ctrl-C goes to the whole group)."""
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    return subprocess.Popen(
        [*(command or [sys.executable, "-m", "chaossloth"]), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
        preexec_fn=_preexec,  # noqa: PLW1509 - this test process starts no thread
    )


Process = tuple[int, int]  # (pid, start time in clock ticks): one process, whatever pid reuse


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of `pid`, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], int(fields[1]), int(fields[19])


def _children(pid: int) -> list[Process]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None and st[1] == pid:
            found.append((int(entry), st[2]))
    return found


def _exists(proc: Process) -> bool:
    """The process exists, running or a zombie."""
    st = _stat(proc[0])
    return st is not None and st[2] == proc[1]


def _alive(proc: Process) -> bool:
    """The process runs (a zombie has ended: its new parent has not reaped it yet)."""
    st = _stat(proc[0])
    return st is not None and st[2] == proc[1] and st[0] not in ("Z", "X")


def _workers(run: subprocess.Popen[str], n: int) -> list[Process]:
    """The run's n --jobs workers, once they all run."""
    deadline = time.monotonic() + START
    while time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        found = _children(run.pid)
        if len(found) >= n:
            return found
        time.sleep(0.05)
    pytest.fail(f"the run did not start {n} workers within {START}s")


def _survivors(workers: list[Process]) -> list[Process]:
    """The workers still alive after GONE seconds (and then killed: the machine is shared)."""
    deadline = time.monotonic() + GONE
    left = [w for w in workers if _alive(w)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [w for w in left if _alive(w)]
    for pid, _start_time in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _exploring(run: subprocess.Popen[str]) -> None:
    """Waits until the run is in stage 3 (stage 2 said its line)."""
    assert run.stdout is not None
    line = ""
    while "[2/8]" not in line:
        line = run.stdout.readline()
        assert line, run.communicate()


def _stop(run: subprocess.Popen[str]) -> tuple[str, str]:
    """Kills the run if it still runs; its output."""
    if run.poll() is None:
        run.kill()
    return run.communicate(timeout=END)


def _interrupted_line(err: str) -> str:
    """The run's one line about the interrupt (a coroutine the interrupt caught before it
    started may add a RuntimeWarning beside it)."""
    lines = [ln for ln in err.splitlines() if ln.startswith("chaossloth: error: interrupted")]
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------------ workers die with the run


@pytest.mark.parametrize("check", ["prctl", "getppid"])
def test_no_worker_survives_a_sigkill_of_the_main_process(tmp_path: Path, check: str) -> None:
    """Linux's parent-death signal, and (prctl hidden) the workers' own check of their parent
    between executions."""
    (tmp_path / "prog.py").write_text(PASSING)
    command = None
    if check == "getppid":
        (tmp_path / "run.py").write_text(WITHOUT_PRCTL)
        command = [sys.executable, "run.py"]
    run = _start(tmp_path, "check", "prog.py", *ENDLESS, "--jobs", "2", command=command)
    workers: list[Process] = []
    try:
        workers = _workers(run, 2)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=END)
        assert _survivors(workers) == []
    finally:
        _survivors(workers)
        _stop(run)


def test_sigterm_stops_and_reaps_the_workers(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(PASSING)
    run = _start(tmp_path, "check", "prog.py", *ENDLESS, "--jobs", "2")
    workers: list[Process] = []
    try:
        workers = _workers(run, 2)
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=END)
        assert run.returncode == -signal.SIGTERM, _stop(run)
        # reaped by the run before it ended: not even zombies are left
        assert [w for w in workers if _exists(w)] == []
    finally:
        _survivors(workers)
        _stop(run)


# ------------------------------------------------------------------ Ctrl-C saves what was found


def _interrupt(
    tmp_path: Path, program: str, jobs: int, settle: float, *, group: bool = False
) -> tuple[str, str]:
    """Runs the endless exploration of `program` with --no-stop-on-failure, sends one Ctrl-C
    `settle` seconds into stage 3 (to the main process only, or with `group` to its whole
    process group, as a terminal does: the workers get it too); checks the exit (130) and that
    no worker is left; returns the run's one interrupt line and its stdout."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(program))
    run = _start(
        tmp_path,
        "check",
        "prog.py",
        *ENDLESS,
        "--no-stop-on-failure",
        "--jobs",
        str(jobs),
        session=group,
    )
    workers: list[Process] = []
    try:
        _exploring(run)
        if jobs > 1:
            workers = _workers(run, jobs)
        time.sleep(settle)
        if group:
            os.killpg(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=END)
        assert run.returncode == 130, out + err
        assert [w for w in workers if _exists(w)] == []  # stopped and reaped by the run
        return _interrupted_line(err), out
    finally:
        _survivors(workers)
        _stop(run)


@pytest.mark.parametrize(
    ("jobs", "group"), [(1, False), (2, False), (2, True)], ids=["1", "2", "2-group"]
)
def test_ctrl_c_saves_the_failure_found_so_far(tmp_path: Path, jobs: int, group: bool) -> None:
    # most schedules fail: a failure is found within the first executions; on a machine so
    # loaded that none ran yet, the run is tried again later in its stage 3
    for settle in (1.0, 4.0, 12.0):
        line, out = _interrupt(tmp_path, RACY, jobs, settle, group=group)
        if not line.endswith("no failing schedule found so far"):
            break
    assert "[3/8] Collapse: explore the distinct schedules" in out and "stopped" in out, out
    found = re.fullmatch(
        r"chaossloth: error: interrupted during the exploration: failing schedule found so "
        r"far \(assertion in Task main \(main\): AssertionError: 2\), saved as (\S+) "
        r"\(replay: chaossloth replay \1\); failure database: (\S+)",
        line,
    )
    assert found is not None, line
    schedule_file, saved = found.groups()
    assert schedule_file == os.path.join(".chaossloth", "prog.main.schedule.json")
    assert (tmp_path / schedule_file).is_file()
    assert (tmp_path / saved).is_file()
    assert Path(saved).parent.parent == Path(".chaossloth", "failures")
    replayed = subprocess.run(
        [sys.executable, "-m", "chaossloth", "replay", schedule_file],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=END,
        check=False,
    )
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "AssertionError: 2" in replayed.stdout + replayed.stderr
    # the saved entry is the next run's failure at once (the database's own replay)
    again = subprocess.run(
        [sys.executable, "-m", "chaossloth", "check", "prog.py", "--scenario", "main",
         "--no-telemetry", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=END,
        check=False,
    )  # fmt: skip
    assert again.returncode == 1, again.stdout + again.stderr


@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_with_nothing_found_says_so(tmp_path: Path, jobs: int) -> None:
    line, _out = _interrupt(tmp_path, PASSING, jobs, 0.5)
    assert line == (
        "chaossloth: error: interrupted during the exploration: no failing schedule found so far"
    )
    assert not (tmp_path / ".chaossloth" / "prog.main.schedule.json").exists()
    assert not (tmp_path / ".chaossloth" / "failures").exists()
