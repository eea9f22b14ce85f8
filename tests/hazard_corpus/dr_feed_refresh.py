# expect: dirty-read scenario=page_during_refresh
# A feed refresh clears the item list in place, awaits the upstream, extends it again; a page
# rendered in between is empty.
import asyncio


class Feed:
    def __init__(self):
        self.items = ["post-1", "post-2"]

    async def refresh(self):
        self.items.clear()  # race
        fresh = await self._upstream()
        self.items.extend(fresh)  # race

    async def _upstream(self):
        await asyncio.sleep(0)
        return ["post-3", "post-1", "post-2"]

    async def page(self, n):
        await asyncio.sleep(0)
        shown = self.items[:n]  # race
        assert shown, "empty page rendered"
        return shown


async def page_during_refresh():
    feed = Feed()
    await asyncio.gather(feed.refresh(), feed.page(2))
