"""aiohttp's TCPConnector(limit=1) without I/O (_create_connection yields once, returns a fake
protocol): two tasks queue for the taken slot, it is released, the first waiter is cancelled (its
timeout) maybe after it was woken, and a later request follows; the limit is never exceeded and
every task that was not cancelled gets a connection. Documented bug (3.10.11 changelog: "Fixed a
deadlock that could occur while attempting to get a new connection slot after a timeout", #9670,
#9671): a woken waiter that was cancelled swallowed the wake-up (`except ValueError: pass`), and
new requests queued behind the stranded waiter (`key in self._waiters`) for ever. Fixed in 3.10.11."""

import asyncio

import aiohttp
from aiohttp.client_reqrep import ClientRequest
from yarl import URL

CASES = [
    {"requires": ["aiohttp==3.12.15"], "expect": "complete"},
    {"requires": ["aiohttp==3.10.11"], "expect": "complete"},
    {
        "requires": ["aiohttp==3.10.10"],
        "expect": "fail",
        "hazard": "lost-wakeup",
        # :522 a new request waits while any waiter is queued, :526 the waiter queued, :533 its
        # `await fut` that nothing completes once the woken waiter was cancelled (:540 `pass`)
        "lines": [
            "aiohttp/connector.py:522",
            "aiohttp/connector.py:526",
            "aiohttp/connector.py:533",
        ],
    },
]
INSTRUMENT = ["aiohttp"]


class FakeProtocol:
    """What the connector asks of a ResponseHandler when it pools, reuses and closes one."""

    def __init__(self):
        self.transport = None
        self.should_close = False
        self.closed = None  # no future for connector.close() to wait for
        self.connected = True

    def is_connected(self):
        return self.connected

    def close(self):
        self.connected = False


class FakeConnector(aiohttp.TCPConnector):
    created = 0

    async def _create_connection(self, req, traces, timeout):
        await asyncio.sleep(0)  # a connect of unknown latency
        self.created += 1
        return FakeProtocol()


async def scenario():
    loop = asyncio.get_running_loop()
    connector = FakeConnector(limit=1)
    req = ClientRequest("GET", URL("http://example.test/"), loop=loop)
    timeout = aiohttp.ClientTimeout()
    in_use = []
    peak = 0
    served = []

    async def user(i):
        nonlocal peak
        conn = await connector.connect(req, [], timeout)
        in_use.append(i)
        peak = max(peak, len(in_use))
        try:
            await asyncio.sleep(0)  # the request on the connection
        finally:
            in_use.remove(i)
            conn.release()
        served.append(i)

    first = await connector.connect(req, [], timeout)  # the one slot is taken
    tasks = [asyncio.create_task(user(i)) for i in (1, 2)]
    await asyncio.sleep(0)
    first.release()  # wakes the first waiter
    await asyncio.sleep(0)
    tasks[0].cancel()  # user 1 gives up (its timeout): before, or after it was woken
    await asyncio.wait([tasks[0]])
    await user(3)  # a later request
    await asyncio.gather(*tasks, return_exceptions=True)
    assert sorted(served) in ([2, 3], [1, 2, 3]), served
    assert peak == 1, peak
    assert connector.created == 1, connector.created  # the pooled connection is reused
    await connector.close()
