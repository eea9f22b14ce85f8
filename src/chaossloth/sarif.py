"""The JSON report (``Result.to_json()``) as SARIF 2.1.0, the format code-scanning services read
(``chaossloth check --sarif PATH``; GitHub's ``github/codeql-action/upload-sarif``).

One run; its tool is chaossloth with one rule per hazard class (:data:`report.HAZARDS`, in that
order, so a rule's index never depends on the findings).  Each finding is one result of level
``error``: its rule is its hazard, its message the finding's text, its locations the lines the
finding names (the first is the primary location, every line is also a related location with its
role), and its code flow the failing schedule (one thread flow per task, one location per
access the step made, in execution order).  A failing run without findings (the failure seen on
the stock loop only, or an exception no access pattern explains) is one result of its hazard
whose message is the failure.  A passing run has no results.

Paths: a file under the root (the current directory, where CI runs from the repository's root)
is a relative URI with ``uriBaseId`` ``SRCROOT`` (``run.originalUriBaseIds`` gives the root's
absolute URI); a file elsewhere is an absolute ``file://`` URI.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from chaossloth import __version__
from chaossloth import report as rp

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
ROOT_ID = "SRCROOT"

#: what each rule means, shown by code-scanning services beside an alert
RULE_HELP = {
    "lost-update": "A task read shared state, awaited, and wrote a value computed from its stale "
    "read after another task had written it: the other task's update is lost.",
    "check-then-act": "A task checked shared state, awaited, and acted on its check after another "
    "task had changed the state (double initialisation, cache stampede, overselling).",
    "dirty-read": "A task wrote an intermediate value to shared state and awaited; another task "
    "read it before the first task finished its update.",
    "order-violation": "A task wrote shared state, another task overwrote it, and the first task "
    "read back a value it did not write (or two steps ran in the order the code did not expect).",
    "deadlock": "Tasks wait for each other (a wait-for cycle) and none can proceed.",
    "lost-wakeup": "A task waits for a signal that was sent before it started waiting.",
    "cancellation": "The failure needs a cancellation or a timeout inside a critical window.",
    "livelock": "The execution never ends within the step budget, though the default order does.",
    "exception": "A task raised in some schedules and no access pattern explains it.",
}


def _rule_name(hazard: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[-_ ]", hazard) if part)


def _rules() -> list[dict[str, Any]]:
    return [
        {
            "id": h,
            "name": _rule_name(h),
            "shortDescription": {"text": rp.HAZARD_TITLE[h]},
            "fullDescription": {"text": RULE_HELP[h]},
            "help": {"text": RULE_HELP[h]},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["concurrency", "asyncio"], "precision": "high"},
        }
        for h in rp.HAZARDS
    ]


class _Paths:
    """Artifact locations relative to `root` (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = Path(os.path.realpath(root))

    def root_uri(self) -> str:
        return self.root.as_uri().rstrip("/") + "/"

    def artifact(self, file: str) -> dict[str, Any]:
        path = Path(os.path.realpath(file))
        try:
            rel = path.relative_to(self.root)
        except ValueError:  # outside the root: an absolute URI, no base
            return {"uri": path.as_uri()}
        return {"uri": quote(rel.as_posix()), "uriBaseId": ROOT_ID}

    def physical(self, site: dict[str, Any]) -> dict[str, Any]:
        """A physicalLocation of a report site {"file", "line", "text"}: a region only when
        the line is known (SARIF lines start at 1)."""
        loc: dict[str, Any] = {"artifactLocation": self.artifact(str(site["file"]))}
        line = site.get("line")
        if isinstance(line, int) and not isinstance(line, bool) and line >= 1:
            region: dict[str, Any] = {"startLine": line}
            if site.get("text"):
                region["snippet"] = {"text": str(site["text"])}
            loc["region"] = region
        return loc


def _sites(finding: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The finding's lines with their roles; when it names none, the sites of its access
    pattern (an empty list when it has neither)."""
    lines = [(str(s.get("role", "")), s) for s in finding.get("lines") or [] if s.get("file")]
    if lines:
        return lines
    keys = (
        ("first", "local_access"),
        ("await", "await"),
        ("other", "remote_access"),
        ("second", "second_local_access"),
    )
    return [(role, finding[k]) for role, k in keys if finding.get(k) and finding[k].get("file")]


def _location(paths: _Paths, site: dict[str, Any], message: str = "") -> dict[str, Any]:
    loc: dict[str, Any] = {"physicalLocation": paths.physical(site)}
    if message:
        loc["message"] = {"text": message}
    return loc


def _code_flow(paths: _Paths, timeline: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The failing schedule as one codeFlow: a thread flow per task (in order of first step),
    each access of each step one location; executionOrder numbers every location of every
    thread flow in the schedule's order.  A step's await is a location after its accesses.
    None when no step touched a located line."""
    if not timeline:
        return None
    flows: dict[str, list[dict[str, Any]]] = {}
    order = 0
    for step in timeline:
        task = str(step.get("task", ""))
        located: list[tuple[dict[str, Any], str, bool]] = []
        for acc in step.get("accesses") or []:
            if acc.get("file"):
                label = f"step {step.get('step')}: {acc.get('kind')} {acc.get('resource')}"
                located.append((acc, label, bool(acc.get("highlight"))))
        aw = step.get("await")
        if aw and aw.get("file"):
            located.append(
                (aw, f"step {step.get('step')}: suspends at {aw.get('text', '')}", False)
            )
        for site, label, important in located:
            order += 1
            flows.setdefault(task, []).append(
                {
                    "location": _location(paths, site, label),
                    "executionOrder": order,
                    "importance": "essential" if important else "unimportant",
                }
            )
    if not flows:
        return None
    return {
        "message": {"text": "the minimal failing schedule"},
        "threadFlows": [
            {"id": task, "message": {"text": task}, "locations": locs}
            for task, locs in flows.items()
        ],
    }


def _result(
    paths: _Paths,
    hazard: str,
    message: str,
    sites: list[tuple[str, dict[str, Any]]],
    fallback_file: str | None,
    flow: dict[str, Any] | None,
    properties: dict[str, Any],
) -> dict[str, Any]:
    res: dict[str, Any] = {
        "ruleId": hazard,
        "ruleIndex": rp.HAZARDS.index(hazard),
        "level": "error",
        "message": {"text": message or rp.HAZARD_TITLE[hazard]},
    }
    if sites:
        res["locations"] = [_location(paths, sites[0][1])]
        res["relatedLocations"] = [
            dict(_location(paths, site, role), id=i) for i, (role, site) in enumerate(sites)
        ]
    elif fallback_file:  # code scanning needs a location: the program's file
        res["locations"] = [{"physicalLocation": paths.physical({"file": fallback_file})}]
    if flow is not None:
        res["codeFlows"] = [flow]
    res["properties"] = properties
    return res


def to_sarif(report: dict[str, Any], *, root: str | None = None) -> dict[str, Any]:
    """The SARIF 2.1.0 log of a JSON report (``Result.to_json()``); `root`: the directory URIs
    are relative to (default: the current directory)."""
    paths = _Paths(root if root is not None else os.getcwd())
    program = report.get("program") or {}
    program_file = program.get("path")
    flow = _code_flow(paths, report.get("timeline"))
    results: list[dict[str, Any]] = []
    if report.get("verdict") == "fail":
        for f in report.get("findings") or []:
            hazard = f.get("hazard") if f.get("hazard") in rp.HAZARDS else "exception"
            props = {
                k: f[k] for k in ("pattern", "task", "other_task", "resource", "causal") if k in f
            }
            results.append(
                _result(paths, hazard, str(f.get("text", "")), _sites(f), program_file, flow, props)
            )
        if not results:
            failure = report.get("failure") or {}
            hazard = report.get("hazard") if report.get("hazard") in rp.HAZARDS else "exception"
            text = ": ".join(x for x in (failure.get("type"), failure.get("message")) if x)
            results.append(
                _result(paths, hazard, text, [], program_file, flow, {"task": failure.get("task")})
            )
    run_props: dict[str, Any] = {
        k: report.get(k)
        for k in ("verdict", "hazard", "executions", "complete", "strategy", "schedule_file")
    }
    if report.get("schedule_file"):
        run_props["replay"] = f"chaossloth replay {report['schedule_file']}"
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "chaossloth",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": _rules(),
                    }
                },
                "originalUriBaseIds": {ROOT_ID: {"uri": paths.root_uri()}},
                "invocations": [{"executionSuccessful": True}],
                "results": results,
                "properties": run_props,
            }
        ],
    }


def write_sarif(report: dict[str, Any], path: str) -> str:
    """Writes the SARIF log of `report` to `path` (report.write_output's rules: atomic, a
    symlink followed, the program's own files refused; "-": stdout); returns the file written."""
    text = json.dumps(to_sarif(report), indent=2, default=str) + "\n"
    return rp.write_report_file(path, text)
