"""async-lru's alru_cache: a call is in flight while another task calls cache_clear(); the
caller still gets its value, and a later call runs the function again.
Documented bug (async-lru issue #503 "Error when the cache is cleared before the done callback is
called", PR #505, fixed in 2.0.4): cache_clear() emptied the set of running tasks, and the
call's done-callback then failed at `self.__tasks.remove(task)` (KeyError) before setting the
caller's future, so the caller waited forever."""

import asyncio

from async_lru import alru_cache

CASES = [
    {"requires": ["async-lru==2.4.0"], "expect": "complete"},
    {"requires": ["async-lru==2.0.4"], "expect": "complete"},
    {
        "requires": ["async-lru==2.0.3"],
        "expect": "fail",
        # the caller waits forever at :223 for the future the callback never set, because
        # :165 `self.__tasks.remove(task)` raised KeyError; naming :170 is blocked by A_3
        "hazard": "lost-wakeup",
        "lines": ["async_lru/__init__.py:223", "async_lru/__init__.py:165"],
    },
]
INSTRUMENT = ["async_lru"]


async def scenario():
    calls = []

    @alru_cache()
    async def fetch(k):
        calls.append(k)
        await asyncio.sleep(0)
        return k * 10

    async def clearer():
        await asyncio.sleep(0)
        fetch.cache_clear()

    assert await asyncio.gather(fetch(1), clearer()) == [10, None]
    assert await fetch(1) == 10
    assert len(calls) in (1, 2)
