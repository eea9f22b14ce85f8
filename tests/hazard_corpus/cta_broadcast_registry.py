# expect: check-then-act scenario=broadcast_while_leaving
# A websocket-style broadcast iterates the client set, awaiting each send; a client that leaves
# meanwhile changes the set under the iteration (RuntimeError).
import asyncio


class FakeSocket:
    def __init__(self, name):
        self.name = name
        self.inbox = []

    async def send(self, msg):
        await asyncio.sleep(0)
        self.inbox.append(msg)


class Hub:
    def __init__(self):
        self.clients = set()

    async def broadcast(self, msg):
        for ws in self.clients:  # race
            await ws.send(msg)

    async def leave(self, ws):
        await asyncio.sleep(0)
        self.clients.discard(ws)  # race


async def broadcast_while_leaving():
    hub = Hub()
    a, b = FakeSocket("a"), FakeSocket("b")
    hub.clients.update((a, b))
    await asyncio.gather(hub.broadcast("hello"), hub.leave(a))
