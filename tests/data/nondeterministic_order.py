"""A workload that starts its tasks in an order that changes between executions (every fourth
run of the scenario swaps them), as code that iterates a set of strings does under hash
randomization: under one schedule it does different things, so no exploration of it can be
complete.  The run count lives on `sys`, which is not reset between executions as this
module's globals are."""

import asyncio
import sys

ledger: dict[str, int] = {"a": 0, "b": 0, "operations": 0}


async def deposit(lock: asyncio.Lock, account: str, amount: int) -> None:
    # the tasks start in the order gather created them: after this yield their steps float
    await asyncio.sleep(0)
    async with lock:
        balance = ledger[account]
        await asyncio.sleep(0)
        ledger[account] = balance + amount
        ledger["operations"] += 1


async def scenario() -> None:
    runs = getattr(sys, "_chaossloth_nd_runs", 0) + 1
    sys._chaossloth_nd_runs = runs  # type: ignore[attr-defined]
    order = ["a", "b"] if runs % 4 else ["b", "a"]
    lock = asyncio.Lock()
    await asyncio.gather(*(deposit(lock, account, 10) for account in order))
    assert ledger == {"a": 10, "b": 10, "operations": 2}, ledger
