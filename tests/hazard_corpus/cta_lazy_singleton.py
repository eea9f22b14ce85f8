# expect: check-then-act scenario=two_callers
# A lazily created client: both callers see None and both connect.
import asyncio


class Connection:
    def __init__(self, pool):
        pool.opened += 1


class ClientFactory:
    def __init__(self):
        self._instance = None
        self.opened = 0

    async def _connect(self):
        await asyncio.sleep(0)  # the TLS handshake
        return Connection(self)

    async def get(self):
        if self._instance is None:  # race
            self._instance = await self._connect()  # race
        return self._instance


async def two_callers():
    factory = ClientFactory()
    a, b = await asyncio.gather(factory.get(), factory.get())
    assert a is b, f"two connections opened ({factory.opened})"
