"""aiochannel's Channel: two consumers iterate one channel while a producer puts one item and
closes it; both consumers' loops end (the item is consumed once) whatever the order.
Documented bug (aiochannel 1.2.0 changelog, Fixed: "A `get` could hang forever in some
situations", issue #13 "aiochannel is stuck if we have more workers then items in channel"):
close() failed only the getters beyond qsize(); when the item's woken getter had not yet taken
it, the other waiting getter was left in _getters, never woken, and hung. Fixed in 1.2.0."""

import asyncio

from aiochannel import Channel

CASES = [
    {"requires": ["aiochannel==1.4.1"], "expect": "complete"},
    # 1.2.0 imports pkg_resources (setuptools, absent from 3.12+'s virtualenvs); 1.1.1's
    # setup.py imports imp (gone in 3.12)
    {"requires": ["aiochannel==1.2.0"], "expect": "complete", "pythons": ["3.11"]},
    {
        "requires": ["aiochannel==1.1.1"],
        "expect": "fail",
        "pythons": ["3.11"],
        "hazard": "lost-wakeup",
        # consumer b waits forever at :129 `await getter`: put's :49 wake-up reached consumer a only,
        # and close()'s :171 `while len(self._getters) > self.qsize():` (the item a had not taken
        # yet still counted) left b in _getters; neither :49 nor :171 is named (finding
        # aiochannel_close_line_not_named; :49 was named through a schedule that started
        # consumer b after the put, which no asyncio loop runs: tasks start in creation order)
        "lines": ["aiochannel/channel.py:129"],
    },
]
INSTRUMENT = ["aiochannel"]


async def scenario():
    ch = Channel()
    got = []

    async def consumer(name):
        async for item in ch:
            got.append((name, item))

    async def producer():
        await asyncio.sleep(0)  # the consumers are waiting in get()
        await ch.put(1)
        await asyncio.sleep(0)
        ch.close()

    await asyncio.gather(consumer("a"), consumer("b"), producer())
    assert [item for _, item in got] == [1], got
    assert ch.closed()
