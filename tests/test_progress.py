"""The progress line: its text, its terminal gating, drawing and clearing (no timing: a fake
clock drives the line), and its wiring into `chaossloth check`."""

from __future__ import annotations

import inspect
import io
from pathlib import Path

import pytest

from chaossloth import cli, pipeline, runner, scenario
from chaossloth.config import Config
from chaossloth.progress import (
    ClearingWriter,
    ProgressLine,
    format_budget,
    format_line,
    is_terminal,
)
from chaossloth.runner import Progress

ROOT = Path(__file__).resolve().parent.parent
SEED = str(ROOT / "examples" / "multi_resource.py")


class Term(io.StringIO):
    """A fake stream that says whether it is a terminal."""

    def __init__(self, tty: bool = True) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def prog(executions: int, failing: int = 0, elapsed: float = 0.0, **kw: object) -> Progress:
    args: dict[str, object] = {
        "strategy": "dpor",
        "executions": executions,
        "failing": failing,
        "distinct_traces": executions,
        "elapsed": elapsed,
        "max_executions": None,
        "time_limit": 10.0,
    }
    args.update(kw)
    return Progress(**args)  # type: ignore[arg-type]


# ------------------------------------------------------------------ text


def test_format_line_has_every_field() -> None:
    text = format_line("dpor", 12000, 3, 4.0, None, 10.0)
    assert text == "dpor: 12000 executions, 3000/s, 3 failing, 4.0s elapsed, budget 10s"


def test_format_line_zero_elapsed_has_no_division_error() -> None:
    assert "0/s" in format_line("pct", 5, 0, 0.0, None, None)


@pytest.mark.parametrize(
    ("max_exec", "limit", "want"),
    [
        (None, None, "no budget"),
        (500, None, "budget 500 executions"),
        (None, 2.5, "budget 2.5s"),
        (500, 10.0, "budget 500 executions or 10s"),
        (None, 90.0, "budget 1m30s"),
    ],
)
def test_format_budget(max_exec: int | None, limit: float | None, want: str) -> None:
    assert format_budget(max_exec, limit) == want


def test_long_elapsed_is_minutes() -> None:
    assert "2m05s elapsed" in format_line("dpor", 1, 0, 125.0, None, None)


# ------------------------------------------------------------------ gating


def test_is_terminal() -> None:
    assert is_terminal(Term(True))
    assert not is_terminal(Term(False))
    assert not is_terminal(object())
    assert not is_terminal(io.StringIO())
    closed = io.StringIO()
    closed.close()
    assert not is_terminal(closed)  # isatty() of a closed stream raises ValueError


def test_dumb_terminal_gets_no_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    assert not is_terminal(Term(True))


def test_not_a_terminal_draws_nothing() -> None:
    s, clock = Term(tty=False), Clock()
    line = ProgressLine(s, clock=clock, width=200)
    line(prog(1))
    clock.now += 5
    line(prog(100))
    line.close()
    assert s.getvalue() == ""


def test_nothing_before_the_delay_then_a_line() -> None:
    s, clock = Term(), Clock()
    line = ProgressLine(s, clock=clock, width=200)
    line(prog(10))
    clock.now += 0.5
    line(prog(20))
    assert s.getvalue() == "" and not line.visible
    clock.now += 1.5
    line(prog(4000, failing=2))
    out = s.getvalue()
    assert out.startswith("\r") and "\n" not in out
    assert "4000 executions, 2000/s, 2 failing, 2.0s elapsed, budget 10s" in out
    assert line.visible


def test_elapsed_counts_what_the_runner_had_already_spent() -> None:
    # the first report arrives 3 s into the exploration: the line shows at once
    s, clock = Term(), Clock()
    line = ProgressLine(s, clock=clock, width=200)
    line(prog(300, elapsed=3.0))
    assert "3.0s elapsed" in s.getvalue()


def test_redraw_overwrites_a_longer_line_with_spaces() -> None:
    s, clock = Term(), Clock()
    line = ProgressLine(s, clock=clock, width=200, delay=0.0)
    clock.now += 1
    line(prog(123456, failing=10000))
    first = s.getvalue()
    clock.now += 1
    line(prog(1234567, failing=1, strategy="pct"))
    second = s.getvalue()[len(first) :]
    assert second.startswith("\rpct: 1234567 executions")
    assert len(second) >= len(first)  # the tail of the longer old line is blanked


def test_throttled_between_draws() -> None:
    s, clock = Term(), Clock()
    line = ProgressLine(s, clock=clock, width=200, delay=0.0, min_interval=0.1)
    clock.now += 1
    line(prog(1))
    drawn = s.getvalue()
    clock.now += 0.01
    line(prog(2))
    assert s.getvalue() == drawn


def test_cut_to_the_terminal_width() -> None:
    s, clock = Term(), Clock()
    line = ProgressLine(s, clock=clock, width=30, delay=0.0)
    clock.now += 1
    line(prog(1))
    assert len(s.getvalue()) == 1 + 29  # "\r" + width - 1: never wraps


def test_clear_and_close() -> None:
    s, clock = Term(), Clock()
    line = ProgressLine(s, clock=clock, width=200, delay=0.0)
    clock.now += 1
    line(prog(50))
    n = len(s.getvalue()) - 1
    line.close()
    assert s.getvalue().endswith("\r" + " " * n + "\r")
    assert not line.visible
    end = s.getvalue()
    clock.now += 1
    line(prog(60))  # after close: nothing more
    line.clear()  # nothing shown: no output
    assert s.getvalue() == end


def test_budget_override() -> None:
    s, clock = Term(), Clock()
    line = ProgressLine(s, clock=clock, width=200, delay=0.0, budget=(1000, 20.0))
    clock.now += 1
    line(prog(5, max_executions=500, time_limit=10.0))
    assert "budget 1000 executions or 20s" in s.getvalue()


def test_clearing_writer_clears_before_output() -> None:
    err, out, clock = Term(), io.StringIO(), Clock()
    line = ProgressLine(err, clock=clock, width=200, delay=0.0)
    clock.now += 1
    line(prog(5))
    w = ClearingWriter(out, line)
    w.write("[3/8] collapse ... 1.00s\n")
    w.flush()
    assert not line.visible and err.getvalue().endswith("\r")
    assert out.getvalue() == "[3/8] collapse ... 1.00s\n"


# ------------------------------------------------------------------ with the runner


def test_driven_by_a_real_exploration() -> None:
    program = scenario.load(SEED, Config(scenario="two_requests"))
    s = Term()
    ticks = iter(range(10_000))
    line = ProgressLine(s, clock=lambda: float(next(ticks)), width=200, delay=0.0, min_interval=0)
    res = runner.explore(program.factory, strategy="dpor", stop_on_failure=False, progress=line)
    # the runner reports at the end at least; the last drawn numbers are the final ones
    assert line.visible
    assert f"dpor: {res.executions} executions" in s.getvalue().rsplit("\r", 1)[-1]
    line.close()
    assert not line.visible


# ------------------------------------------------------------------ the CLI


def _ns(quiet: bool = False) -> Config:
    return Config(quiet=quiet)


def test_cli_no_line_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", Term(tty=False))
    assert cli._progress_line(_ns()) is None


def test_cli_no_line_with_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", Term(tty=True))
    monkeypatch.delenv("TERM", raising=False)
    assert cli._progress_line(_ns(quiet=True)) is None


def test_cli_line_on_a_terminal_when_the_pipeline_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stderr", Term(tty=True))
    monkeypatch.delenv("TERM", raising=False)
    takes = "progress" in inspect.signature(pipeline.run).parameters
    line = cli._progress_line(_ns())
    assert (line is not None) == takes
    if line is not None:
        assert isinstance(line, ProgressLine) and line.enabled
