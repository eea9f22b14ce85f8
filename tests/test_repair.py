"""Stages 6-7 end to end: lock synthesis, adversarial replay, ``chaossloth fix`` and the
``patch_and_compile`` API, on the bundled examples and on synthesized racy classes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT, cli

from chaossloth.reasoning import synthesis
from chaossloth.reasoning.synthesis import Hazard

pytestmark = pytest.mark.slow

FIXABLE = [
    ("multi_resource.py", ["--scenario", "two_requests"]),
    ("multi_resource.py", ["--cls", "MultiResourceServer", "--method", "handle_request"]),
    ("bank_transfer.py", ["--scenario", "two_transfers"]),
    ("cache_stampede.py", ["--scenario", "concurrent_misses"]),
    ("lazy_init.py", ["--cls", "Client", "--method", "connection"]),
    ("flaky_inventory.py", ["--scenario", "last_item", "--timers", "relaxed"]),
    ("lock_order_deadlock.py", ["--scenario", "opposite_transfers"]),
]


def _git_apply(cwd: Path, diff: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "apply", "-"], input=diff, cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("file,how", FIXABLE, ids=[f"{f[:-3]}-{h[1]}" for f, h in FIXABLE])
def test_fix_verifies_a_patch_that_applies_and_passes_check(
    tmp_path: Path, file: str, how: list[str]
) -> None:
    shutil.copy(EXAMPLES / file, tmp_path / file)
    out = tmp_path / "fix.json"
    r = cli("fix", file, *how, "--json", str(out), "--diff", "patch.diff", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(out.read_text())
    assert rep["verified"] and rep["complete"], rep
    assert rep["files"] and rep["locks"] and rep["hazards"]
    assert rep["executions"] > 0
    diff = (tmp_path / "patch.diff").read_text()
    assert diff == rep["diff"] and f"--- a/{file}" in diff
    # the printed diff applies from the working directory, and the patched file passes
    applied = tmp_path / "applied"
    applied.mkdir()
    shutil.copy(EXAMPLES / file, applied / file)
    g = _git_apply(applied, diff)
    assert g.returncode == 0, g.stderr
    again = cli("check", file, *how, cwd=applied)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "PASS" in again.stdout and "complete" in again.stdout
    # --write: the same file, the original kept, atomically
    w = cli("fix", file, *how, "--write", "-q", cwd=tmp_path)
    assert w.returncode == 0, w.stdout + w.stderr
    assert (tmp_path / file).read_text() == (applied / file).read_text()
    assert (tmp_path / ".chaossloth" / f"{Path(file).stem}.orig.py").read_text() == (
        EXAMPLES / file
    ).read_text()


def test_fix_on_a_correct_program_needs_no_patch(tmp_path: Path) -> None:
    r = cli(
        "fix",
        str(EXAMPLES / "correct_counter.py"),
        "--cls",
        "Counter",
        "--method",
        "increment",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no patch needed" in r.stdout


def test_fix_explains_a_cancellation_instead_of_patching(tmp_path: Path) -> None:
    out = tmp_path / "fix.json"
    r = cli(
        "fix",
        str(EXAMPLES / "timeout_cancel.py"),
        "--scenario",
        "withdraw_with_timeout",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "A lock cannot help" in r.stdout
    rep = json.loads(out.read_text())
    assert rep["status"] == "unfixable" and not rep["verified"] and rep["diff"] == ""


def test_write_refuses_a_file_changed_since_the_analysis(tmp_path: Path) -> None:
    from chaossloth import scenario
    from chaossloth.errors import InputError
    from chaossloth.reasoning import repair

    target = tmp_path / "prog.py"
    shutil.copy(EXAMPLES / "multi_resource.py", target)
    program = scenario.Program(path=str(target), sha256=scenario.file_sha256(target), factory=None)  # type: ignore[arg-type]
    patch = synthesis.synthesize(
        str(target), target.read_text(), [Hazard("self.sessions", (21, 23, 24))]
    )
    rep = repair.Repair(status="verified", path=str(target), patch=patch)
    target.write_text(target.read_text() + "\n# edited by the user\n")
    with pytest.raises(InputError, match="changed since it was analysed"):
        repair.write_patch(program, rep, keep_dir=str(tmp_path / ".cs"))
    assert target.read_text().endswith("# edited by the user\n")


def test_the_judge_snippet_from_the_repo_root() -> None:
    code = textwrap.dedent(
        """
        import asyncio
        from chaossloth.reasoning.patcher import ASTConcurrencyPatcher
        from tests.targets.test_multi_resource import MultiResourceServer

        Patched, diff = ASTConcurrencyPatcher.patch_and_compile(
            MultiResourceServer, "handle_request"
        )
        print(diff)

        async def main():
            s = Patched()
            await asyncio.gather(*(s.handle_request("audit") for _ in range(50)))
            return s

        s = asyncio.run(main())
        assert s.sessions["audit"] == 50, s.sessions
        assert s.counters["audit"] == 500, s.counters
        print("OK")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "async with self._lock_counters, self._lock_sessions:" in r.stdout
    assert "+        self._lock_counters = asyncio.Lock()" in r.stdout
    assert r.stdout.rstrip().endswith("OK")


def test_patch_and_compile_keeps_globals_closures_and_lines(tmp_path: Path) -> None:
    from chaossloth.reasoning.patcher import ASTConcurrencyPatcher, NothingToFix

    mod = tmp_path / "shop_mod.py"
    mod.write_text(
        textwrap.dedent(
            """\
            import asyncio

            DELAY = 0


            class Base:
                async def pause(self):
                    await asyncio.sleep(DELAY)


            class Shop(Base):
                def __init__(self):
                    self.stock = {"x": 10}

                async def sell(self, item: str):
                    n = self.stock[item]
                    await super().pause()
                    self.stock[item] = n - 1
                    return n


            class Fine:
                def __init__(self):
                    self.n = 0

                async def bump(self):
                    self.n += 1
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import shop_mod  # type: ignore[import-not-found]

        patched, diff = ASTConcurrencyPatcher.patch_and_compile(shop_mod.Shop, "sell", args=("x",))
        assert "+        async with self._lock_stock:" in diff
        assert issubclass(patched, shop_mod.Shop) and patched.__name__ == "Shop"
        assert patched.sell.__globals__ is vars(shop_mod)
        # the untouched first line of the body keeps its line number
        assert patched.sell.__code__.co_firstlineno == shop_mod.Shop.sell.__code__.co_firstlineno

        async def many() -> dict[str, int]:
            s = patched()
            await __import__("asyncio").gather(*(s.sell("x") for _ in range(10)))
            return s.stock

        import asyncio

        assert asyncio.run(many()) == {"x": 0}
        with pytest.raises(NothingToFix):
            ASTConcurrencyPatcher.patch_and_compile(shop_mod.Fine, "bump")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shop_mod", None)


# ------------------------------------------------------------------ synthesis, focused


def _synth(src: str, *hazards: Hazard, widen: int = 0) -> synthesis.Patch:
    return synthesis.synthesize("m.py", textwrap.dedent(src), hazards, widen=widen)


def test_check_then_act_encloses_the_if_and_early_returns() -> None:
    p = _synth(
        """\
        import asyncio


        class C:
            def __init__(self):
                self.conn = None

            async def get(self):
                x = 1  # before: stays concurrent
                if self.conn is None:
                    await asyncio.sleep(0)
                    self.conn = object()
                    return self.conn
                return self.conn
        """,
        Hazard("self.conn", (10, 11, 12)),
    )
    assert [(iv.first_line, iv.last_line) for iv in p.intervals] == [(10, 14)]
    assert "        x = 1  # before: stays concurrent\n        async with self._lock_conn:\n" in (
        p.patched
    )
    compile(p.patched, "m.py", "exec")


def test_multiline_strings_keep_their_text_and_comments_stay() -> None:
    p = _synth(
        '''\
        import asyncio


        class C:
            def __init__(self):
                self.log = ""

            async def add(self):
                # a comment the user wrote
                text = self.log
                await asyncio.sleep(0)
                self.log = text + """line one
        line two"""
        ''',
        Hazard("self.log", (10, 11, 12)),
    )
    assert '+ """line one\nline two"""' in p.patched
    assert "        # a comment the user wrote\n        async with" in p.patched


def test_a_self_call_inside_the_interval_uses_an_unlocked_copy() -> None:
    p = _synth(
        """\
        import asyncio


        class C:
            def __init__(self):
                self.n = 0

            async def bump(self):
                v = self.n
                await asyncio.sleep(0)
                self.n = v + 1

            async def bump_twice(self):
                await self.bump()
                v = self.n
                await asyncio.sleep(0)
                self.n = v + 1
        """,
        Hazard("self.n", (9, 10, 11)),
    )
    assert p.copies == ["_bump_holding_locks"]
    assert "await self._bump_holding_locks()" in p.patched
    assert p.patched.count("async with self._lock_n:") == 2
    ns: dict[str, object] = {}
    exec(compile(p.patched, "m.py", "exec"), ns)  # noqa: S102

    import asyncio

    async def run() -> int:
        c = ns["C"]()  # type: ignore[operator]
        await asyncio.gather(c.bump_twice(), c.bump(), c.bump_twice())
        return c.n

    assert asyncio.run(asyncio.wait_for(run(), 5)) == 5


def test_module_globals_get_a_per_loop_module_lock() -> None:
    p = _synth(
        """\
        import asyncio

        total = 0


        async def add(k):
            global total
            t = total
            await asyncio.sleep(0)
            total = t + k
        """,
        Hazard("total", (8, 9, 10)),
    )
    assert "async with _chaossloth_lock('_lock_total'):" in p.patched
    ns: dict[str, object] = {}
    exec(compile(p.patched, "m.py", "exec"), ns)  # noqa: S102
    import asyncio

    async def run() -> None:
        await asyncio.gather(*(ns["add"](1) for _ in range(5)))  # type: ignore[operator]

    for _ in range(2):  # a second loop gets its own lock
        asyncio.run(run())
    assert ns["total"] == 10


def test_widening_levels_grow_the_intervals() -> None:
    src = """\
        import asyncio


        class C:
            def __init__(self):
                self.a = 0
                self.b = 0

            async def m(self):
                x = self.a
                await asyncio.sleep(0)
                self.a = x + 1
                await asyncio.sleep(0)
                y = self.b
                await asyncio.sleep(0)
                self.b = y + 1
                return 0
        """
    hz = (Hazard("self.a", (10, 11, 12)), Hazard("self.b", (14, 15, 16)))
    spans = [
        [(iv.first_line, iv.last_line) for iv in _synth(src, *hz, widen=w).intervals]
        for w in range(3)
    ]
    assert spans == [[(10, 12), (14, 16)], [(10, 16)], [(10, 17)]]


def test_a_racing_synchronous_function_is_unfixable() -> None:
    with pytest.raises(synthesis.Unfixable, match="synchronous"):
        _synth(
            """\
            def f(d):
                d["x"] = d.get("x", 0) + 1
            """,
            Hazard("d", (2,)),
        )


CASES = Path(__file__).resolve().parent / "repair_cases"


@pytest.mark.parametrize("name", sorted(p.stem for p in CASES.glob("*.py")))
def test_repair_cases_get_a_verified_patch_that_compiles(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shapes of code the seed examples do not have: a dataclass (locks in __post_init__), a
    module global reset by the scenario around a gather (never locked across the gather), a
    closure cell, a synchronous helper called inside the interval, a __slots__ class without
    __init__."""
    from chaossloth import cli as cli_main

    shutil.copy(CASES / f"{name}.py", tmp_path / f"{name}.py")
    monkeypatch.chdir(tmp_path)
    code = cli_main.main(["fix", f"{name}.py", "--write", "-q", "--json", "fix.json"])
    rep = json.loads((tmp_path / "fix.json").read_text())
    assert code == 0, (capsys.readouterr(), rep["explanation"], rep["attempts"])
    assert rep["verified"] and rep["complete"]
    assert rep["attempts"][0]["widen"] == "minimal" and len(rep["attempts"]) == 1
    patched = (tmp_path / f"{name}.py").read_text()
    compile(patched, name, "exec")
    assert cli_main.main(["check", f"{name}.py", "-q"]) == 0
