"""cashews' thunder_protection: two concurrent calls of a protected coroutine with the same key,
which fails; both callers get its exception and no failure is left unretrieved.
Documented bug (cashews issue #144 "Current implementation of `thunder_protection` may cause
'Future exception was never retrieved' warning", PR #145, fixed in 6.2.0): every first call
stored a bare Future that its done callback filled with the exception; when the second call
checked for the key only after that callback had removed it (so it did not join the first),
nothing ever awaited the Future and its exception was dropped unretrieved."""

import asyncio

from cashews import thunder_protection

CASES = [
    {"requires": ["cashews==7.6.0"], "expect": "complete"},
    {"requires": ["cashews==6.2.0"], "expect": "complete"},
    {
        "requires": ["cashews==6.1.0"],
        "expect": "fail",
        # the first call's done callback `del futures[_key]` (:91) runs before the second
        # call's `if _key in futures:` (:96), so nobody awaits the Future set at :88
        "hazard": "order-violation",
        "lines": ["cashews/decorators/locked.py:91", "cashews/decorators/locked.py:96"],
    },
]
INSTRUMENT = ["cashews"]


class Down(Exception):
    pass


async def scenario():
    calls = []

    @thunder_protection()
    async def fetch(k):
        calls.append(k)
        await asyncio.sleep(0)
        raise Down(k)

    async def later(k):
        await asyncio.sleep(0)  # the second request arrives after some I/O of its own
        return await fetch(k)

    # tasks start in creation order: a second call that did not await first always finds the
    # first call's Future and joins it
    got = await asyncio.gather(fetch(1), later(1), return_exceptions=True)
    assert all(isinstance(g, Down) for g in got), got
    # coalesced (one call) when the second caller came while the first was running
    assert 1 <= len(calls) <= 2
