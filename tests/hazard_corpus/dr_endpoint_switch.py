# expect: dirty-read scenario=failover_during_connect
# A failover switches host then port with an await between; a connect in between uses the new
# host with the old port.
import asyncio

VALID = {("primary", 5432), ("replica", 6432)}


class Endpoint:
    def __init__(self):
        self.host = "primary"
        self.port = 5432

    async def failover(self):
        await asyncio.sleep(0)  # the health check times out
        self.host = "replica"  # race
        await asyncio.sleep(0)  # ask service discovery for the port
        self.port = 6432  # race

    async def connect(self):
        await asyncio.sleep(0)
        target = (self.host, self.port)  # race
        assert target in VALID, f"connecting to {target}"
        return target


async def failover_during_connect():
    ep = Endpoint()
    await asyncio.gather(ep.failover(), ep.connect())
