"""When strict virtual time finds no failing schedule but the stock loop, with real-time jitter,
does fail, the pipeline explores again with relaxed timers (a race that needs a timer to fire out
of deadline order).  The stock-loop telemetry is faked here so the test does not depend on real
time; the CLI end to end is in test_examples (flaky_inventory with --timers relaxed)."""

from __future__ import annotations

import asyncio
import io
import runpy
from typing import Any

import pytest
from conftest import EXAMPLES

from chaossloth import jitter, pipeline, scenario
from chaossloth.config import Config

FLAKY = str(EXAMPLES / "flaky_inventory.py")


def test_the_flaky_example_passes_in_stock_asyncio_order() -> None:
    ns = runpy.run_path(FLAKY, run_name="flaky")
    asyncio.run(ns["last_item"]())  # no exception: the default order never shows the race


def _fake_telemetry(failures: int) -> Any:
    def measure(*args: Any, **kw: Any) -> jitter.Telemetry:
        t = jitter.Telemetry(runs=200, failures=failures)
        t.rate = {"estimate": failures / 200, "low": 0.0, "high": 1.0}
        t.sentence = "(faked telemetry)"
        return t

    return measure


@pytest.mark.parametrize(
    "failures,verdict,timers", [(13, "fail", "relaxed"), (0, "pass", "strict")]
)
def test_stock_loop_failures_trigger_relaxed_exploration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, failures: int, verdict: str, timers: str
) -> None:
    monkeypatch.setattr(jitter, "measure", _fake_telemetry(failures))
    monkeypatch.chdir(tmp_path)
    program = scenario.load(FLAKY, Config(scenario="last_item"))
    out = io.StringIO()
    res = pipeline.run(program, Config(max_executions=200), out)
    assert res.verdict == verdict, out.getvalue()
    assert res.to_json()["timers"] == timers
    reran = {s["name"]: s.get("reran") for s in res.to_json()["stages"]}
    assert reran["collision window"] == ("collapse" if verdict == "fail" else None)
    if verdict == "fail":
        assert res.hazard == "check-then-act"
        assert "exploring again with relaxed timers" in out.getvalue()
        assert "re-running stage 3 (collapse)" in out.getvalue()
