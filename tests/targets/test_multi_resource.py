"""The seed example of the project's design notes: a lost update across an await.

Two concurrent ``handle_request('audit')`` calls both read 0 before either writes, so one update
is lost under some schedules (stock asyncio's order among them).  ``scenario`` is the workload
ChaosSloth explores; the file defines no ``test_*`` function, so pytest collects nothing here.
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


async def scenario():
    server = MultiResourceServer()
    await asyncio.gather(server.handle_request("audit"), server.handle_request("audit"))
    assert server.sessions["audit"] == 2, f"sessions['audit'] == {server.sessions['audit']}"
    assert server.counters["audit"] == 20, f"counters['audit'] == {server.counters['audit']}"
