"""An LRU cache bounded in bytes: `used` tracks the bytes of the cached values."""

from collections import OrderedDict


class LRUCache:
    def __init__(self, loader, max_bytes=1024):
        self.loader = loader
        self.max_bytes = max_bytes
        self.entries = OrderedDict()
        self.used = 0

    async def get(self, key):
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        used = self.used  # race
        value = await self.loader(key)
        self.entries[key] = value
        self.used = used + len(value)  # race
        while self.used > self.max_bytes:
            _, old = self.entries.popitem(last=False)
            self.used -= len(old)
        return value
