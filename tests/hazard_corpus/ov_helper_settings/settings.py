"""Module-level settings, loaded once at startup by an async loader."""

import asyncio

SETTINGS = None


async def load():
    global SETTINGS
    await asyncio.sleep(0)  # the secrets manager
    SETTINGS = {"db_url": "postgres://db/app", "pool_size": 4}  # race


def get(key):
    return SETTINGS[key]  # race
