"""The failure database: failing schedules kept between runs, as Hypothesis keeps its examples.

Layout: ``<database>/failures/<stem>.<what>-<key hash>/<schedule hash>.json``, one directory per
program identity and one schedule file (:mod:`chaossloth.schedule`'s format, read back with its
validating reader) per failing schedule.  The identity (:func:`program_key`) leaves the file's
content hash out, so a fix keeps the key: the file's path relative to its project root (the
nearest ancestor holding a project marker; without one the current directory when the file is
under it, else the absolute path), and its scenario, or ``cls``/``method``/``tasks``/``args``/
``init_args``, and the invariant when one is given.  The pytest plugin's marked test is a
scenario of its test file, so the plugin and ``chaossloth check FILE --scenario TEST`` share keys.

Stage 3 replays each saved schedule of the key first, newest first (:meth:`Database.replay_first`):
the first that fails again is the run's failure (the exploration is skipped); one that passes now
is dropped (fixed); one that no longer fits the program (unreadable, another format version,
another workload, a replay that diverges or an actor table that does not fit) is dropped with a
note, never an error.  After a failure found by exploring, the minimal failing schedule is saved
(:meth:`Database.save`); at most :data:`MAX_PER_PROGRAM` per key, the oldest (by modification
time, then name) deleted.  Deleting the directory forgets everything.

Writes: a temporary file in the key's directory, then a rename (atomic; a rename replaces a
symlink itself, never writes its target); a key directory that resolves outside the database
directory is refused.  Concurrent runs (pytest-xdist workers) write whole files under names that
are the schedule's hash, so two writers of one schedule write the same bytes; a file deleted by
another run meanwhile is skipped.  A database that cannot be read or written is a note (in
``notes`` and the output), never a lost verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaossloth import report as rp
from chaossloth import schedule
from chaossloth.capture.importer import PROJECT_MARKERS, project_root
from chaossloth.errors import InputError, NondeterminismError
from chaossloth.runner import ExecutionResult, divergence_text

#: the database's subdirectory holding the failing schedules (beside it: the verdict's files)
SUBDIR = "failures"
#: the most schedules kept per program; saving one more deletes the oldest
MAX_PER_PROGRAM = 10
#: the fields of a schedule's ``program`` section that name the workload (besides the path)
IDENTITY_FIELDS = ("scenario", "cls", "method", "tasks", "args", "init_args", "invariant")


def identity(program: dict[str, Any]) -> dict[str, Any]:
    """The workload fields of a ``program`` section (Program.describe plus the invariant),
    without the path and the content hash; absent and None are the same."""
    return {k: program[k] for k in IDENTITY_FIELDS if program.get(k) is not None}


def key_path(path: str | os.PathLike[str]) -> str:
    """The program file as the key names it: relative to its project root (a directory with a
    project marker), else to the current directory when the file is under it, else absolute;
    always with '/' separators."""
    p = Path(path).resolve()
    root = project_root(p)
    bases = [root] if any((root / m).exists() for m in PROJECT_MARKERS) else []
    bases.append(Path.cwd().resolve())
    for base in bases:
        with contextlib.suppress(ValueError):
            return p.relative_to(base).as_posix()
    return p.as_posix()


def program_key(path: str | os.PathLike[str], program: dict[str, Any]) -> dict[str, Any]:
    """The database key of a program: its key_path and identity (no content hash)."""
    return {"path": key_path(path), **identity(program)}


def key_dirname(key: dict[str, Any]) -> str:
    """``<stem>.<scenario or Class.method>-<16 hex digits of the key's hash>``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    what = key.get("scenario") or f"{key.get('cls')}.{key.get('method')}"
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{Path(key['path']).stem}.{what}")[:64]
    return f"{slug}-{digest}"


def schedule_filename(sched: schedule.ScheduleFile) -> str:
    """The file name of a schedule: a hash of what a replay follows (timers, actors, steps)."""
    body = {"timers": sched.timers, "actors": sched.actors, "steps": sched.schedule}
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()[:16] + ".json"


@dataclass
class Reproduced:
    """A saved schedule that failed again: its file, the schedule and the detailed execution."""

    path: str
    sched: schedule.ScheduleFile
    result: ExecutionResult


@dataclass
class Database:
    """The failure database of one program in one run, and what the run did with it."""

    directory: str
    key: dict[str, Any]
    replayed: int = 0
    reproduced: int = 0
    dropped: list[dict[str, str]] = field(default_factory=list)
    saved: str | None = None
    #: problems with the database itself (unreadable, unwritable): said, never fatal
    notes: list[str] = field(default_factory=list)

    #: the directory made absolute when the database was opened: every file operation goes
    #: through it, as report.write_output's do (never through the process's current directory)
    absolute: str = ""

    def __post_init__(self) -> None:
        self.absolute = self.absolute or os.path.abspath(self.directory)

    @property
    def folder(self) -> Path:
        """The key's directory (absolute)."""
        return Path(self.absolute) / SUBDIR / key_dirname(self.key)

    @property
    def shown_folder(self) -> Path:
        """The key's directory as the user named the database (a relative one stays so)."""
        return Path(self.directory) / SUBDIR / key_dirname(self.key)

    def shown(self, path: Path) -> str:
        """A file of the key's directory, named as in shown_folder."""
        return str(self.shown_folder / path.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "dir": self.directory,
            "replayed": self.replayed,
            "reproduced": self.reproduced,
            "dropped": [dict(d) for d in self.dropped],
            "saved": self.saved,
            "notes": list(self.notes),
        }

    # -------------------------------------------------------------- reading

    def _inside(self) -> bool:
        """The key's directory resolves inside the database directory (no symlink out)."""
        top = os.path.realpath(self.absolute)
        real = os.path.realpath(self.folder)
        if os.path.commonpath([top, real]) == top:
            return True
        self._note(f"{self.shown_folder} resolves outside {self.directory} (a symlink): not used")
        return False

    def schedules(self) -> list[Path]:
        """The key's schedule files, newest first (modification time, then name); a folder
        that cannot be listed is a note and no schedule."""
        folder = self.folder
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return []  # nothing saved (a file in the way is said when saving)
        except OSError as exc:
            self._note(f"cannot read {self.shown_folder} ({exc.strerror or exc})")
            return []
        if not self._inside():
            return []
        found: list[tuple[float, str]] = []
        for name in names:
            if name.startswith(".") or not name.endswith(".json"):
                continue  # temporary files of a writer
            try:
                st = os.lstat(folder / name)
            except FileNotFoundError:
                continue  # deleted by another run meanwhile
            found.append((st.st_mtime, name))
        found.sort(key=lambda t: (-t[0], t[1]))
        return [folder / name for _, name in found]

    def replay_first(
        self,
        factory: Callable[[], Any],
        *,
        oracle: Callable[[Any], Any] | None,
        max_steps: int,
    ) -> Reproduced | None:
        """Replays the saved schedules, newest first, until one fails again (returned, kept);
        drops those that pass now or no longer fit.  A watchdog time-out (InputError) is the
        program's problem and propagates, as it would from the exploration."""
        for path in self.schedules():
            try:
                sched = schedule.read(path)
            except InputError as exc:
                self._drop(path, f"unreadable: {_without_path(str(exc), path)}")
                continue
            want, got = identity(self.key), identity(sched.program)
            if want != got:
                self._drop(path, f"recorded for another workload ({_describe(got)})")
                continue
            self.replayed += 1
            try:
                r = schedule.replay(sched, factory, oracle=oracle, max_steps=max_steps)
            except NondeterminismError as exc:
                d = getattr(exc, "divergence", None) or {}
                why = divergence_text(d, len(sched.steps)) if d else str(exc)
                self._drop(path, f"no longer fits the program: the replay diverged: {why}")
                continue
            except ValueError as exc:  # runner._intern_table: the actor table does not fit
                self._drop(path, f"no longer fits the program: {exc}")
                continue
            if r.failed:
                self.reproduced += 1
                return Reproduced(self.shown(path), sched, r)
            self._drop(path, "passes now (fixed)")
        return None

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _drop(self, path: Path, reason: str) -> None:
        entry = {"file": self.shown(path), "reason": reason}
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass  # another run dropped it
        except OSError as exc:
            entry["reason"] += f"; cannot delete it ({exc.strerror or exc})"
        self.dropped.append(entry)

    # -------------------------------------------------------------- writing

    def save(self, sched: schedule.ScheduleFile) -> str | None:
        """Saves a failing schedule (atomically), then deletes the oldest beyond
        MAX_PER_PROGRAM; returns the file, or None with a note when it cannot be written."""
        folder = self.folder
        text = json.dumps(sched.to_json(), indent=1) + "\n"
        if not self._inside():  # before makedirs: it would create the folder out there
            return None
        try:
            os.makedirs(folder, exist_ok=True)
            target = folder / schedule_filename(sched)
            rp.replace_file(target, text, prefix=".")
        except OSError as exc:
            self._note(f"cannot save to {self.directory} ({exc.strerror or exc})")
            return None
        self.saved = self.shown(target)
        for old in self.schedules()[MAX_PER_PROGRAM:]:
            if old != target:
                with contextlib.suppress(OSError):
                    os.unlink(old)
        return self.saved


def open_for(
    directory: str | None, path: str | os.PathLike[str], program: dict[str, Any]
) -> Database | None:
    """The database of the program at `path` (its ``program`` section `program`), or None
    when `directory` is None or '' (off)."""
    if not directory:
        return None
    return Database(directory, program_key(path, program))


def _without_path(message: str, path: Path) -> str:
    """A reader's message without its leading ``<path>:`` (the entry names the file)."""
    for prefix in (f"{path}: ", f"{path}:"):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def _describe(ident: dict[str, Any]) -> str:
    if "scenario" in ident:
        return f"scenario {ident['scenario']}"
    return ", ".join(f"{k} {v}" for k, v in ident.items()) or "no workload"


__all__ = [
    "MAX_PER_PROGRAM",
    "SUBDIR",
    "Database",
    "Reproduced",
    "open_for",
    "program_key",
]
