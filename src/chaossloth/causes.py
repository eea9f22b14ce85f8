"""The cause of a failure: which reordering of the failing schedule makes it pass.

A failing execution and a passing one that differ by one swap of two dependent steps pin the
failure on those two steps: the swap is the cause.  The engine lists the failing trace's races
(``Explorer.races``: pairs of dependent steps of different tasks that nothing else orders,
``engine/causes.c``) and, for each, the schedule that runs them the other way round
(``Explorer.reversal``); this module runs every such schedule once (a guided replay: the
program may take other steps after the swap) and keeps the races whose reversal passes.

Each cause carries the two conflicting accesses that make the steps dependent: ``before`` (the
access of the step that ran first in the failing order) and ``after``.  Stage 5 names the
pattern they form with the tasks' other accesses (:mod:`chaossloth.diagnosis`).

Cost: one execution per race tried, at most ``MAX_REVERSALS`` and ``MAX_SECONDS`` per failure,
user-visible races first (both accesses in the user's code, then one, then ChaosSloth's asyncio
capture only); races left untried are counted and said (``Reversals.stopped``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chaossloth.capture import sites as site_registry
from chaossloth.runner import OK, ExecutionResult

#: races reversed per failure (each costs one execution), and the time they may take
MAX_REVERSALS = 400
MAX_SECONDS = 30.0

READ, WRITE = 1, 2
KEY_WHOLE = OBJECT_ALL = 2**64 - 1


@dataclass(frozen=True)
class Access:
    """One access of the failing trace: its event, its index within the event, and what the
    engine recorded (object, key, kind, site)."""

    event: int
    index: int
    obj: int
    key: int
    kind: int
    site: int

    @property
    def writes(self) -> bool:
        return self.kind != READ

    @property
    def in_user_code(self) -> bool:
        s = site_registry.get(self.site)
        return self.site != 0 and s.line > 0

    @property
    def primitive_operation(self) -> bool:
        """An operation of an asyncio primitive (Event.set(), Lock.acquire()...), not of the
        futures and tasks beneath them."""
        s = site_registry.get(self.site)
        return self.site != 0 and s.kind == "sync" and s.text.startswith("asyncio.")

    def overlaps(self, other: Access) -> bool:
        if OBJECT_ALL in (self.obj, other.obj):
            return True
        return self.obj == other.obj and (
            self.key == other.key or KEY_WHOLE in (self.key, other.key)
        )


@dataclass(frozen=True)
class Cause:
    """A race whose reversal makes the failure go away: in the failing order `before` (a
    step of one task) happens before `after` (a step of another); in the passing neighbour,
    after it."""

    before: Access
    after: Access


def accesses_of(trace: Sequence[Any], event: int) -> list[Access]:
    return [Access(event, k, *acc) for k, acc in enumerate(trace[event].accesses)]


def conflicting_pair(trace: Sequence[Any], i: int, j: int) -> tuple[Access, Access] | None:
    """The pair of conflicting accesses that makes events i and j dependent, the most
    telling first: both in the user's code, then one, then neither, and at each of these a
    pair on an asyncio primitive's operation (a set against a clear) before one on the tasks
    and futures beneath (a task's step against an await of it); among equals, the last
    access of i and the first of j (nearest to the swap)."""
    best: tuple[int, tuple[Access, Access]] | None = None
    for a in reversed(accesses_of(trace, i)):
        for b in accesses_of(trace, j):
            if not (a.writes or b.writes) or not a.overlaps(b):
                continue
            if OBJECT_ALL in (a.obj, b.obj) and a.obj != b.obj:
                score = 0  # a barrier stands for anything: the weakest explanation
            else:
                score = 2 * (int(a.in_user_code) + int(b.in_user_code)) + 1
                score += int(a.primitive_operation or b.primitive_operation)
            if best is None or score > best[0]:
                best = (score, (a, b))
    return best[1] if best is not None else None


def _position(schedule: Sequence[int], actor: int, nth: int) -> int | None:
    seen = 0
    for pos, a in enumerate(schedule):
        if a == actor:
            if seen == nth:
                return pos
            seen += 1
    return None


@dataclass
class Reversals:
    """What the reversal test did: races found, reversals run, and why it stopped early."""

    races: int = 0
    tried: int = 0
    stopped: str | None = None  #: "limit" or "time" when races were left untried

    def to_json(self) -> dict[str, Any]:
        return {"races": self.races, "tried": self.tried, "stopped": self.stopped}


def find_causes(
    trace: Sequence[Any],
    explorer: Any,
    rerun: Callable[[list[int]], ExecutionResult],
    limit: int = MAX_REVERSALS,
    seconds: float = MAX_SECONDS,
) -> tuple[list[Cause], Reversals]:
    """The races of the failing `trace` (the current execution of `explorer`) whose reversal
    passes, in the failing trace's order of their second step; and what the test did (races
    left untried when `limit` reversals or `seconds` were spent: said, never silent).
    `rerun(schedule)` runs one guided replay of a schedule on the same program."""
    candidates: list[tuple[int, int, int, tuple[Access, Access]]] = []
    for i, j in explorer.races():
        pair = conflicting_pair(trace, i, j)
        if pair is None:
            continue  # ordered by a wake-up the engine saw as a dependency: nothing to swap
        user = int(pair[0].in_user_code) + int(pair[1].in_user_code)
        candidates.append((-user, j, i, pair))
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    causes: list[Cause] = []
    done = Reversals(races=len(candidates))
    deadline = time.monotonic() + seconds
    for _neg_user, j, i, pair in candidates:
        if done.tried >= limit or time.monotonic() > deadline:
            done.stopped = "limit" if done.tried >= limit else "time"
            break
        done.tried += 1
        r = rerun(explorer.reversal(i, j))
        if r.outcome != OK:
            continue
        ei, ej = trace[i], trace[j]
        pos_i = _position(r.schedule, ei.actor, ei.actor_step)
        pos_j = _position(r.schedule, ej.actor, ej.actor_step)
        # the guide is followed only where the program allows: a pass without the swap is
        # some other schedule, not this race's neighbour
        if pos_j is None or (pos_i is not None and pos_i < pos_j):
            continue
        causes.append(Cause(pair[0], pair[1]))
    causes.sort(key=lambda c: (c.after.event, c.before.event))
    return causes, done
