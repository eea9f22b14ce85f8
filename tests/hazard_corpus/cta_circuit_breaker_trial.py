# expect: check-then-act scenario=two_requests_half_open
# A half-open circuit breaker must let ONE trial request through; the flag is set after an await.
import asyncio


class CircuitBreaker:
    def __init__(self):
        self.state = "half-open"
        self.trial_running = False
        self.trials = 0

    async def _record(self):
        await asyncio.sleep(0)

    async def call(self, fn):
        if self.state == "open":
            raise RuntimeError("circuit open")
        if self.state == "half-open":
            if self.trial_running:  # race
                raise RuntimeError("trial in progress")
            await self._record()
            self.trial_running = True  # race
            self.trials += 1
        return await fn()


async def ping():
    await asyncio.sleep(0)
    return "pong"


async def two_requests_half_open():
    breaker = CircuitBreaker()
    await asyncio.gather(breaker.call(ping), breaker.call(ping), return_exceptions=True)
    assert breaker.trials == 1, f"{breaker.trials} trial requests in half-open state"
