"""Output paths (issue 13): --json, --schedule-out and --mermaid given a FIFO, a device node, a
symlink, the program's own file, an instrumented module, or a read-only directory.  Special
files are written in place (never replaced by a regular file), a symlink is followed, the
program's files are refused (exit 2, one line), and a schedule that cannot be written where
asked goes to a temporary directory, said in the output, with the verdict intact (exit 1)."""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

WALL = 120
MEMORY = 1536 * 1024 * 1024

PROGRAM = """
import asyncio
import helper

async def _inc():
    v = helper.counter["n"]
    await asyncio.sleep(0)
    helper.counter["n"] = v + 1

async def racy():
    helper.counter["n"] = 0
    await asyncio.gather(_inc(), _inc())
    assert helper.counter["n"] == 2, helper.counter["n"]
"""


def _limits() -> Callable[[], None]:
    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    return pre


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "chaossloth", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=WALL,
        preexec_fn=_limits(),
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM), encoding="utf-8")
    (tmp_path / "helper.py").write_text("counter = {'n': 0}\n", encoding="utf-8")
    return tmp_path


def check(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("check", "prog.py", "--scenario", "racy", "--no-telemetry", *extra, cwd=project)


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


# ------------------------------------------------------------------ special files


@pytest.mark.parametrize("flag", ["--json", "--schedule-out", "--mermaid"])
def test_a_fifo_is_written_in_place(project: Path, flag: str) -> None:
    fifo = project / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        r = check(project, flag, str(fifo))
    finally:
        if t.is_alive():  # the command never opened it: unblock the reader
            with open(fifo, "wb"):
                pass
        t.join(10)
    assert r.returncode == 1, r.stdout + r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not replaced
    assert got and got[0].strip(), "nothing was written to the FIFO"
    assert not list(project.glob("out.fifo.*"))  # no temporary file left beside it


def test_a_device_node_is_written_in_place(project: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod of a character device needs root")
    dev = project / "null"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("mknod is not permitted here (a container without CAP_MKNOD)")
    try:
        with open(dev, "w") as f:
            f.write("probe")
    except OSError:
        pytest.skip("device nodes cannot be opened on this filesystem (nodev)")
    r = check(project, "--json", str(dev))
    assert r.returncode == 1, r.stdout + r.stderr
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


def test_dev_null_stays_a_device(project: Path) -> None:
    before = os.stat("/dev/null")
    r = check(project, "--json", "/dev/null", "--mermaid", "/dev/null")
    assert r.returncode == 1, r.stdout + r.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_a_symlink_is_followed_to_its_target(project: Path) -> None:
    (project / "reports").mkdir()
    target = project / "reports" / "report.json"
    link = project / "latest.json"
    link.symlink_to(target)
    r = check(project, "--json", str(link))
    assert r.returncode == 1, r.stdout + r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("{")


# ------------------------------------------------------------------ the program's own files


@pytest.mark.parametrize("flag", ["--json", "--schedule-out", "--mermaid"])
@pytest.mark.parametrize("victim", ["prog.py", "helper.py", "./sub/../prog.py"])
def test_the_programs_files_are_never_written(project: Path, flag: str, victim: str) -> None:
    (project / "sub").mkdir()
    before = {p.name: p.read_bytes() for p in project.glob("*.py")}
    r = check(project, flag, victim)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "refusing to write over" in one_error_line(r)
    assert {p.name: p.read_bytes() for p in project.glob("*.py")} == before


def test_a_symlink_to_the_program_is_refused(project: Path) -> None:
    (project / "out.json").symlink_to(project / "prog.py")
    before = (project / "prog.py").read_bytes()
    r = check(project, "--json", "out.json")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "refusing to write over" in one_error_line(r)
    assert (project / "prog.py").read_bytes() == before


def test_replay_refuses_to_draw_over_the_program(project: Path) -> None:
    r = check(project, "--schedule-out", "s.json")
    assert r.returncode == 1, r.stdout + r.stderr
    before = (project / "prog.py").read_bytes()
    rr = run_cli("replay", "s.json", "--mermaid", "prog.py", cwd=project)
    assert rr.returncode == 2, rr.stdout + rr.stderr
    assert "refusing to write over" in one_error_line(rr)
    assert (project / "prog.py").read_bytes() == before


# ------------------------------------------------------------------ unwritable places


def test_an_unwritable_schedule_path_keeps_the_verdict(project: Path) -> None:
    (project / "afile").write_text("x")
    r = check(project, "--schedule-out", "afile/s.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "cannot write afile/s.json" in r.stdout
    written = r.stdout.split("the schedule was written to ")[1].split()[0]
    assert Path(written).is_file()
    rr = run_cli("replay", written, cwd=project)
    assert rr.returncode == 1, rr.stdout + rr.stderr
    shutil.rmtree(Path(written).parent)


def _read_only_mount_works(d: Path) -> bool:
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         f'mount --bind "{d}" "{d}" && mount -o remount,ro,bind "{d}" && ! touch "{d}/.probe"'],
        capture_output=True,
        timeout=30,
        check=False,
    )  # fmt: skip
    return probe.returncode == 0


def test_a_read_only_directory_keeps_the_verdict(tmp_path: Path) -> None:
    """The current directory cannot be written: mode 0555, or for root (who writes anyway) a
    read-only bind mount in a private mount namespace."""
    d = tmp_path / "ro"
    d.mkdir()
    (d / "prog.py").write_text(textwrap.dedent(PROGRAM), encoding="utf-8")
    (d / "helper.py").write_text("counter = {'n': 0}\n", encoding="utf-8")
    command = [sys.executable, "-m", "chaossloth", "check", "prog.py", "--scenario", "racy",
               "--no-telemetry"]  # fmt: skip
    if os.geteuid() == 0:
        if shutil.which("unshare") is None or not _read_only_mount_works(d):
            pytest.skip("root writes a 0555 directory, and no read-only mount is possible here")
        quoted = " ".join(f"'{c}'" for c in command)
        command = ["unshare", "-m", "sh", "-c",
                   f'mount --bind "{d}" "{d}" && mount -o remount,ro,bind "{d}" && exec {quoted}']  # fmt: skip
    else:
        d.chmod(0o555)
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    try:
        r = subprocess.run(
            command,
            cwd=d,
            env=env,
            capture_output=True,
            text=True,
            timeout=WALL,
            preexec_fn=_limits(),
            check=False,
        )
    finally:
        d.chmod(0o755)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL" in r.stdout
    assert "cannot write .chaossloth/prog.racy.schedule.json" in r.stdout
    written = r.stdout.split("the schedule was written to ")[1].split()[0]
    assert Path(written).is_file()
    assert not (d / ".chaossloth").exists()
    shutil.rmtree(Path(written).parent, ignore_errors=True)
