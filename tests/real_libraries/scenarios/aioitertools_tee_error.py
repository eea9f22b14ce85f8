"""aioitertools' itertools.tee: two tasks consume the two iterators of one tee concurrently, and
the source iterator raises after its first item; both consumers must see the error.
Documented bug (aioitertools PR #47 "Handle exceptions properly in tee", changelog of 0.8.0:
"Better exception handling in `itertools.tee()` (#47)"): the first iterator let the source's
exception escape without telling the other iterators' queues, so the second consumer waited
forever in `await q.get()`. Fixed in 0.8.0."""

import asyncio

from aioitertools import itertools as ait

CASES = [
    {"requires": ["aioitertools==0.13.0"], "expect": "complete"},
    {"requires": ["aioitertools==0.8.0"], "expect": "complete"},
    {
        "requires": ["aioitertools==0.7.1"],
        "expect": "fail",
        # the second consumer waits forever at :511 `value = await q.get()` (inside tee's
        # async generator) for an item the first iterator never puts after the source raised:
        # a task stuck on a queue nothing feeds (no cycle, not a signal's wait) is a deadlock
        "hazard": "deadlock",
        "lines": ["aioitertools/itertools.py:511"],
    },
]
INSTRUMENT = ["aioitertools"]


class Boom(Exception):
    pass


async def scenario():
    async def source():
        yield 1
        await asyncio.sleep(0)
        raise Boom()

    first, second = ait.tee(source(), n=2)

    async def consume(it):
        got = []
        try:
            async for item in it:
                got.append(item)
        except Boom:
            return got, "boom"
        return got, "end"

    results = await asyncio.gather(consume(first), consume(second))
    assert results == [([1], "boom"), ([1], "boom")], results
