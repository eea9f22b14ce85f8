# expect: dirty-read scenario=peek_during_fill
# An LRU cache (lru.py) reserves the slot with a placeholder while the value loads; a page
# rendered in between shows the placeholder.
import asyncio

from lru import LOADING, LRU

served = []


async def load(key):
    await asyncio.sleep(0)
    return key.upper()


async def render(cache, key):
    await asyncio.sleep(0)
    value = cache.peek(key)
    served.append(value)
    assert value is not LOADING, "rendered a placeholder"


async def peek_during_fill():
    served.clear()
    cache = LRU(load)
    cache.slots["home"] = "HOME-old"
    await asyncio.gather(cache.fill("home"), render(cache, "home"))
