# expect: lost-update scenario=burst
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
