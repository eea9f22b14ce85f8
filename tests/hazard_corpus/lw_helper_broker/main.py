# expect: lost-wakeup scenario=config_push
# A pub/sub broker (broker.py) wakes only the subscribers registered when it publishes; a
# listener that subscribes after the publish waits forever.
import asyncio

from broker import Broker

received = []


async def listener(broker):
    await asyncio.sleep(0)
    msg = await broker.next_message("config")
    received.append(msg)


async def pusher(broker):
    await asyncio.sleep(0)
    broker.publish("config", {"version": 2})


async def config_push():
    received.clear()
    broker = Broker()
    await asyncio.gather(listener(broker), pusher(broker))
    assert received == [{"version": 2}]
