# expect: order-violation scenario=two_requests
# A request id kept on a shared object: each handler writes its own id, awaits the database,
# then reads back the id of the other request (write, other's overwrite, read back).
import asyncio


class Context:
    def __init__(self):
        self.request_id = None


class Handler:
    def __init__(self, ctx):
        self.ctx = ctx

    async def handle(self, rid):
        self.ctx.request_id = rid  # race
        await asyncio.sleep(0)  # the database query
        logged = self.ctx.request_id  # race
        return logged


async def two_requests():
    handler = Handler(Context())
    logged = await asyncio.gather(handler.handle("r1"), handler.handle("r2"))
    assert logged == ["r1", "r2"], f"logged under the wrong request ids: {logged}"
