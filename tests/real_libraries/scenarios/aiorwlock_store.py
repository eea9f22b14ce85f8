"""A store guarded by aiorwlock's RWLock: two writers and a reader contend; every write lands
(issue 35's first program, once reported 'nondeterministic' through ChaosSloth's own frames)."""

import asyncio

import aiorwlock

CASES = [{"requires": ["aiorwlock==1.5.1"], "expect": "complete"}]


class Store:
    def __init__(self):
        self.rw = aiorwlock.RWLock()
        self.data = {}

    async def put(self, k, v):
        async with self.rw.writer_lock:
            await asyncio.sleep(0)
            self.data[k] = v

    async def get(self, k):
        async with self.rw.reader_lock:
            await asyncio.sleep(0)
            return self.data.get(k)


async def scenario():
    s = Store()
    await asyncio.gather(s.put("a", 1), s.get("a"), s.put("b", 2))
    assert set(s.data) == {"a", "b"}
