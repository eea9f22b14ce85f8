"""An LRU cache that reserves the slot with a placeholder while the value loads."""

from collections import OrderedDict

LOADING = object()


class LRU:
    def __init__(self, loader, size=2):
        self.loader = loader
        self.size = size
        self.slots = OrderedDict()

    def peek(self, key):
        return self.slots.get(key)  # race

    async def fill(self, key):
        self.slots[key] = LOADING  # race
        value = await self.loader(key)
        self.slots[key] = value  # race
        if len(self.slots) > self.size:
            self.slots.popitem(last=False)
        return value
