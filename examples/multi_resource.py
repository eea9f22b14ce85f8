"""The seed example: two concurrent requests for the same client lose an update.

    chaossloth check examples/multi_resource.py --scenario two_requests
    chaossloth examples/multi_resource.py --cls MultiResourceServer --method handle_request \
        --args "'audit'"

Both requests read the client's session and counter, await, then write back values computed
from what they read; when the second request reads before the first one writes, one increment
is lost (sessions['audit'] ends at 1 instead of 2).
"""

import asyncio


class MultiResourceServer:
    def __init__(self):
        self.sessions = {}
        self.counters = {}

    async def handle_request(self, client_id: str):
        curr_sess = self.sessions.get(client_id, 0)
        curr_count = self.counters.get(client_id, 0)
        await asyncio.sleep(0.0001)
        self.sessions[client_id] = curr_sess + 1
        self.counters[client_id] = curr_count + 10


def consistent(server: MultiResourceServer) -> bool:
    """Every request counted ten units: counters == 10 * sessions for each client."""
    return all(server.counters.get(c, 0) == 10 * n for c, n in server.sessions.items())


async def two_requests():
    server = MultiResourceServer()
    await asyncio.gather(server.handle_request("audit"), server.handle_request("audit"))
    assert server.sessions["audit"] == 2, f"lost update: sessions={server.sessions}"
    assert server.counters["audit"] == 20, f"lost update: counters={server.counters}"


if __name__ == "__main__":
    asyncio.run(two_requests())
