"""The labelled hazard corpus (tests/hazard_corpus/): `chaossloth check` must name each program's
hazard and point its top finding at the lines a careful engineer would name.

Each program is a file `<name>.py`, or a directory `<name>/` whose `main.py` imports helper
modules beside it (they are project code, so they are instrumented). The main file starts with

    # expect: <hazard> scenario=<scenario function>

and every line the top finding must cite ends with the comment `# race` (in whichever file of
the program it is). The rule for which lines those are, per hazard, is in tests/hazard_corpus/
README.md. The CLI runs in a subprocess with cwd = the program's directory, as a user runs it.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import cli

CORPUS = Path(__file__).resolve().parent / "hazard_corpus"
HAZARDS = (
    "lost-update",
    "check-then-act",
    "dirty-read",
    "order-violation",
    "cancellation",
    "deadlock",
    "lost-wakeup",
)
_EXPECT = re.compile(r"^# expect: (?P<hazard>[a-z-]+) scenario=(?P<scenario>\w+)\s*$")
_RACE = re.compile(r"#\s*race\s*$")
#: programs run at once (the machine is shared; each run is one short subprocess)
_WORKERS = 3

Line = tuple[str, int]  # (file basename, line number)


@dataclass(frozen=True)
class Program:
    name: str
    main: Path  # the file passed to `chaossloth check`
    hazard: str
    scenario: str
    lines: frozenset[Line]  # the `# race` marks of every file of the program


def _program(path: Path) -> Program:
    main = path / "main.py" if path.is_dir() else path
    header = main.read_text().splitlines()[0]
    m = _EXPECT.match(header)
    assert m, f"{main}: first line must be '# expect: <hazard> scenario=<name>', got {header!r}"
    files = sorted(path.glob("*.py")) if path.is_dir() else [path]
    marks = frozenset(
        (f.name, n)
        for f in files
        for n, text in enumerate(f.read_text().splitlines(), 1)
        if _RACE.search(text)
    )
    return Program(path.stem, main, m["hazard"], m["scenario"], marks)


def discover() -> list[Program]:
    entries = [
        p
        for p in sorted(CORPUS.iterdir())
        if (p.is_dir() and (p / "main.py").exists()) or (p.suffix == ".py" and p.is_file())
    ]
    return [_program(p) for p in entries]


PROGRAMS = discover()


@dataclass(frozen=True)
class Outcome:
    returncode: int
    report: dict[str, Any] | None
    output: str  # stdout + stderr, for the failure message


def _run(prog: Program) -> Outcome:
    """`chaossloth check` on the program as a user runs it (cwd = its directory); stage 4 (the
    stock loop's rate) is skipped: it is slow and says nothing about the hazard's name."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        r = cli(
            "check",
            prog.main.name,
            "--scenario",
            prog.scenario,
            "--json",
            str(out),
            "--schedule-out",
            str(Path(tmp) / "schedule.json"),
            "--no-telemetry",
            "--quiet",
            cwd=prog.main.parent,
        )
        report = json.loads(out.read_text()) if out.exists() else None
    return Outcome(r.returncode, report, r.stdout + r.stderr)


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> dict[str, Outcome]:
    """The run of every program selected in this session, done once, a few at a time."""
    selected = {
        item.callspec.params["prog"].name
        for item in request.session.items
        if item.originalname == "test_hazard_and_lines" and hasattr(item, "callspec")
    }
    progs = [p for p in PROGRAMS if p.name in selected]
    with ThreadPoolExecutor(_WORKERS) as pool:
        return dict(zip([p.name for p in progs], pool.map(_run, progs), strict=True))


def cited_lines(finding: dict[str, Any]) -> set[Line]:
    """The (file basename, line) pairs the finding cites: its `lines` (report.Finding.lines)."""
    return {(Path(site["file"]).name, int(site["line"])) for site in finding["lines"]}


def _fmt(lines: set[Line] | frozenset[Line]) -> str:
    return ", ".join(f"{f}:{n}" for f, n in sorted(lines)) or "(none)"


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_hazard_and_lines(prog: Program, outcomes: dict[str, Outcome]) -> None:
    got = outcomes[prog.name]
    assert got.returncode == 1, f"{prog.name}: exit {got.returncode}, expected 1\n{got.output}"
    assert got.report is not None, f"{prog.name}: no JSON report\n{got.output}"
    findings = got.report["findings"]
    top = findings[0] if findings else {}
    actual = cited_lines(top) if top else set()
    detail = (
        f"{prog.name}:\n"
        f"  hazard: expected {prog.hazard}, got {got.report['hazard']}\n"
        f"  lines:  expected {_fmt(prog.lines)}\n"
        f"          got      {_fmt(actual)}\n"
        f"  top finding: {top.get('text', '(no finding)')}"
    )
    assert got.report["hazard"] == prog.hazard, detail
    assert actual == prog.lines, detail


def test_corpus_covers_every_hazard() -> None:
    per_class = Counter(p.hazard for p in PROGRAMS)
    assert len(PROGRAMS) >= 40, len(PROGRAMS)
    assert set(per_class) <= set(HAZARDS), per_class
    assert all(per_class[h] >= 4 for h in HAZARDS), per_class
    # every program marks at least one line; a helper module's marks count as the program's
    assert all(p.lines for p in PROGRAMS), [p.name for p in PROGRAMS if not p.lines]
    multi = [p for p in PROGRAMS if p.main.name == "main.py"]
    assert sum(any(f != "main.py" for f, _ in p.lines) for p in multi) >= 8


def test_a_cause_says_which_two_orders_differ(tmp_path: Path) -> None:
    """The reversal test on a lost update: the swap that passes is reported (causal, with both
    orders in words, source lines without their comments, paths relative to the cwd)."""
    prog = CORPUS / "lu_hit_counter.py"
    out = tmp_path / "report.json"
    r = cli(
        "check",
        str(prog),
        "--scenario",
        "two_requests",
        "--json",
        str(out),
        "--schedule-out",
        str(tmp_path / "s.json"),
        "--no-telemetry",
        cwd=CORPUS,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    rep = json.loads(out.read_text())
    assert rep["reversals"]["passing"] >= 1
    assert rep["reversals"]["tried"] == rep["reversals"]["races"] >= 1
    assert rep["reversals"]["stopped"] is None
    top = rep["findings"][0]
    assert top["causal"] is True and top["pattern"] == "R-W-W"
    assert "In the passing order" in top["text"] and "in the failing order, after it" in top["text"]
    assert "# race" not in r.stdout
    assert "lu_hit_counter.py:15 `current = self.hits`" in r.stdout
    assert str(CORPUS) not in r.stdout
