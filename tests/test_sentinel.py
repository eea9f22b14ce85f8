"""The sentinel and the stock loop's evidence: what ``complete`` claims is checked.

The programs here share state through a channel capture cannot see BY CONSTRUCTION (so the tests
stay valid however many gaps capture closes): a stock counter in raw ``ctypes`` memory, read and
written only by a module compiled from a string without ChaosSloth's instrumentation, whose
functions take no arguments and reach the memory through an address baked into their code.  No
object the access hooks could see carries the state, so DPOR finds every step of the two buyers
independent and reports complete; the sentinel (pct and random, which ignore dependencies) and
the stock loop still see the check-then-act race.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, run_module

from chaossloth import runner, scenario
from chaossloth.config import DEFAULTS, SENTINEL_MIN_EXECUTIONS, Config
from chaossloth.errors import InputError

#: the hidden channel and the buyers; ROUNDS and TAKE are filled in per program
PROGRAM = '''
"""Check-then-act on a stock kept where capture cannot see it."""

import asyncio
import ctypes
import types

_STOCK = ctypes.c_long(1)  # items left: reached only through its address
_SOLD = ctypes.c_long(0)
_HIDDEN = types.ModuleType("hidden_stock")
exec(  # a module compiled without ChaosSloth's instrumentation, on purpose
    compile(
        "import ctypes\\n"
        "def _cell(addr):\\n"
        "    return ctypes.c_long.from_address(addr)\\n"
        f"def reset():\\n    _cell({ctypes.addressof(_STOCK)}).value = 1\\n"
        f"    _cell({ctypes.addressof(_SOLD)}).value = 0\\n"
        f"def in_stock():\\n    return _cell({ctypes.addressof(_STOCK)}).value > 0\\n"
        "def take():\\n"
        f"    stock = _cell({ctypes.addressof(_STOCK)})\\n"
        "    if stock.value <= 0:\\n"
        "        raise IndexError('take from an empty stock')\\n"
        f"    stock.value -= 1\\n    _cell({ctypes.addressof(_SOLD)}).value += 1\\n"
        "def take_if_any():\\n"
        f"    if _cell({ctypes.addressof(_STOCK)}).value > 0:\\n"
        "        take()\\n"
        f"def sold():\\n    return _cell({ctypes.addressof(_SOLD)}).value\\n",
        "<hidden_stock>",
        "exec",
    ),
    _HIDDEN.__dict__,
)


async def buy(pause):
    if pause:
        await asyncio.sleep(0)
    TAKE


async def main():
    for _ in range(ROUNDS):
        _HIDDEN.reset()
        await asyncio.gather(buy(False), buy(True))
        assert _HIDDEN.sold() == 1
'''

RACY = """if _HIDDEN.in_stock():
        await asyncio.sleep(0)
        _HIDDEN.take()"""
# the same shape, check and act in one step of the hidden module: no schedule fails
SAFE = """await asyncio.sleep(0)
    _HIDDEN.take_if_any()"""


def _lines(path: Path) -> tuple[int, int]:
    """The lines of the buyer's two awaits in a RACY program: the pause, after the check."""
    found = [
        n
        for n, text in enumerate(path.read_text().splitlines(), 1)
        if text.strip() == "await asyncio.sleep(0)"
    ]
    assert len(found) == 2
    return found[0], found[1]


@pytest.fixture(autouse=True)
def _default_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default share (a developer's CHAOSSLOTH_SENTINEL must not change these tests)."""
    monkeypatch.delenv("CHAOSSLOTH_SENTINEL", raising=False)


def _write(tmp_path: Path, name: str, take: str, rounds: int = 1) -> Path:
    src = PROGRAM.replace("TAKE", take).replace("ROUNDS", str(rounds))
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(src).lstrip("\n"))
    return path


def _explore(
    path: Path, **options: Any
) -> tuple[runner.ExplorationResult, runner.ScheduleLog, Any]:
    module = scenario.load_module(path)
    log = runner.ScheduleLog()
    res = runner.explore(module.main, strategy="dpor", on_execution=log.add, **options)
    return res, log, module


# ------------------------------------------------------------------ the rule


def test_rule_names_the_check_and_the_act_dpor_never_reordered() -> None:
    # the race as schedules (actor 0 main, 1 and 2 the buyers, 3/4 their done-callbacks):
    # DPOR ran buyer 1's act (its 2nd step) before buyer 2's check (its 2nd step) every time
    dpor = [[0, 1, 2, 1, 2, 3, 4, 0, 5], [0, 1, 2, 1, 2, 4, 3, 0, 5]]
    # buyer 2 checks (position 3) and takes (4, a step DPOR never ran), buyer 1 takes (5)
    failing = [0, 1, 2, 2, 2, 1, 4, 3, 0, 5]
    gap = runner.find_capture_gap(failing, dpor)
    assert gap == runner.CaptureGap(first=3, second=5, prefix=3, sharing=2, compared=2)
    # with buyer 2's done-callback (actor 4) run before buyer 1's act, the closest step
    # before the act that DPOR always ran after it is that callback (the sentinel's replays
    # move it away: test_sentinel_finds_what_dpor_called_complete)
    gap = runner.find_capture_gap([0, 1, 2, 2, 2, 4, 1, 3, 0, 5], dpor)
    assert gap is not None and (gap.first, gap.second) == (5, 6)


def test_rule_takes_the_first_reversed_step_then_the_closest_before_it() -> None:
    # after the prefix [0], failing runs 2, 3 (DPOR's order), then 1, which DPOR ran first
    dpor = [[0, 1, 2, 3]]
    gap = runner.find_capture_gap([0, 2, 3, 1], dpor)
    assert gap is not None and (gap.first, gap.second, gap.prefix) == (2, 3, 1)
    # the earliest reversed step wins: 2 already runs after 3, which DPOR ran after it
    gap = runner.find_capture_gap([0, 3, 2, 1], dpor)
    assert gap is not None and (gap.first, gap.second) == (1, 2)


def test_rule_ignores_what_an_execution_never_ran_and_needs_every_execution() -> None:
    # step (2, 0) never ran in the DPOR execution: it says nothing about it
    gap = runner.find_capture_gap([0, 2, 1], [[0, 1, 3]])
    assert gap is not None and (gap.first, gap.second) == (1, None)
    # one DPOR execution already ran 2 before 1: that order was explored
    gap = runner.find_capture_gap([0, 2, 1], [[0, 1, 2], [0, 3, 2, 1]])
    assert gap is not None and gap.second is None and gap.sharing == 2


def test_rule_has_no_pair_for_an_explored_schedule_or_no_exploration() -> None:
    assert runner.find_capture_gap([0, 1, 2], [[0, 2, 1], [0, 1, 2]]) is None
    assert runner.find_capture_gap([0, 1, 2], []) is None


def test_schedule_log_keeps_every_schedule_until_its_cap() -> None:
    scheds = [[0, 1, 2, 1], [0, 1, 2, 2, 1], [0, 2, 1], [0, 2, 1]]
    log = runner.ScheduleLog()
    for s in scheds:
        log.add(runner.ExecutionResult("ok", steps=[runner.Step(a, "") for a in s]))
    assert list(log) == scheds and log.count == 4 and log.truncated == 0
    small = runner.ScheduleLog(max_entries=6)
    for s in scheds:
        small.add(runner.ExecutionResult("ok", steps=[runner.Step(a, "") for a in s]))
    assert list(small) == scheds[:2] and small.truncated == 2


# ------------------------------------------------------------------ the runner


def test_sentinel_finds_what_dpor_called_complete(tmp_path: Path) -> None:
    path = _write(tmp_path, "gap_runner", RACY)
    _, line_checked = _lines(path)
    res, log, module = _explore(path)
    assert res.complete and not res.failed  # capture cannot see the stock: DPOR is fooled
    s = runner.sentinel(module.main, res, log, share=0.1)
    assert s.failing is not None and s.failures >= 1
    assert s.failing.failure is not None and s.failing.failure.type_name == "IndexError"
    assert 1 <= s.executions <= s.budget_executions
    gap = s.gap
    assert gap is not None and gap.second is not None
    steps, sites = s.failing.steps, s.failing.await_sites
    assert sites is not None
    # the pair: the paused buyer's check (resumed at the pause, suspended after the check),
    # then the other buyer's act, which DPOR always ran first
    first, second = steps[gap.first], steps[gap.second]
    assert first.name == "Task main/1 (buy)" and second.name == "Task main/0 (buy)"
    assert sites[gap.first] is not None and sites[gap.first][1] == line_checked
    assert sites[gap.second] is None  # the act runs to the end of the buyer (and fails)
    # the failing schedule replays to the same failure
    again = runner.run_once(
        module.main, schedule=s.failing.schedule, actor_paths=s.failing.actor_paths
    )
    assert again.failed and again.failure is not None
    assert again.failure.type_name == "IndexError"


def test_sentinel_runs_its_budget_and_finds_nothing_on_a_correct_program(tmp_path: Path) -> None:
    res, log, module = _explore(_write(tmp_path, "safe_runner", SAFE))
    assert res.complete and not res.failed
    # a generous time budget: the floor of executions is reached, whatever the machine
    cfg = DEFAULTS.replace(time_limit=600.0)
    s = runner.sentinel(module.main, res, log, share=0.1, config=cfg)
    assert s.budget_executions == SENTINEL_MIN_EXECUTIONS == 300
    assert s.executions == SENTINEL_MIN_EXECUTIONS
    assert s.failures == 0 and s.failing is None and s.gap is None
    assert s.phases == ["pct", "random"]


def test_sentinel_budget_is_a_share_of_dpor_with_a_floor() -> None:
    dpor = runner.ExplorationResult("dpor", 0, executions=10_000, explore_seconds=50.0)
    assert runner.sentinel_budget(0.1, dpor, DEFAULTS) == (1000, pytest.approx(5.0))
    small = runner.ExplorationResult("dpor", 0, executions=3, explore_seconds=0.01)
    execs, secs = runner.sentinel_budget(0.1, small, DEFAULTS)
    assert execs == SENTINEL_MIN_EXECUTIONS and secs == pytest.approx(1.0)  # 10% of 10 s


# ------------------------------------------------------------------ the option


def test_sentinel_option_environment_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAOSSLOTH_SENTINEL", raising=False)
    assert DEFAULTS.sentinel is None and DEFAULTS.sentinel_share() == 0.1
    monkeypatch.setenv("CHAOSSLOTH_SENTINEL", "0")
    assert Config().sentinel_share() == 0.0
    assert Config(sentinel=0.5).sentinel_share() == 0.5  # the option wins
    monkeypatch.setenv("CHAOSSLOTH_SENTINEL", "lots")
    with pytest.raises(InputError, match="CHAOSSLOTH_SENTINEL"):
        Config().sentinel_share()
    with pytest.raises(InputError, match="option sentinel must be a share"):
        Config(sentinel=-0.1)


# ------------------------------------------------------------------ end to end


def _check(tmp_path: Path, path: Path, *flags: str) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / f"{path.stem}.json"
    r = cli("check", str(path), "--scenario", "main", "--json", str(out), *flags, cwd=tmp_path)
    assert out.exists(), r.stdout + r.stderr
    return r, json.loads(out.read_text())


def test_cli_sentinel_failure_is_the_bug_and_names_the_capture_gap(tmp_path: Path) -> None:
    path = _write(tmp_path, "gap_cli", RACY)
    line_pause, line_checked = _lines(path)
    r, rep = _check(tmp_path, path, "--no-telemetry")
    assert r.returncode == 1, r.stdout + r.stderr
    assert rep["verdict"] == "fail" and rep["complete"] is False
    assert "capture missed a dependency" in rep["incomplete_reason"]
    assert rep["failure"]["type"] == "IndexError"
    sen = rep["sentinel"]
    assert sen["ran"] is True and sen["failures"] >= 1 and sen["executions"] >= 1
    gap = sen["capture_gap"]
    assert gap["first"]["name"] == "Task main/1 (buy)" and gap["first"]["step"] == 2
    assert gap["first"]["resumed_at"]["line"] == line_pause
    assert gap["first"]["suspended_at"]["line"] == line_checked
    assert gap["second"]["name"] == "Task main/0 (buy)" and gap["second"]["step"] == 2
    assert gap["second"]["resumed_at"]["line"] == line_checked
    assert rep["capture_gap"]["found_by"] == "sentinel"
    assert rep["capture_gap"]["steps"] == gap
    assert "please report it" in rep["capture_gap"]["message"]
    # the bug as it is: schedule file, replay from it
    assert rep["replay_reproduces"] is True and rep["schedule_file"]
    assert f"gap_cli.py:{line_checked}" in r.stdout and "Not recorded as dependent" in r.stdout
    rr = cli("replay", rep["schedule_file"], cwd=tmp_path)
    assert rr.returncode == 1, rr.stdout + rr.stderr


def test_cli_correct_program_sentinel_finds_nothing_complete_stands(tmp_path: Path) -> None:
    path = _write(tmp_path, "safe_cli", SAFE)
    r, rep = _check(tmp_path, path, "--no-telemetry", "--time-limit", "600")
    assert r.returncode == 0, r.stdout + r.stderr
    assert rep["verdict"] == "pass" and rep["complete"] is True
    assert rep["incomplete_reason"] is None and rep["capture_gap"] is None
    sen = rep["sentinel"]
    assert sen["ran"] is True and sen["executions"] == SENTINEL_MIN_EXECUTIONS
    assert sen["failures"] == 0 and sen["capture_gap"] is None
    assert "complete stands" in r.stdout


def test_cli_sentinel_zero_and_sampling_strategies_skip_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "skip_cli", SAFE)
    r, rep = _check(tmp_path, path, "--no-telemetry", "--sentinel", "0")
    assert r.returncode == 0 and rep["sentinel"]["ran"] is False
    assert "disabled" in rep["sentinel"]["why_not"] and rep["sentinel"]["executions"] == 0
    r, rep = _check(tmp_path, path, "--no-telemetry", "--strategy", "pct", "--max-executions", "5")
    assert r.returncode == 0 and rep["sentinel"]["ran"] is False
    assert "pct" in rep["sentinel"]["why_not"]
    bad = cli("check", str(path), "--scenario", "main", "--sentinel", "-1", cwd=tmp_path)
    assert bad.returncode == 2 and "--sentinel" in bad.stderr


def test_cli_bad_environment_share_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "env_cli", SAFE)
    monkeypatch.setenv("CHAOSSLOTH_SENTINEL", "-3")
    r = cli("check", str(path), "--scenario", "main", "--no-telemetry", cwd=tmp_path)
    assert r.returncode == 2 and "CHAOSSLOTH_SENTINEL" in r.stderr, r.stdout + r.stderr
    monkeypatch.setenv("CHAOSSLOTH_SENTINEL", "0")
    out = tmp_path / "env.json"
    r = cli("check", str(path), "--scenario", "main", "--no-telemetry", "--json", str(out),
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and json.loads(out.read_text())["sentinel"]["ran"] is False


def test_cli_stock_loop_failure_is_a_failure(tmp_path: Path) -> None:
    # three rounds: on the stock loop with jitter most runs fail (each round ~40%); DPOR cannot
    # see the stock, and the sentinel is off, so the stock loop's runs are the only evidence
    path = _write(tmp_path, "stock_cli", RACY, rounds=3)
    r, rep = _check(tmp_path, path, "--sentinel", "0")
    assert r.returncode == 1, r.stdout + r.stderr
    assert rep["verdict"] == "fail" and rep["complete"] is False
    assert rep["schedule_file"] is None  # no explored schedule fails
    stock = rep["stock_loop_failure"]
    assert stock["type"] == "IndexError" and stock["failures"] >= 1
    # the traceback in user code: the buyer's act, not ChaosSloth's or asyncio's frames
    assert "_HIDDEN.take()" in stock["traceback"] and "chaossloth" not in stock["traceback"]
    assert rep["failure"]["type"] == "IndexError"
    assert rep["capture_gap"]["found_by"] == "stock loop"
    assert "capture missed a dependency" in rep["incomplete_reason"]
    assert "a capture gap; please report it" in r.stdout
    assert "_HIDDEN.take()" in r.stdout


def test_pytest_marker_runs_the_sentinel(tmp_path: Path) -> None:
    prog = _write(tmp_path, "shop", RACY).read_text()
    test = prog + textwrap.dedent(
        """

        import pytest


        @pytest.mark.chaossloth
        async def test_buyers():
            await main()
        """
    )
    (tmp_path / "test_shop.py").write_text(test)
    r = run_module("pytest", "-q", "-p", "no:cacheprovider", "test_shop.py", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ChaosSloth found a failing schedule" in r.stdout
    assert "IndexError" in r.stdout
