# expect: lost-update scenario=register_and_dispatch
# Event handlers are registered into a copy-on-write table; two concurrent registrations each
# publish a copy without the other's handler, and dispatching the lost one raises KeyError.
import asyncio


class EventBus:
    def __init__(self):
        self.handlers = {}

    async def _load(self, name):
        await asyncio.sleep(0)  # import the handler's module
        return lambda payload: f"{name}:{payload}"

    async def register(self, event, name):
        table = dict(self.handlers)  # race
        table[event] = await self._load(name)
        self.handlers = table  # race

    def dispatch(self, event, payload):
        return self.handlers[event](payload)


async def register_and_dispatch():
    bus = EventBus()
    await asyncio.gather(bus.register("signup", "mailer"), bus.register("login", "audit"))
    bus.dispatch("signup", "ann")
    bus.dispatch("login", "ann")
