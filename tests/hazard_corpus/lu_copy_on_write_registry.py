# expect: lost-update scenario=two_plugins
# A copy-on-write registry: copy the list, await validation, replace the list.
import asyncio


class PluginRegistry:
    def __init__(self):
        self.plugins = ()

    async def validate(self, name):
        await asyncio.sleep(0)
        return name.isidentifier()

    async def register(self, name):
        current = list(self.plugins)  # race
        if await self.validate(name):
            current.append(name)
        self.plugins = tuple(current)  # race


async def two_plugins():
    registry = PluginRegistry()
    await asyncio.gather(registry.register("auth"), registry.register("metrics"))
    assert sorted(registry.plugins) == ["auth", "metrics"], registry.plugins
