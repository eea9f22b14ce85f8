# expect: deadlock scenario=update_and_rotate
# A profile update takes the user lock then the audit lock; the audit-log rotation takes them
# in the other order.
import asyncio


class Service:
    def __init__(self):
        self.user_lock = asyncio.Lock()
        self.audit_lock = asyncio.Lock()
        self.profile = {}
        self.audit = []

    async def update_profile(self, key, value):
        async with self.user_lock:
            self.profile[key] = value
            await asyncio.sleep(0)
            async with self.audit_lock:  # race
                self.audit.append(("set", key))

    async def rotate_audit(self):
        async with self.audit_lock:
            old, self.audit = self.audit, []
            await asyncio.sleep(0)
            async with self.user_lock:  # race
                self.profile["audit_rotated"] = len(old)


async def update_and_rotate():
    svc = Service()
    await asyncio.gather(svc.update_profile("email", "a@b.c"), svc.rotate_audit())
