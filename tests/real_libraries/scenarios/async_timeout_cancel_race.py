"""async-timeout's timeout(): its deadline passes while another task cancels the task at the same
loop time; if that cancel() returned True the task must end cancelled, not with TimeoutError.
Documented bug (issue #229 "aiohttp swallows asyncio.CancelledError during connection timeout"):
once _on_timeout had run, _do_exit turned every CancelledError, an explicit cancel's too, into
TimeoutError. Fixed in 5.0.0 on Python 3.11+ ("Make asyncio_timeout fully compatible with the
standard asyncio.Timeout", #422; closing PR #235 the maintainer: 5.0+ works as asyncio's own)."""

import asyncio

import async_timeout

CASES = [
    {"requires": ["async-timeout==5.0.1"], "expect": "complete"},
    {
        "requires": ["async-timeout==4.0.3"],
        "expect": "fail",
        "hazard": "cancellation",
        # :237 `_on_timeout` sets TIMEOUT; :223 `_do_exit` then sees CancelledError + TIMEOUT and
        # raises TimeoutError (:228) although main's task.cancel() also asked for cancellation
        "lines": ["async_timeout/__init__.py:223", "async_timeout/__init__.py:237"],
    },
]
INSTRUMENT = ["async_timeout"]


async def scenario():
    outcome = []

    async def worker():
        try:
            async with async_timeout.timeout(1):
                await asyncio.sleep(10)
        except TimeoutError:
            outcome.append("timeout")
            raise

    task = asyncio.create_task(worker())
    await asyncio.sleep(1)
    requested = task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        outcome.append("cancelled")
    except TimeoutError:
        pass
    if requested:
        assert outcome == ["cancelled"], f"cancel() returned True but the task got {outcome}"
    else:
        assert outcome == ["timeout"], outcome
