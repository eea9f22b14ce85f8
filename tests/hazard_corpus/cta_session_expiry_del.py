# expect: check-then-act scenario=expire_twice
# Two expiry sweeps: each sees the session, audits, deletes: the second `del` raises KeyError.
import asyncio


class SessionStore:
    def __init__(self):
        self.sessions = {"s1": {"user": "ann"}}
        self.audit_log = []

    async def audit(self, sid):
        await asyncio.sleep(0)
        self.audit_log.append(sid)

    async def expire(self, sid):
        if sid in self.sessions:  # race
            await self.audit(sid)
            del self.sessions[sid]  # race


async def expire_twice():
    store = SessionStore()
    await asyncio.gather(store.expire("s1"), store.expire("s1"))
