"""aiolimiter's AsyncLimiter(2, 1): four tasks acquire it at once; two go through at once, the
others wait for the bucket to drain (virtual time), and no more than the rate is ever let in
within one period."""

import asyncio

from aiolimiter import AsyncLimiter

CASES = [{"requires": ["aiolimiter==1.2.1"], "expect": "complete"}]


async def scenario():
    limiter = AsyncLimiter(2, 1)
    loop = asyncio.get_running_loop()
    admitted = []

    async def call(i):
        async with limiter:
            admitted.append(loop.time())

    await asyncio.gather(*(call(i) for i in range(4)))
    assert len(admitted) == 4
    admitted.sort()
    # at most 2 within any 1-second window (the limiter's promise), with float slack
    assert admitted[2] - admitted[0] >= 0.5 - 1e-9, admitted
