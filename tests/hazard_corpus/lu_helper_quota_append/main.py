# expect: lost-update scenario=two_uploads
# Storage quota accounting (quota.py) reads the tenant's usage, awaits the object store, writes
# usage + size: one upload's bytes are lost.
import asyncio

from quota import QuotaBook

keys = []
sizes = []


async def upload(book, tenant, size):
    sizes.append(size)
    keys.append(await book.charge(tenant, size))


async def two_uploads():
    keys.clear()
    sizes.clear()
    book = QuotaBook(limit=100)
    await asyncio.gather(upload(book, "acme", 30), upload(book, "acme", 40))
    assert book.used["acme"] == sum(sizes), f"used {book.used['acme']} after {len(keys)} uploads"
