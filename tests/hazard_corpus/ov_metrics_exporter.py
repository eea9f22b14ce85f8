# expect: order-violation scenario=serve_while_starting
# An exporter creates its registry in start() after reading its config; a handler records a
# metric before the registry exists.
import asyncio


class Exporter:
    def __init__(self):
        self.registry = None

    async def start(self):
        await asyncio.sleep(0)  # read the exporter's config
        self.registry = {}  # race

    async def observe(self, name, value):
        await asyncio.sleep(0)
        self.registry[name] = value  # race


async def serve_while_starting():
    exporter = Exporter()
    await asyncio.gather(exporter.start(), exporter.observe("latency_ms", 12))
    assert exporter.registry == {"latency_ms": 12}
