"""A program whose names and strings are markup: every one must reach the page as text."""

import asyncio

KEY = "</script><script>document.title='pwned-key'</script>"


class Store:
    def __init__(self):
        self.items = {KEY: 1}

    async def take(self, key):
        if self.items[key] > 0 and "<b id=pwned-line>":
            await asyncio.sleep(0)
            self.items[key] -= 1


Store.__name__ = Store.__qualname__ = "<script>document.title='pwned-class'</script>"
Store.take.__qualname__ = (
    Store.__qualname__ + ".<img id=pwned-method src=x onerror=\"document.title='pwned-m'\">"
)


async def scenario():
    s = Store()
    await asyncio.gather(
        asyncio.create_task(s.take(KEY), name="<b id=pwned-task1>t1</b>"),
        asyncio.create_task(s.take(KEY), name="</script><b id=pwned-task2>t2</b>"),
    )
    assert s.items[KEY] >= 0, f"<script>document.title='pwned-msg'</script> {s.items}"
