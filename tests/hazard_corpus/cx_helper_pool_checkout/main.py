# expect: cancellation scenario=query_with_timeout
# wait_for cancels a query while the pool (pool.py) counted the connection as in use and was
# still connecting: the count leaks and the retry finds the pool exhausted.
import asyncio

from pool import Pool

attempts = []


async def query(pool):
    conn = await pool.checkout()
    try:
        await asyncio.sleep(0)
        return "row"
    finally:
        pool.checkin(conn)


async def query_with_timeout():
    attempts.clear()
    pool = Pool(size=1)
    for _ in range(2):
        attempts.append(len(attempts))
        try:
            return await asyncio.wait_for(query(pool), timeout=0.01)  # race
        except TimeoutError:
            pass
