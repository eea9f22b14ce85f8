# expect: lost-wakeup scenario=one_call
# An RPC client sends the request, then registers the future for its response; a response
# dispatched before the registration finds no waiter and is dropped.
import asyncio


class Transport:
    def __init__(self):
        self.outbox = asyncio.Queue()

    async def send(self, req_id):
        self.outbox.put_nowait(req_id)
        await asyncio.sleep(0)  # flush the socket


class RpcClient:
    def __init__(self, transport):
        self.transport = transport
        self.pending = {}

    async def call(self, req_id):
        await self.transport.send(req_id)
        fut = asyncio.get_running_loop().create_future()
        self.pending[req_id] = fut
        return await fut  # race

    async def dispatch_one(self):
        await asyncio.sleep(0)  # wait for the connection to open
        req_id = await self.transport.outbox.get()
        fut = self.pending.pop(req_id, None)  # race
        if fut is not None:
            fut.set_result(f"response to {req_id}")


async def one_call():
    client = RpcClient(Transport())
    reply, _ = await asyncio.gather(client.call(1), client.dispatch_one())
    assert reply == "response to 1"
