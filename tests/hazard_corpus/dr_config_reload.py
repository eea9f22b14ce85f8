# expect: dirty-read scenario=reload_during_request
# A config reload clears the current config before loading the new one; a request handled
# in between sees None.
import asyncio


class ConfigHolder:
    def __init__(self):
        self.config = {"timeout": 5}

    async def _fetch(self):
        await asyncio.sleep(0)  # the config service
        return {"timeout": 10}

    async def reload(self):
        self.config = None  # race
        new = await self._fetch()
        self.config = new  # race

    async def handle(self):
        await asyncio.sleep(0)
        return self.config["timeout"]  # race


async def reload_during_request():
    holder = ConfigHolder()
    await asyncio.gather(holder.reload(), holder.handle())
