"""SARIF 2.1.0 (``--sarif PATH``): valid against the official OASIS schema (shipped in
tests/data), one result per finding with its source lines, the failing schedule as a code flow."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import EXAMPLES, cli

from chaossloth import report as rp
from chaossloth import sarif

SCHEMA_FILE = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"


def _validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    # the OASIS 2.1.0 standard (errata 01), a draft-04 schema
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def _check(tmp_path: Path, example: str, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Runs chaossloth check on a copy of the example in tmp_path (the root of the URIs);
    returns (the SARIF log, the JSON report)."""
    shutil.copy(EXAMPLES / example, tmp_path / example)
    r = cli(
        "check", example, "--no-telemetry", "--sarif", "out.sarif", "--json", "out.json",
        *extra, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    return (
        json.loads((tmp_path / "out.sarif").read_text(encoding="utf-8")),
        json.loads((tmp_path / "out.json").read_text(encoding="utf-8")),
    )


def test_a_failing_check_is_valid_sarif_with_its_lines_and_schedule(tmp_path: Path) -> None:
    log, report = _check(tmp_path, "bank_transfer.py")
    _validator().validate(log)
    assert report["verdict"] == "fail" and report["findings"]
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(rp.HAZARDS)
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == tmp_path.resolve().as_uri() + "/"
    results = run["results"]
    assert [r["ruleId"] for r in results] == [f["hazard"] for f in report["findings"]]
    first, finding = results[0], report["findings"][0]
    assert first["ruleId"] == "check-then-act" and first["level"] == "error"
    assert first["message"]["text"] == finding["text"]
    assert run["tool"]["driver"]["rules"][first["ruleIndex"]]["id"] == first["ruleId"]
    # the finding's lines: the first is the primary location, all are related locations
    related = [
        (
            loc["message"]["text"],
            loc["physicalLocation"]["artifactLocation"]["uri"],
            loc["physicalLocation"]["region"]["startLine"],
            loc["physicalLocation"]["region"]["snippet"]["text"],
        )
        for loc in first["relatedLocations"]
    ]
    assert related == [
        (s["role"], "bank_transfer.py", s["line"], s["text"]) for s in finding["lines"]
    ]
    primary = first["locations"][0]["physicalLocation"]
    assert primary["artifactLocation"] == {"uri": "bank_transfer.py", "uriBaseId": "SRCROOT"}
    assert primary["region"]["startLine"] == finding["lines"][0]["line"]
    # the code flow: one thread flow per task that touched a line, in the schedule's order
    flows = first["codeFlows"][0]["threadFlows"]
    timeline = report["timeline"]
    touched = [s["task"] for s in timeline if s["accesses"] or s["await"]]
    assert [f["id"] for f in flows] == list(dict.fromkeys(touched))
    locs = [loc for f in flows for loc in f["locations"]]
    expected = sum(len(s["accesses"]) + bool(s["await"]) for s in timeline)
    assert sorted(loc["executionOrder"] for loc in locs) == list(range(1, expected + 1))
    essential = sum(a["highlight"] for s in timeline for a in s["accesses"])
    assert essential > 0
    assert sum(loc["importance"] == "essential" for loc in locs) == essential


def test_a_passing_check_is_valid_sarif_without_results(tmp_path: Path) -> None:
    log, report = _check(tmp_path, "correct_counter.py", "--scenario", "two_increments")
    assert report["verdict"] == "pass"
    _validator().validate(log)
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["properties"]["verdict"] == "pass"


def test_the_schema_check_rejects_a_broken_log() -> None:
    report = {
        "verdict": "fail",
        "hazard": "lost-update",
        "program": {"path": "/elsewhere/prog.py"},
        "findings": [{"hazard": "lost-update", "text": "lost", "lines": []}],
    }
    log = sarif.to_sarif(report, root="/somewhere")
    _validator().validate(log)
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        _validator().validate(log)


def test_a_finding_without_lines_is_placed_at_the_program_and_outside_the_root() -> None:
    report = {
        "verdict": "fail",
        "hazard": "exception",
        "failure": {"type": "ValueError", "message": "bad <value>", "task": "Task main"},
        "program": {"path": "/elsewhere/prog dir/prog.py"},
        "findings": [],
        "timeline": None,
    }
    log = sarif.to_sarif(report, root="/somewhere")
    _validator().validate(log)
    [res] = log["runs"][0]["results"]
    assert res["ruleId"] == "exception" and res["message"]["text"] == "ValueError: bad <value>"
    loc = res["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "file:///elsewhere/prog%20dir/prog.py"}
    assert "codeFlows" not in res


def test_sarif_is_written_by_the_output_rules(tmp_path: Path) -> None:
    """--sarif and --html follow --json's path rules: the program's own file is refused."""
    prog = tmp_path / "bank_transfer.py"
    shutil.copy(EXAMPLES / "bank_transfer.py", prog)
    before = prog.read_bytes()
    for flag in ("--sarif", "--html"):
        r = cli("check", "bank_transfer.py", flag, "bank_transfer.py", cwd=tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "refusing to write over" in r.stderr
        assert prog.read_bytes() == before


def test_sarif_dash_is_standard_output(tmp_path: Path) -> None:
    """As --json -: the log goes to stdout, no file named "-" is written."""
    shutil.copy(EXAMPLES / "correct_counter.py", tmp_path / "correct_counter.py")
    r = cli(
        "check", "correct_counter.py", "--scenario", "two_increments", "--no-telemetry",
        "--sarif", "-", "-q", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    log_text, _, verdict = r.stdout.rstrip("\n").rpartition("\n")
    assert verdict.startswith("PASS"), r.stdout
    _validator().validate(json.loads(log_text))
    assert not (tmp_path / "-").exists()
