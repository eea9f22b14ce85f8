"""async-lru's alru_cache(maxsize=1, ttl=60): two concurrent misses for different keys, so the
second evicts the first while its call is still running; both callers get their values.
Documented bug (async-lru issue #480 "`KeyError` is raised while using both: TTL and maxsize
params", fixed in 2.0.3): the done-callback looked the finished call's key up with
`self.__cache[key]` to arm the ttl timer; an evicted key raised KeyError there, before the
caller's future was set, so the first caller waited forever."""

import asyncio

from async_lru import alru_cache

CASES = [
    {"requires": ["async-lru==2.4.0"], "expect": "complete"},
    {"requires": ["async-lru==2.0.3"], "expect": "complete"},
    {
        "requires": ["async-lru==2.0.2"],
        "expect": "fail",
        # the first caller waits forever at :218 for the future the crashed callback (:164
        # `cache_item = self.__cache[key]`, KeyError) never set; naming :164 is blocked by
        # ChaosSloth finding A_3 (the callback's exception is not reported)
        "hazard": "lost-wakeup",
        "lines": ["async_lru/__init__.py:218", "async_lru/__init__.py:164"],
    },
]
INSTRUMENT = ["async_lru"]


async def scenario():
    calls = []

    @alru_cache(maxsize=1, ttl=60)
    async def fetch(k):
        calls.append(k)
        await asyncio.sleep(0)
        return k * 10

    async def later(k):
        await asyncio.sleep(0)
        return await fetch(k)

    assert await asyncio.gather(fetch(1), later(2)) == [10, 20]
    assert sorted(calls) == [1, 2]
