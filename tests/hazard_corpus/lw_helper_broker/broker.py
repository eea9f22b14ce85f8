"""An in-process pub/sub broker: publish wakes the subscribers registered at that moment."""

import asyncio


class Broker:
    def __init__(self):
        self.subscribers = {}
        self.last = {}

    async def next_message(self, topic):
        event = asyncio.Event()
        self.subscribers.setdefault(topic, []).append(event)
        await event.wait()  # race
        return self.last[topic]

    def publish(self, topic, msg):
        self.last[topic] = msg
        for event in self.subscribers.pop(topic, []):  # race
            event.set()
