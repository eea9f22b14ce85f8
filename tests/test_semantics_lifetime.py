"""Instrumentation must not change when objects die (issue 9).

Each case is a small asyncio program whose result depends on object lifetime: a
``WeakValueDictionary`` cache, ``weakref.finalize``, ``__del__`` appending to a log, a weakref
callback, a ``WeakSet`` of subscribers, a reference cycle reclaimed by ``gc.collect()``.  It must
return the same value run plainly with ``asyncio.run`` on the stock loop (default order) and
loaded as the CLI loads it (instrumented) on ChaosSloth's loop in fifo order, which is the stock
order.  A case that fails for a known capture limit goes in ``LIFETIME_GAPS`` as a strict
xfail (none today).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import exec_source

from chaossloth import runner, scenario

_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-lifetime-"))
_COUNTER = itertools.count()

CASES: dict[str, str] = {
    "weakvaluedict_cache": """
        import asyncio
        import weakref


        class Conn:
            def __init__(self, key):
                self.key = key


        class Pool:
            def __init__(self):
                self.cache = weakref.WeakValueDictionary()
                self.created = 0

            def get(self, key):
                c = self.cache.get(key)
                if c is None:
                    c = Conn(key)
                    self.cache[key] = c
                    self.created += 1
                return c


        async def user(pool, log):
            c = pool.get("a")
            await asyncio.sleep(0)
            log.append((c.key, len(pool.cache)))


        async def main():
            pool = Pool()
            log = []
            await user(pool, log)
            await user(pool, log)  # the first Conn died with its user: a second one is made
            await asyncio.gather(user(pool, log), user(pool, log))  # both share one Conn
            return pool.created, log, sorted(pool.cache)
    """,
    "finalize": """
        import asyncio
        import weakref


        class Resource:
            pass


        async def main():
            log = []
            r = Resource()
            weakref.finalize(r, log.append, "closed")
            await asyncio.sleep(0)
            log.append("before")
            del r
            log.append("after")
            return log
    """,
    "del_logs": """
        import asyncio


        class Session:
            def __init__(self, log, name):
                self.log = log
                self.name = name

            def __del__(self):
                self.log.append(("closed", self.name))


        async def handler(log, name):
            s = Session(log, name)
            await asyncio.sleep(0)
            log.append(("served", s.name))


        async def main():
            log = []
            await asyncio.gather(handler(log, "a"), handler(log, "b"))
            log.append("done")
            return log
    """,
    "weakref_callback": """
        import asyncio
        import weakref


        class Node:
            pass


        async def main():
            log = []
            n = Node()
            n.value = 3
            ref = weakref.ref(n, lambda r: log.append("gone"))
            await asyncio.sleep(0)
            log.append(ref() is not None)
            del n
            log.append(ref() is None)
            return log
    """,
    "weakset_subscribers": """
        import asyncio
        import weakref


        class Subscriber:
            def __init__(self):
                self.got = []


        class Bus:
            def __init__(self):
                self.subs = weakref.WeakSet()

            def publish(self, msg):
                for s in list(self.subs):
                    s.got.append(msg)
                return len(self.subs)


        async def client(bus, counts):
            s = Subscriber()
            bus.subs.add(s)
            await asyncio.sleep(0)
            counts.append(bus.publish("hi"))


        async def main():
            bus = Bus()
            counts = []
            await client(bus, counts)
            await client(bus, counts)
            return counts, len(bus.subs)
    """,
    "gc_cycle": """
        import asyncio
        import gc


        class Node:
            def __init__(self, log):
                self.log = log

            def __del__(self):
                self.log.append("collected")


        async def main():
            log = []
            a = Node(log)
            a.me = a
            await asyncio.sleep(0)
            del a
            gc.collect()
            log.append("after collect")
            return log
    """,
    "temporaries_in_a_loop": """
        import asyncio
        import weakref


        class Item:
            def __init__(self, i):
                self.i = i


        async def main():
            live = weakref.WeakSet()
            counts = []
            for i in range(3):
                it = Item(i)
                it.i += 1
                live.add(it)
                await asyncio.sleep(0)
                counts.append(len(live))
            return counts
    """,
    # async-lru's test_alru_exception_reference_cleanup: what a failed task's frame held is
    # freed once the task is, which the runner must not delay by tracking its tasks
    "failed_task_frees_its_locals": """
        import asyncio
        import gc


        class Payload:
            pass


        async def fails(i):
            _ = Payload()
            1 / 0


        async def main():
            await asyncio.gather(*[fails(i) for i in range(3)], return_exceptions=True)
            await asyncio.sleep(0)
            gc.collect()
            return sum(isinstance(o, Payload) for o in gc.get_objects())
    """,
    "finished_task_dies": """
        import asyncio
        import weakref


        async def work():
            return 1


        async def main():
            t = asyncio.get_running_loop().create_task(work())
            ref = weakref.ref(t)
            await t
            del t
            await asyncio.sleep(0)
            return ref() is None
    """,
}

#: cases that fail today, and why (strict: they turn red when fixed)
LIFETIME_GAPS: dict[str, str] = {}


def _run_plain(source: str, name: str) -> Any:
    ns = exec_source(source, f"<plain {name}>", False, f"plain_{name}")
    return ("ok", None, asyncio.run(ns["main"]()))


def _run_instrumented(source: str, name: str) -> Any:
    path = _DIR / f"life_{name}_{next(_COUNTER)}.py"
    path.write_text(source)
    module = scenario.load_module(path)
    r = runner.run_once(module.main, detailed=False)
    failure = (r.failure.kind, r.failure.type_name) if r.failure is not None else None
    return (r.outcome, failure, r.value)


def _params() -> list[Any]:
    out = []
    for name in CASES:
        marks = []
        if name in LIFETIME_GAPS:
            marks.append(pytest.mark.xfail(strict=True, reason=LIFETIME_GAPS[name]))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", _params())
def test_lifetime_dependent_program_behaves_as_on_the_stock_loop(name: str) -> None:
    source = textwrap.dedent(CASES[name])
    assert _run_instrumented(source, name) == _run_plain(source, name)
