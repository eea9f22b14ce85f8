# expect: lost-update scenario=burst
# A sliding-window rate limiter (limiter.py) prunes by a cutoff into a copy, awaits the
# store, then replaces the list: the other call's entry is lost (the ticker's cancel is cleanup).
import asyncio

from limiter import FakeClock, RateLimiter


async def ticker(clock):
    while True:
        await asyncio.sleep(0.001)
        clock.now += 1


async def burst():
    clock = FakeClock()
    limiter = RateLimiter(clock, limit=5, window=60)
    tick = asyncio.create_task(ticker(clock))
    try:
        await asyncio.gather(limiter.acquire(), limiter.acquire())
    finally:
        tick.cancel()
    assert len(limiter.calls) == 2, f"calls recorded: {limiter.calls}"
