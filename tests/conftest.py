"""Helpers shared by the test modules (plain functions, imported as `from conftest import ...`).

- `cli` / `run_module`: the `chaossloth` command (or pytest) in a fresh process, as a user runs it.
- `exec_source`: a module source executed plainly or instrumented, as the import hook would.
- `run_in_step`: code run inside one open step of an explorer, with the access hooks attached.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the end-to-end tests need no extension in this process
    from chaossloth import _core

# the chaossloth command re-executes itself with PYTHONHASHSEED=0 when it is unset
# (chaossloth/__init__.py); the commands the tests run start with it set, which saves the second
# start (test_replay_process.py runs the command without it, and checks the re-execution)
os.environ.setdefault("PYTHONHASHSEED", "0")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SEED = str(EXAMPLES / "multi_resource.py")
# the seed example as a --cls/--method workload: two concurrent handle_request('audit')
SEED_WORKLOAD = ("--cls", "MultiResourceServer", "--method", "handle_request", "--args", "'audit'")


def run_module(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m module args` in cwd; CHAOSSLOTH_DEBUG is dropped so that a developer's
    environment cannot turn the one-line error messages under test into tracebacks."""
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_module("chaossloth", *args, cwd=cwd)


def exec_source(source: str, filename: str, instrumented: bool, name: str) -> dict[str, Any]:
    """The namespace of module `name` after running source, compiled plainly (inheriting no
    __future__ flags from here) or instrumented with the hooks in scope."""
    from chaossloth.capture.importer import _register_file
    from chaossloth.capture.instrument import compile_instrumented, hook_namespace

    ns: dict[str, Any] = {"__name__": name}
    if instrumented:
        ns.update(hook_namespace())
        _register_file(filename)
        code = compile_instrumented(source, filename)
    else:
        code = compile(source, filename, "exec", dont_inherit=True)
    exec(code, ns)  # noqa: S102
    return ns


def run_in_step(
    fn: Callable[[], Any], before_detach: Callable[[], None] | None = None
) -> tuple[Any, _core.Explorer]:
    """Runs fn with a fresh fifo explorer's root step open and the access hooks attached to it.

    Returns fn's value and the explorer, whose execution has ended (ex.trace() still holds it).
    before_detach runs, even when fn raises, while the hooks still know this execution's
    objects (hooks_object_id answers only until they are detached)."""
    from chaossloth import _core

    ex = _core.Explorer("fifo")
    assert ex.begin()
    ex.step_begin(ex.intern(None, 0), -1)
    _core.hooks_attach(ex)
    try:
        value = fn()
    finally:
        if before_detach is not None:
            before_detach()
        _core.hooks_attach(None)
        ex.step_end()
        ex.end(0)
    return value, ex


#: two transfers taking two locks in opposite orders: the classic lock-order deadlock
DEADLOCK_PROGRAM = """\
import asyncio


class Accounts:
    def __init__(self):
        self.locks = {"a": asyncio.Lock(), "b": asyncio.Lock()}

    async def transfer(self, src, dst):
        async with self.locks[src]:
            await asyncio.sleep(0)
            async with self.locks[dst]:
                pass


async def main():
    acc = Accounts()
    await asyncio.gather(acc.transfer("a", "b"), acc.transfer("b", "a"))
"""
