# expect: check-then-act scenario=two_requests
# An HTTP connector pool (pool.py) with a hard cap: two requests pass the cap check before
# either counted its new connection.
import asyncio

from pool import ConnectorPool

stats = {"requests": 0, "errors": 0}


async def request(pool, path):
    stats["requests"] += 1
    await asyncio.sleep(0)  # read the request body
    try:
        conn = await pool.acquire()
    except RuntimeError:
        stats["errors"] += 1
        return None
    pool.release(conn)
    return path


async def two_requests():
    pool = ConnectorPool(limit=1)
    stats.update(requests=0, errors=0)
    await asyncio.gather(request(pool, "/a"), request(pool, "/b"))
    assert pool.opened <= pool.limit, f"{pool.opened} connections open, limit {pool.limit}"
