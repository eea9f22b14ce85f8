"""Generated racy classes through ``chaossloth fix``: every synthesized patch compiles, is
verified by a complete exploration (so it never deadlocks: a deadlock is a failure the
exploration would find), and each interval is a run of statements of one block of the original
whose first and last statements touch what it protects (nothing outside the diagnosed block,
nothing needless at its edges).

A program: a class with 1-3 counters and 2-3 async methods built from read-await-write
segments (plain, inside an ``if``, with an early return, in ``try/finally``, in a loop with
awaits, and self-calls to later methods), plus independent awaits; the scenario gathers every
method once and the first twice, and asserts each counter's total (increments commute, so every
serial order gives it).
"""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path

import pytest

from chaossloth import cli

pytestmark = pytest.mark.slow


def _segment(rng: random.Random, attrs: list[str], depth: int, counts: dict[str, int]) -> list[str]:
    a = rng.choice(attrs)
    kind = rng.choice(["rmw", "if", "early", "try", "loop"] if depth == 0 else ["rmw"])
    rmw = [f"v = self.{a}", "await asyncio.sleep(0)", f"self.{a} = v + 1"]
    if kind == "rmw":
        counts[a] += 1
        return rmw
    if kind == "if":
        counts[a] += 1
        return [f"if self.{a} >= 0:", *("    " + s for s in rmw)]
    if kind == "early":
        counts[a] += 1
        return [
            f"v = self.{a}",
            "await asyncio.sleep(0)",
            "if v < 0:",
            "    return -1",
            f"self.{a} = v + 1",
        ]
    if kind == "try":
        counts[a] += 1
        return ["try:", *("    " + s for s in rmw), "finally:", "    pass"]
    counts[a] += 2
    return ["for _ in range(2):", *("    " + s for s in rmw)]


def _program(seed: int) -> str:
    rng = random.Random(seed)
    attrs = [f"c{i}" for i in range(rng.randint(1, 3))]
    n_methods = rng.randint(2, 3)
    bodies: list[list[str]] = []
    per_method: list[dict[str, int]] = []
    for m in range(n_methods):
        counts = dict.fromkeys(attrs, 0)
        body: list[str] = []
        if rng.random() < 0.5:
            body.append("await asyncio.sleep(0)  # independent work")
        body += _segment(rng, attrs, 0, counts)
        calls: list[int] = []
        if m + 1 < n_methods and rng.random() < 0.5:
            j = rng.randint(m + 1, n_methods - 1)
            calls.append(j)
            body.append(f"await self.m{j}()")
        if rng.random() < 0.5:
            body += _segment(rng, attrs, 0, counts)
        body.append("return 0")
        bodies.append(body)
        per_method.append(counts)
        per_method[-1]["__calls__"] = calls  # type: ignore[assignment]
    # totals: each method's own counts plus those of what it calls (later methods only)
    totals_of: dict[int, dict[str, int]] = {}
    for m in reversed(range(n_methods)):
        t = {a: per_method[m][a] for a in attrs}
        for j in per_method[m]["__calls__"]:  # type: ignore[union-attr]
            for a in attrs:
                t[a] += totals_of[j][a]
        totals_of[m] = t
    expected = {a: sum(totals_of[m][a] for m in range(n_methods)) + totals_of[0][a] for a in attrs}
    lines = ["import asyncio", "", "", "class Racy:", "    def __init__(self):"]
    lines += [f"        self.{a} = 0" for a in attrs]
    for m, body in enumerate(bodies):
        lines += ["", f"    async def m{m}(self):"] + ["        " + s for s in body]
    calls_text = ", ".join(["obj.m0()"] + [f"obj.m{m}()" for m in range(n_methods)])
    lines += [
        "",
        "",
        "async def scenario():",
        "    obj = Racy()",
        f"    await asyncio.gather({calls_text})",
    ]
    lines += [f"    assert obj.{a} == {expected[a]}, obj.{a}" for a in attrs]
    return "\n".join(lines) + "\n"


def _block_runs(tree: ast.Module) -> dict[tuple[int, int], tuple[ast.stmt, ast.stmt]]:
    """Every run of consecutive statements of one block: (first line, last line) -> (its first
    statement, its last statement)."""
    runs: dict[tuple[int, int], tuple[ast.stmt, ast.stmt]] = {}
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                for i in range(len(block)):
                    for j in range(i, len(block)):
                        end = block[j].end_lineno or block[j].lineno
                        runs[(block[i].lineno, end)] = (block[i], block[j])
    return runs


@pytest.mark.parametrize("seed", range(12))
def test_generated_racy_class_gets_a_verified_minimal_patch(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _program(seed)
    path = tmp_path / f"racy_{seed}.py"
    path.write_text(source)
    monkeypatch.chdir(tmp_path)
    code = cli.main(
        [
            "fix",
            str(path),
            "--scenario",
            "scenario",
            "--json",
            "fix.json",
            "-q",
            "--max-executions",
            "1000000",
        ]
    )
    out = capsys.readouterr()
    rep = json.loads((tmp_path / "fix.json").read_text())
    assert code == 0, f"{source}\n{out.out}{out.err}\n{rep.get('explanation')}"
    assert rep["verified"] and rep["complete"], (rep["attempts"], source)
    assert rep["report"]["verdict"] == "fail"  # the original races
    runs = _block_runs(ast.parse(source))
    protected = {r.split(".", 1)[1] for r in rep["hazards"] if r.startswith("self.")}
    assert protected, rep["hazards"]
    touches = tuple(f"self.{a}" for a in protected) + ("self.m",)
    for iv in rep["intervals"]:
        run = runs.get(tuple(iv["lines"]))  # type: ignore[arg-type]
        assert run is not None, (seed, iv, source)
        for edge in run:  # nothing needless at either edge
            assert any(t in ast.unparse(edge) for t in touches), (seed, iv, source)
