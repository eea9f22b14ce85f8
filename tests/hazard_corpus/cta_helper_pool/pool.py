"""An HTTP connector pool with fake connections and a hard cap on open connections."""

import asyncio


class FakeConnection:
    def __init__(self, n):
        self.n = n


class ConnectorPool:
    def __init__(self, limit):
        self.limit = limit
        self.idle = []
        self.opened = 0

    async def _open(self):
        await asyncio.sleep(0)  # TCP + TLS handshake
        return FakeConnection(self.opened)

    async def acquire(self):
        if self.idle:
            return self.idle.pop()
        if self.opened >= self.limit:  # race
            raise RuntimeError("pool exhausted")
        conn = await self._open()
        self.opened += 1  # race
        return conn

    def release(self, conn):
        self.idle.append(conn)
