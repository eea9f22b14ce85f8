# expect: order-violation scenario=startup
# The session manager creates its session in a startup task; a worker started at the same time
# uses it before it exists.
import asyncio


class Session:
    def __init__(self):
        self.sent = []

    def send(self, msg):
        self.sent.append(msg)


class SessionManager:
    def __init__(self):
        self.session = None

    async def start(self):
        await asyncio.sleep(0)  # authenticate
        self.session = Session()  # race

    async def worker(self, msg):
        await asyncio.sleep(0)
        self.session.send(msg)  # race


async def startup():
    mgr = SessionManager()
    await asyncio.gather(mgr.start(), mgr.worker("hello"))
    assert mgr.session.sent == ["hello"]
