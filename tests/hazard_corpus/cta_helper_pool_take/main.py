# expect: check-then-act scenario=two_clients
import asyncio

from pool import Pool

served = {"count": 0}


async def client(pool, name):
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
