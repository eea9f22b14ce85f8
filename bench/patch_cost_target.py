"""The workload of bench/patch_cost.py: a lost update in a short read-await-write section, with
independent work around it.

``Ledger.record(key)`` waits for simulated I/O (1 ms), computes a checksum (a little CPU), then
reads ``self.totals[key]``, awaits once (a cache round-trip) and writes the value computed from
its read, then waits for simulated I/O again.  Concurrent calls with the same key lose updates
at the await between the read and the write; the I/O and the checksum touch nothing shared, so
a correct fix needs to serialize only the three statements in the middle.
"""

import asyncio

IO_SECONDS = 0.001


def checksum(key: str) -> int:
    """A little CPU work that shares nothing."""
    total = len(key)
    for i in range(200):
        total = (total * 31 + i) % 1_000_003
    return total


class Ledger:
    def __init__(self) -> None:
        self.totals: dict[str, int] = {}

    async def record(self, key: str) -> int:
        await asyncio.sleep(IO_SECONDS)  # independent I/O before: the request
        digest = checksum(key)
        current = self.totals.get(key, 0)
        await asyncio.sleep(0)  # the short await between the read and the write
        self.totals[key] = current + 1
        await asyncio.sleep(IO_SECONDS)  # independent I/O after: the reply
        return digest
