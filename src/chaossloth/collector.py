"""The cycle collector, made part of an execution's initial state.

When the automatic collector runs depends on a count of allocations since its last run, which is
the process's history: the same execution could find a finalizer run in one position of the
exploration and not in another ("the default order passes in the first execution and fails after
the exploration"), and garbage of one execution could be finalized in the middle of another.  So
each execution (of the controlled loop, and each stock-loop run of stage 4) runs in
:func:`isolated`:

* at its start, ``gc.freeze()`` moves every object alive into the permanent generation and sets
  every generation's count to 0: whatever the process did before, each execution meets the
  collector in the same state, and its collections (automatic, or the program's ``gc.collect()``)
  see only objects the execution made.  Earlier garbage cannot be finalized inside it.  The
  hooks' keeper is made young again (``_core.hooks_keeper_young``) so that cycles through the
  containers the capture holds stay collectable;
* right before the program's first step (:func:`settle`), a collection of the youngest generation
  and a top-up of its count to what a stock ``asyncio.run`` has at the first step of its coroutine
  (measured once per process, :func:`stock_young_count`): the allocations of ChaosSloth's own set-up
  vary from one execution to the next (caches warming up), the program's first step must not see
  them.  The same schedule therefore meets the same automatic collections in every execution;
* at its end, the garbage it left (cycles nothing collected while it ran) is collected: its
  finalizers run then, after the loop closed (where the stock loop too would run them, at some
  later collection), and what they raise is not reported (a finalizer calling a closed loop);
  then ``gc.unfreeze()`` hands everything back to the oldest generation;
* between executions, a full collection reclaims the cyclic garbage of objects that were frozen
  (module state replaced by the reset of the next execution), at most as often as keeps its cost
  under 2% of the time spent (it runs between executions, so it changes no execution).

What stays different from the stock loop: a collection inside an execution never reclaims
objects that existed before it started (a cycle made at import and dropped by the program is
finalized after the execution, not during it), ``gc.get_objects()`` inside an execution lists only
the objects made in it, and a program calling ``gc.freeze()`` or ``gc.unfreeze()`` itself defeats
the isolation.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from chaossloth import _core

#: the between-executions full collection runs at most once per this many times its own cost
_FULL_COLLECTION_SHARE = 50.0


class _Stock:
    young_count: int | None = None


def stock_young_count() -> int:
    """The youngest generation's count at the first step of a coroutine run by a stock
    ``asyncio.run`` (a fresh selector loop) started with every count at 0: its own set-up's
    allocations.  Measured in a thread of its own (a loop may be running in this one), warm (the
    second of two runs: the first one fills caches)."""
    if _Stock.young_count is None:
        counts: list[int] = []

        async def first_step() -> None:
            counts.append(gc.get_count()[0])

        def measure() -> None:
            for _ in range(2):
                gc.freeze()
                try:
                    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
                        runner.run(first_step())
                finally:
                    gc.unfreeze()

        thread = threading.Thread(target=measure, name="chaossloth-gc-probe", daemon=True)
        thread.start()
        thread.join()
        _Stock.young_count = counts[-1] if counts else 0
    return _Stock.young_count


def settle() -> list[Any]:
    """Right before the program's first step: collects the youngest generation and allocates
    (into the list returned, to hold until the execution ends) until its count is
    :func:`stock_young_count`.  Inside :func:`isolated` only.

    What it leaves, as one list at a time would: the youngest generation's count exactly at
    the target, and the free list of lists empty (a list taken from it is no allocation for
    the count, so the count rises only once it is drained).  The lists are made in batches,
    fewer Python-level iterations: a batch of n - 2 lists when n >= 3 are missing, which with
    the list holding them (and, before 3.12, the comprehension's function object, freed when
    the batch is made) never takes the count above the target, even for a moment; one list at
    a time for the last two."""
    target = _Stock.young_count or 0
    gc.collect(0)
    ballast: list[Any] = []
    get_count = gc.get_count
    while True:
        missing = target - get_count()[0]
        if missing <= 0:
            return ballast
        if missing < 3:
            ballast.append([])
        else:
            ballast.append([[] for _ in range(missing - 2)])


class _FullCollections:
    last_end: float = 0.0
    last_cost: float = 0.0


def _ignore_unraisable(_unraisable: Any) -> None:
    return None


def _full_collection_due(now: float) -> bool:
    return now - _FullCollections.last_end >= _FULL_COLLECTION_SHARE * _FullCollections.last_cost


def enter() -> None:
    """The start of one execution's view of the cycle collector (see the module's docstring);
    :func:`leave` ends it.  ``with isolated():`` is the pair."""
    stock_young_count()
    gc.freeze()
    _core.hooks_keeper_young()


def leave() -> None:
    """The end of one execution's view of the cycle collector (after :func:`enter`): its
    garbage collected with unraisable exceptions ignored, the frozen objects handed back, and
    the amortized full collection when it is due."""
    hook = sys.unraisablehook
    sys.unraisablehook = _ignore_unraisable
    try:
        gc.collect()
        gc.unfreeze()
        now = time.perf_counter()
        if _full_collection_due(now):
            gc.collect()
            end = time.perf_counter()
            _FullCollections.last_end, _FullCollections.last_cost = end, end - now
    finally:
        sys.unraisablehook = hook


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """One execution's view of the cycle collector (see the module's docstring)."""
    enter()
    try:
        yield
    finally:
        leave()
