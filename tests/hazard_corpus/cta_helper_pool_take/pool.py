"""A connection pool whose callers ask whether a connection is idle, then take it."""

import asyncio


class FakeConn:
    def __init__(self, name):
        self.name = name

    async def ping(self):
        await asyncio.sleep(0)
        return True


class Pool:
    def __init__(self, names):
        self.idle = [FakeConn(n) for n in names]

    def has_idle(self):
        return len(self.idle) > 0  # race

    def take(self):
        return self.idle.pop()  # race

    def give_back(self, conn):
        self.idle.append(conn)
