# expect: cancellation scenario=client_drops
# A chat handler marks the user as typing, sends the indicator, then unmarks; the connection
# watchdog cancels the handler when the client drops, leaving the user "typing" forever.
import asyncio
import contextlib


class ChatRoom:
    def __init__(self):
        self.typing = set()

    async def handle(self, user):
        self.typing.add(user)  # race
        await asyncio.sleep(0)  # race
        self.typing.discard(user)


async def watchdog(handler_task):
    await asyncio.sleep(0)  # the socket reports the disconnect
    handler_task.cancel()  # race


async def client_drops():
    room = ChatRoom()
    handler = asyncio.create_task(room.handle("ann"))
    await watchdog(handler)
    with contextlib.suppress(asyncio.CancelledError):
        await handler
    assert not room.typing, f"still typing: {room.typing}"
