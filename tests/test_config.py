"""The configuration object: one place for every option's default and every environment
variable; the CLI, the pytest plugin and the runner read it and reject bad options clearly."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from conftest import run_module

from chaossloth import cli, config, runner, scenario
from chaossloth.config import DEFAULTS, Config
from chaossloth.errors import InputError
from chaossloth.pytest_plugin import options_config

ROOT = Path(__file__).resolve().parent.parent
_READS = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|\bgetenv|\benv_u64)\(\s*["']([A-Za-z_0-9]+)["']"""
    r"""|os\.environ\[\s*["']([A-Za-z_0-9]+)["']\s*\]"""
)


def _sources() -> list[Path]:
    out: list[Path] = []
    for d in ("src", "tests", "bench", "ext", "engine"):
        for ext in ("*.py", "*.c", "*.h"):
            out.extend(p for p in (ROOT / d).rglob(ext) if ".venv" not in p.parts)
    return out


def test_every_environment_variable_read_is_documented() -> None:
    read: dict[str, str] = {}
    for p in _sources():
        for m in _READS.finditer(p.read_text(encoding="utf-8", errors="replace")):
            read.setdefault(m.group(1) or m.group(2), str(p.relative_to(ROOT)))
    assert read, "the pattern finds nothing: it is broken"
    undocumented = {k: v for k, v in read.items() if k not in config.ENVIRONMENT}
    assert undocumented == {}
    stale = set(config.ENVIRONMENT) - set(read)
    assert stale == set()


def test_the_step_budget_default_is_spelled_once() -> None:
    hits = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "src").rglob("*.py")
        if re.search(r"\b10_?000\b", p.read_text(encoding="utf-8"))
    ]
    assert hits == ["src/chaossloth/config.py"]
    assert DEFAULTS.max_steps == 10000


def test_cli_defaults_are_the_config_defaults() -> None:
    ns = cli._check_parser("chaossloth check", False).parse_args(["f.py"])
    got = Config(**{n: getattr(ns, n) for n in config.NAMES if config.flag_of(n)})
    assert got == DEFAULTS


def test_every_option_is_documented() -> None:
    for name in config.NAMES:
        assert len(config.help_of(name)) > 10, name


@pytest.mark.parametrize(
    "options,words",
    [
        ({"strategy": "bogus"}, "strategy must be one of"),
        ({"max_steps": 0}, "max_steps must be an integer of at least 1"),
        ({"timers": "loose"}, "timers must be one of strict, relaxed"),
        ({"time_limit": -1}, "time_limit must be a positive number"),
        ({"stop_on_failure": "yes"}, "stop_on_failure must be True or False"),
        ({"colour": "red"}, "unknown"),
        ({"scenario": "main"}, "unknown"),  # not an exploration option: the test names it
    ],
)
def test_bad_plugin_options_are_one_input_error(options: dict[str, object], words: str) -> None:
    with pytest.raises(InputError, match=words):
        options_config(options, "s.json")


def test_runner_rejects_unknown_and_bad_options() -> None:
    async def noop() -> None:
        return None

    with pytest.raises(InputError, match="unknown option"):
        runner.explore(noop, strategy="dpor", max_exec=3)
    with pytest.raises(InputError, match="strategy"):
        runner.explore(noop, strategy="bogus")
    res = runner.explore(noop, config=Config(strategy="fifo", max_executions=1))
    assert res.executions == 1 and res.strategy == "fifo"


def test_time_budget() -> None:
    assert Config().time_budget() == config.DEFAULT_TIME_LIMIT
    assert Config(max_executions=5).time_budget() is None
    assert Config(max_executions=5, time_limit=2.0).time_budget() == 2.0


def test_load_rejects_args_without_a_workload(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text("async def main():\n    pass\n")
    with pytest.raises(InputError, match="--args and --init-args need --cls and --method"):
        scenario.load(str(p), Config(args="1"))


MARKED = """
import asyncio

import pytest


@pytest.mark.chaossloth(strategy="bogus")
async def test_bad_option():
    await asyncio.sleep(0)
"""


def test_marker_with_a_bad_option_fails_with_one_message(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(MARKED))
    r = run_module("pytest", "-q", "-p", "no:cacheprovider", "test_user.py", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "option strategy must be one of auto, dpor" in out, out
    assert "Traceback" not in out and "config.py" not in out, out
