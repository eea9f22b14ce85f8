# expect: lost-wakeup scenario=client_waits_for_server
# A TLS reload clears the server's "ready" Event while it swaps certificates, counting on
# start() to set it once the listener is up; when start() already signalled, the clear erases
# the signal and a client waiting for readiness times out.
import asyncio


class Server:
    def __init__(self):
        self.ready = asyncio.Event()
        self.cert = "old"

    async def start(self):
        await asyncio.sleep(0)  # bind the listener
        self.ready.set()

    async def reload_tls(self):
        await asyncio.sleep(0)
        self.ready.clear()  # race
        self.cert = "new"


async def client(server):
    await asyncio.sleep(0)
    await asyncio.wait_for(server.ready.wait(), timeout=1.0)  # race
    return "connected"


async def client_waits_for_server():
    server = Server()
    results = await asyncio.gather(server.start(), server.reload_tls(), client(server))
    assert results[2] == "connected"
