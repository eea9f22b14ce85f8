"""Helpers shared by the loop tests: the reference loop, the loop kinds and the observer."""

from __future__ import annotations

import asyncio
import gc
import selectors
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from chaossloth import _core
from chaossloth.loop import ControlledLoop

#: real seconds the virtual clock waits for the default executor's shutdown thread
SHUTDOWN_WAIT = 30.0


class _VirtualSelector(selectors.BaseSelector):
    """A real selector (for the self-pipe and executor wake-ups) whose waits do not sleep: a
    wait with a timeout returns at once after moving the loop's virtual clock to the earliest
    deadline."""

    def __init__(self) -> None:
        self._real = selectors.DefaultSelector()
        self.loop: VirtualClockStockLoop | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        loop = self.loop
        assert loop is not None
        if timeout is None:  # nothing scheduled: only another thread can wake us
            return self._real.select(None)
        if any("_do_shutdown" in t.name for t in threading.enumerate()):
            # 3.12+ shutdown_default_executor(timeout): the thread joining the executor's
            # wakes the loop when done; skipping to the timeout's deadline would warn that
            # it did not finish in time
            ready = self._real.select(SHUTDOWN_WAIT)
            if ready:
                return ready
        sched = loop._scheduled
        loop._vt = max(loop._vt, sched[0]._when) if sched else loop._vt + timeout
        return []


class VirtualClockStockLoop(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type]
    """Stock asyncio (every scheduling decision is BaseEventLoop._run_once) with a virtual
    clock starting at 0.0, so that sleeps take no wall time and timer batches are exact."""

    def __init__(self) -> None:
        sel = _VirtualSelector()
        self._vt = 0.0
        super().__init__(selector=sel)
        sel.loop = self

    def time(self) -> float:
        return self._vt


def _controlled_with_explorer() -> ControlledLoop:
    loop = ControlledLoop()
    ex = _core.Explorer("fifo")
    assert ex.begin()
    loop._cs_attach(ex)
    return loop


LOOP_KINDS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "stock": VirtualClockStockLoop,
    "controlled": ControlledLoop,
    "controlled+explorer": _controlled_with_explorer,
}


def observe(
    factory: Callable[[], asyncio.AbstractEventLoop],
    program: Callable[[list[Any]], Coroutine[Any, Any, Any]],
) -> dict[str, Any]:
    """Runs ``program(log)`` with asyncio.Runner on a loop from ``factory`` and returns what
    can be observed: the log, the result or exception, and the exception-handler calls."""
    log: list[Any] = []
    handled: list[tuple[str, str | None]] = []

    def handler(loop: Any, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        handled.append((str(context.get("message")), type(exc).__name__ if exc else None))

    def make() -> asyncio.AbstractEventLoop:
        loop = factory()
        loop.set_exception_handler(handler)
        return loop

    outcome: tuple[str, Any]
    with asyncio.Runner(loop_factory=make) as runner:
        try:
            outcome = ("result", runner.run(program(log)))
        except BaseException as exc:  # noqa: BLE001 - the outcome is what we compare
            outcome = ("raised", f"{type(exc).__name__}: {exc}")
        gc.collect()
    gc.collect()
    return {"log": log, "outcome": outcome, "handled": handled}
