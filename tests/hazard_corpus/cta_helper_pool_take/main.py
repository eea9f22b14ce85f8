# expect: check-then-act scenario=two_clients
# Callers ask the pool (pool.py) whether a connection is idle, build the request, then take
# it: the second take pops an empty list (IndexError).
import asyncio

from pool import Pool

served = {"count": 0}


async def client(pool, name):
    await asyncio.sleep(0)  # accept the caller's connection
    if pool.has_idle():
        await asyncio.sleep(0)  # build the request first
        conn = pool.take()
        served["count"] += 1
        await conn.ping()
        pool.give_back(conn)
        return name
    return None


async def two_clients():
    served["count"] = 0
    pool = Pool(["db-1"])
    await asyncio.gather(client(pool, "a"), client(pool, "b"))
