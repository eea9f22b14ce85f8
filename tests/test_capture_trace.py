"""`chaossloth trace` end to end on the seed example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chaossloth import trace_cmd

SEED = Path(__file__).parent / "targets" / "test_multi_resource.py"


def _line(text: str) -> int:
    for n, line in enumerate(SEED.read_text().splitlines(), 1):
        if text in line:
            return n
    raise AssertionError(text)


def _steps(out: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in out.splitlines():
        if line.startswith("step "):
            steps.append((line, []))
        elif line.startswith("    ") and steps:
            steps[-1][1].append(line.strip())
    return steps


def test_trace_shows_reads_before_and_writes_after_the_await(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = trace_cmd.main([str(SEED), "--scenario", "scenario"])
    out = capsys.readouterr().out
    assert rc == 1  # the lost update fails the assertion in stock order
    assert "AssertionError" in out
    get_sess, get_cnt = _line("self.sessions.get"), _line("self.counters.get")
    sleep = _line("await asyncio.sleep")
    set_sess, set_cnt = _line("self.sessions[client_id] ="), _line("self.counters[client_id] =")
    f = "tests/targets/test_multi_resource.py"
    steps = _steps(out)
    handlers = [s for s in steps if "handle_request" in s[0]]
    tasks = {re.match(r"step\s+\d+\s+(Task \S+)", h).group(1) for h, _ in handlers}  # type: ignore[union-attr]
    assert len(tasks) == 2
    for task in tasks:
        mine = [body for head, body in handlers if f"{task} " in head]
        assert len(mine) == 2, mine  # one step up to the await, one after it
        first, second = mine
        assert f"read  self.sessions['audit']  {f}:{get_sess}" in first
        assert f"read  self.counters['audit']  {f}:{get_cnt}" in first
        assert f"await  {f}:{sleep}" in first
        assert f"write self.sessions['audit']  {f}:{set_sess}" in second
        assert f"write self.counters['audit']  {f}:{set_cnt}" in second
        assert not any(x.startswith("write") for x in first)
    # both tasks read before either writes
    order = [i for i, (h, body) in enumerate(steps) if "handle_request" in h]
    reads = [i for i in order if any("read  self.sessions['audit']" in b for b in steps[i][1])]
    writes = [i for i in order if any("write self.sessions['audit']" in b for b in steps[i][1])]
    assert max(reads) < min(writes)
    # happens-before edges are printed
    assert re.search(r"after \d+", out)


def test_trace_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    rc = trace_cmd.main([str(SEED), "--scenario", "scenario", "--mermaid"])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("sequenceDiagram\n")
    assert "participant R" in out and "self.counters['audit']" in out
    assert re.search(r"T\d->>R\d+: write at tests/targets/test_multi_resource.py", out)
    assert re.search(r"R\d+-->>T\d: read at", out)


def test_trace_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("async def scenario(:\n    pass\n")
    assert trace_cmd.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert "syntax error" in err and "Traceback" not in err
    assert trace_cmd.main([str(SEED), "--scenario", "nope"]) == 2
    assert trace_cmd.main([str(tmp_path / "missing.py")]) == 2


def test_predecessors_from_clocks_match_the_engine() -> None:
    from chaossloth import _core

    ex = _core.Explorer("fifo")
    assert ex.begin()
    root = ex.intern(None, 0)
    a, b = ex.intern(root, 0), ex.intern(root, 1)
    plan = [
        (root, -1, [(1, 5, _core.WRITE)]),
        (a, 0, [(1, 5, _core.READ)]),
        (b, 0, [(2, 5, _core.WRITE)]),
        (a, 1, [(2, 5, _core.READ), (1, 6, _core.WRITE)]),
        (b, 2, [(1, 6, _core.READ)]),
        (root, -1, [(3, 1, _core.READ)]),
    ]
    for actor, by, accesses in plan:
        ex.step_begin(actor, by)
        for obj, key, kind in accesses:
            ex.access(obj, key, kind, 0)
        ex.step_end()
    trace = ex.trace()
    for i in range(len(trace)):
        assert trace_cmd._predecessors(trace, i) == sorted(ex.predecessors(i)), i
    ex.end(0)
