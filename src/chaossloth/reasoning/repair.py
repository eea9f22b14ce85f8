"""Repair (stages 6 and 7): which hazards a lock can fix, what stage 7 found, writing a patch.

Stage 6 turns the diagnosed findings into :class:`~chaossloth.reasoning.synthesis.Hazard` items
(:func:`hazards_of`) or says why no lock fixes them (:func:`unfixable_reason`); stage 7
(:mod:`chaossloth.stages.adversarial_replay`) fills a :class:`Verification` per patch it tries.
:class:`Repair` is what both hand on (the JSON of ``fix``); :func:`write_patch` applies a verified
patch for ``fix --write``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaossloth import report as rp
from chaossloth.errors import InputError
from chaossloth.reasoning.synthesis import Hazard, Patch
from chaossloth.scenario import file_sha256

#: hazards a lock cannot fix, and what would
_NOT_BY_A_LOCK = {
    "cancellation": (
        "the failure is a cancellation (CancelledError/TimeoutError) that interrupts the code "
        "between its updates. A lock cannot help: the cancelled task leaves the critical "
        "section half done, and the lock is released on the way out. Make the update "
        "cancellation-safe instead: do every await before the first write (compute, then "
        "commit without awaiting), undo the partial update in `except asyncio.CancelledError:` "
        "(re-raising it), or protect the commit with `asyncio.shield`."
    ),
    "livelock": (
        "the program never terminates under some schedule (livelock or busy wait). A lock "
        "cannot fix progress: wait for the condition with an asyncio.Event or asyncio.Condition "
        "instead of polling."
    ),
    "lost-wakeup": (
        "a task waits for a signal (Event, Condition, future) that came at the wrong moment or "
        "was erased. A lock cannot deliver a signal: check the predicate and wait in one step "
        "(`await cond.wait_for(predicate)` under the condition's lock), never clear an Event "
        "another task may still need, or keep the state the signal stands for next to it."
    ),
    "exception": (
        "no access pattern on shared state explains the failure, so there is nothing for a "
        "lock to protect. Read the failure's traceback and the schedule (chaossloth replay)."
    ),
    "order": (
        "one task must run after another (an order violation): a lock gives mutual exclusion, "
        "not order. Make the later task wait for the earlier one: an asyncio.Event it sets, or "
        "await the task (or future) that produces what it needs."
    ),
}


def unfixable_reason(hazard: str | None, findings: list[rp.Finding]) -> str | None:
    """Why no lock fixes this hazard, or None when a lock may."""
    if hazard in ("cancellation", "livelock", "lost-wakeup"):
        return _NOT_BY_A_LOCK[hazard]
    if hazard == "deadlock":
        return None
    if not any(f.pattern in rp.PATTERN_HAZARD for f in findings):
        if any(f.pattern == "order" for f in findings) or hazard == "order-violation":
            return _NOT_BY_A_LOCK["order"]
        return _NOT_BY_A_LOCK["exception"]
    return None


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


#: a resource label that names state: a name, attributes, subscripts (not a call's result)
_STATE_LABEL = re.compile(r"^((global|nonlocal) )?[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\[[^()]*\])*$")


def hazards_of(findings: list[rp.Finding], path: str) -> tuple[list[Hazard], list[str]]:
    """The access-pattern findings on shared state whose accesses are in `path`, as synthesis
    input; and the other files the rest of the findings are in (patching them is not
    supported: said).  A finding whose resource is an object asyncio made for a call
    (``asyncio.gather(a, b)``: the gathering future) is ordering between tasks, not state a
    lock protects: left out."""
    out: list[Hazard] = []
    elsewhere: list[str] = []
    for f in findings:
        if f.pattern not in rp.PATTERN_HAZARD or not _STATE_LABEL.match(f.resource.strip()):
            continue
        sites = [s for s in (f.local, f.second, f.await_site, f.remote) if s is not None]
        mine = [s.line for s in sites if same_file(s.file, path)]
        if not mine:
            elsewhere += [s.file for s in sites]
            continue
        hz = Hazard(f.resource, tuple(dict.fromkeys(mine)), f.hazard)
        if hz not in out:
            out.append(hz)
    return out, sorted(set(elsewhere))


def wait_lines(findings: list[rp.Finding], path: str) -> list[int]:
    """The lines of `path` where the tasks of a deadlock's wait-for cycle wait."""
    out: list[int] = []
    for f in findings:
        for link in f.cycle:
            file, _, line = str(link.get("at", "")).rpartition(":")
            if file and line.isdigit() and same_file(file, path):
                out.append(int(line))
    return sorted(set(out))


def display_path(path: str) -> str:
    """`path` as the diff names it: relative to the current directory (so that `git apply`
    and `patch -p1` apply it from there), absolute when the file is outside it."""
    rel = os.path.relpath(path)
    return path.lstrip("/") if rel.startswith("..") else rel


@dataclass
class Verification:
    """What stage 7 found on one patch."""

    replay_passed: bool | None = None  #: the guided replay of the original failing schedule
    replay_deviations: int = 0
    executions: int = 0
    complete: bool = False
    incomplete_reason: str | None = None
    counterexample: str | None = None  #: the failure of the patched program, worded
    hazards: list[Hazard] = field(default_factory=list)  #: its findings, on original lines
    sentinel_executions: int = 0

    @property
    def passed(self) -> bool:
        return self.replay_passed is not False and self.counterexample is None


@dataclass
class Repair:
    """The outcome of stages 6-7 (JSON: :meth:`to_json`)."""

    status: str  #: "verified", "unverified", "unfixable" or "not-needed"
    path: str = ""
    patch: Patch | None = None
    diff: str = ""
    explanation: str | None = None
    verification: Verification | None = None
    hazards: list[str] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    widen_level: int = 0

    def propose(self, patch: Patch) -> None:
        """`patch` is the one to verify now (stage 6's, or stage 7's wider one)."""
        self.status = "unverified"
        self.patch = patch
        self.diff = patch.diff(display_path(patch.path))

    @property
    def verified(self) -> bool:
        return self.status == "verified"

    def to_json(self) -> dict[str, Any]:
        v = self.verification
        return {
            "status": self.status,
            "verified": self.verified,
            "complete": bool(v is not None and v.complete and self.verified),
            "executions": v.executions if v is not None else 0,
            "replay_passed": v.replay_passed if v is not None else None,
            "hazards": self.hazards,
            "locks": [lk.to_json() for lk in self.patch.locks] if self.patch else [],
            "intervals": [iv.to_json() for iv in self.patch.intervals] if self.patch else [],
            "files": [self.path] if self.patch is not None else [],
            "diff": self.diff,
            "explanation": self.explanation,
            "counterexample": v.counterexample if v is not None else None,
            "attempts": self.attempts,
            "notes": self.patch.notes if self.patch else [],
        }


def check_writable(path: str | os.PathLike[str]) -> None:
    """Refuses (InputError) a program file without write permission: a read-only file is the
    user's word that it is not to be changed (``fix --write --force`` overrides it)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise InputError(f"{path}: cannot patch the file ({exc.strerror or exc})") from None
    if not mode & 0o222:
        raise InputError(
            f"{path}: the file is read-only (mode {mode & 0o777:04o}); not patched "
            "(fix --write --force patches it anyway)"
        )


def write_patch(
    program: Any, rep: Repair, keep_dir: str = ".chaossloth", *, force: bool = False
) -> str:
    """Applies a verified patch to the program's file in place: only if the file still has
    the hash it had when it was analysed, and, unless `force`, only if it is writable (a
    read-only file is the user's word that it is not to be changed); the original is kept as
    ``<keep_dir>/<stem>.orig.py`` first (report.write_own_file: a symlink planted at the backup's
    path is replaced, never followed); the new text goes to a temporary file beside it, then
    replaces it (one rename: a reader sees the old file or the new one, never half of one),
    with the file's permissions.  Returns the backup's path."""
    assert rep.patch is not None and rep.verified
    target = Path(program.path)
    if file_sha256(target) != program.sha256:
        raise InputError(
            f"{target}: the file changed since it was analysed; not patched (run fix again)"
        )
    backup = Path(keep_dir) / f"{target.stem}.orig.py"
    try:
        if not force:
            check_writable(target)
        original = target.read_bytes()
        rp.write_own_file(backup, original)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(rep.patch.patched.encode("utf-8"))
            shutil.copymode(target, tmp)
            if file_sha256(target) != program.sha256:  # changed while we wrote
                raise InputError(f"{target}: the file changed while it was patched; not patched")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise InputError(f"{target}: cannot write the patch ({exc.strerror or exc})") from None
    return str(backup)
