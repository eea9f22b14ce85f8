"""aiosqlite runs sqlite in a thread of its own (a Thread subclass blocking on a SimpleQueue,
in C) and hands each result back with call_soon_threadsafe: an external event of unknown
latency. ChaosSloth explores the one placement the thread's events take (delivered when the
loop is idle) and says the exploration is incomplete, naming the thread's events: it neither
calls the waiting task deadlocked nor claims every schedule."""

import aiosqlite

CASES = [
    {
        "requires": ["aiosqlite==0.20.0"],
        "expect": "incomplete",
        "message": "an event from another thread (call_soon_threadsafe)",
    }
]


async def scenario():
    async with aiosqlite.connect(":memory:") as db:
        await db.execute("create table t (x)")
        await db.execute("insert into t values (1)")
        async with db.execute("select x from t") as cur:
            assert await cur.fetchone() == (1,)
