"""Lazy initialisation across an await: two callers each create the shared connection.

    chaossloth check examples/lazy_init.py --scenario two_callers
    chaossloth check examples/lazy_init.py --cls Client --method connection

Both callers find no connection, both open one; the first is overwritten and leaked, and the
two callers end up talking over different connections (check-then-act).
"""

import asyncio


class Connection:
    def __init__(self, serial):
        self.serial = serial
        self.open = False

    async def connect(self):
        await asyncio.sleep(0.001)  # the handshake
        self.open = True


class Client:
    def __init__(self):
        self.conn = None
        self.opened = 0

    async def connection(self):
        if self.conn is None:
            self.opened += 1
            conn = Connection(self.opened)
            await conn.connect()
            self.conn = conn
        return self.conn


async def two_callers():
    client = Client()
    a, b = await asyncio.gather(client.connection(), client.connection())
    assert a is b, "the two callers got different connections"
    assert client.opened == 1, f"opened {client.opened} connections"


if __name__ == "__main__":
    asyncio.run(two_callers())
