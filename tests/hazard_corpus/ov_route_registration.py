# expect: order-violation scenario=early_request
# Routes are registered by an async plugin loader; a request served concurrently looks its
# route up before the plugin registered it.
import asyncio


class Router:
    def __init__(self):
        self.routes = {}

    async def load_plugin(self, path, handler):
        await asyncio.sleep(0)  # import and configure the plugin
        self.routes[path] = handler  # race

    async def dispatch(self, path):
        await asyncio.sleep(0)
        handler = self.routes[path]  # race
        return handler()


async def early_request():
    router = Router()
    results = await asyncio.gather(
        router.load_plugin("/health", lambda: "ok"), router.dispatch("/health")
    )
    assert results[1] == "ok"
