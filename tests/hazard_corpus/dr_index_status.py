# expect: dirty-read scenario=search_during_rebuild
# A search index marks itself "rebuilding" during a rebuild; a search in between refuses.
import asyncio


class SearchIndex:
    def __init__(self):
        self.state = "ready"
        self.docs = ["a", "b"]

    async def rebuild(self, docs):
        self.state = "rebuilding"  # race
        await asyncio.sleep(0)  # tokenize
        self.docs = sorted(docs)
        self.state = "ready"  # race

    async def search(self, term):
        await asyncio.sleep(0)
        if self.state != "ready":  # race
            raise RuntimeError("index not ready")
        return [d for d in self.docs if term in d]


async def search_during_rebuild():
    index = SearchIndex()
    await asyncio.gather(index.rebuild(["c", "a", "b"]), index.search("a"))
