# expect: check-then-act scenario=two_writers
# A readers-writer lock (rwlock.py) awaits between the writer check and taking the lock: two
# writers hold it at once.
import asyncio

from rwlock import RWLock

inside = {"writers": 0, "max": 0}


async def write(lock, doc, text):
    await asyncio.sleep(0)  # render the text
    await lock.acquire_write()
    try:
        inside["writers"] += 1
        inside["max"] = max(inside["max"], inside["writers"])
        await asyncio.sleep(0)
        doc.append(text)
        inside["writers"] -= 1
    finally:
        lock.release_write()


async def two_writers():
    inside.update(writers=0, max=0)
    lock, doc = RWLock(), []
    await asyncio.gather(write(lock, doc, "a"), write(lock, doc, "b"))
    assert inside["max"] == 1, f"{inside['max']} writers held the lock at once"
