"""aiosqlite runs sqlite in a thread of its own and hands results back to the loop: a workload
ChaosSloth does not control (real file I/O through a thread). It must say so in one line and
exit 2, not explore it."""

import aiosqlite

CASES = [
    {
        "requires": ["aiosqlite==0.20.0"],
        "expect": "refused",
        "message": "thread",
        "known_limitation": (
            "reported as a lost wake-up (exit 1) with a second line on the threads it left "
            "running, not refused in one line (issue 37: threads completing futures)"
        ),
    }
]


async def scenario():
    async with aiosqlite.connect(":memory:") as db:
        await db.execute("create table t (x)")
        await db.execute("insert into t values (1)")
        async with db.execute("select x from t") as cur:
            assert await cur.fetchone() == (1,)
