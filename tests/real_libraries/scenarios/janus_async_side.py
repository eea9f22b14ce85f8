"""janus.Queue(maxsize=1) used from its async side only: two producers put two items each with
async_q.put (blocking while the queue is full), one consumer takes them with async_q.get; every
item arrives once and each producer's items in order. Then close() while the consumer waits in a
fifth get: the wake-up goes through loop.call_soon_threadsafe to a notifier task that janus keeps
in Queue._pending (its done-callback removes it); the get raises AsyncQueueShutDown, and after
wait_closed() nothing is pending (queue.closed). That needs call_soon FIFO across tasks: the
finished notifier's done-callback, queued first, runs before the _on_completion that wait()
queues after it saw the task done (a false order violation before)."""

import asyncio

import janus

CASES = [
    {
        "requires": ["janus==2.0.0"],
        "expect": "complete",
    }
]
INSTRUMENT = ["janus"]


async def scenario():
    queue = janus.Queue(maxsize=1)
    got = []
    all_in = asyncio.Event()

    async def producer(p):
        for i in range(2):
            await queue.async_q.put((p, i))

    async def consumer():
        while True:
            try:
                item = await queue.async_q.get()
            except janus.AsyncQueueShutDown:
                return "shut down"
            got.append(item)
            if len(got) == 4:
                all_in.set()

    reader = asyncio.create_task(consumer())
    await asyncio.gather(producer("a"), producer("b"))
    await all_in.wait()
    queue.close()
    await queue.wait_closed()
    assert await reader == "shut down"
    assert queue.closed  # wait_closed() waited for the notifier task, which left _pending
    assert sorted(got) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)], got
    assert [i for p, i in got if p == "a"] == [0, 1], got
    assert [i for p, i in got if p == "b"] == [0, 1], got
