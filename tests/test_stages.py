"""The stage package: eight stages in the pipeline's order, each a module of its own that
ARCHITECTURE.md's table names; loading a user's file is always instrumented."""

from __future__ import annotations

import inspect
from pathlib import Path

from chaossloth import capture, scenario
from chaossloth.stages import STAGES

ROOT = Path(__file__).resolve().parent.parent


def test_eight_stages_in_order() -> None:
    assert [s.name for s in STAGES] == [
        "capture",
        "alphabet",
        "collapse",
        "collision window",
        "diagnosis",
        "synthesis",
        "adversarial replay",
        "verdict",
    ]
    assert all(s.implemented for s in STAGES)
    assert len({s.title for s in STAGES}) == 8


def test_each_stage_is_a_module_the_architecture_table_names() -> None:
    arch = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    modules = [Path(inspect.getfile(type(s))) for s in STAGES]
    assert len(set(modules)) == 8
    for s, m in zip(STAGES, modules):
        assert f"| {s.name} | `stages/{m.name}`" in arch, s.name


def test_a_loaded_file_is_instrumented(tmp_path: Path) -> None:
    p = tmp_path / "prog.py"
    p.write_text("async def main():\n    pass\n")
    scenario.load_module(p)
    assert str(p.resolve()) in capture.INSTRUMENTED_FILES
