"""aiorwlock's RWLock with three writers: at most one writer is ever inside.
Documented bug (aiorwlock 1.2.0 changelog: "Fix a bug that makes concurrent writes possible
under some (rare) conjunctions (#235)"): a released writer woke the next waiter, which counted
itself in only when it resumed, so a writer arriving in between found the lock free too.
Fixed in 1.2.0 (the waker counts the woken waiter in)."""

import asyncio

import aiorwlock

CASES = [
    {"requires": ["aiorwlock==1.5.1"], "expect": "complete"},
    {"requires": ["aiorwlock==1.2.0"], "expect": "complete"},
    {
        "requires": ["aiorwlock==1.1.0"],
        "expect": "fail",
        # the right hazard: the woken writer's turn was checked (w_state == 0) before it resumed
        # to count itself in at :123, and a third writer's check-and-take at :113/:114 landed in
        # between. Blocked by ChaosSloth finding A_1 (reports dirty-read of self._owning first).
        "hazard": "check-then-act",
        "known_limitation": (
            "the failure is found, but ranked as a dirty read of self._owning (a membership "
            "test in the same step as the check); the check-then-act on _w_state is listed "
            "below it, its reversal not taken as a cause"
        ),
        "lines": [
            "aiorwlock/__init__.py:113",
            "aiorwlock/__init__.py:114",
            "aiorwlock/__init__.py:123",
        ],
    },
]
INSTRUMENT = ["aiorwlock"]


async def scenario():
    rw = aiorwlock.RWLock()
    inside = []

    async def writer(name):
        async with rw.writer_lock:
            inside.append(name)
            assert len(inside) == 1, f"two writers inside: {inside}"
            await asyncio.sleep(0)
            inside.remove(name)

    await asyncio.gather(writer("w1"), writer("w2"), writer("w3"))
    assert not inside
