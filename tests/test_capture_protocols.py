"""Item and attribute protocols run by code that does not record itself.

``obj[k]``, ``obj[k] = v``, ``del obj[k]``, ``k in obj`` and ``obj.name = v`` are recorded as
accesses of the key (or the attribute): what the builtin containers' own slots do.  When the
type's dunder is a library's Python code (``weakref.WeakValueDictionary``,
``collections.UserDict``, an LRU cache, a model tracking the fields set) or a C type the hooks
do not model, the operation may touch anything of its object (an insertion that changes the
iteration order, an eviction, a recency list updated by a lookup): the hooks record it as a
write of the whole object (ext/hooks.c, "opaque item and attribute protocols") and of
everything reachable from it, as for any call of such code: it may change what the object
holds, which another task reads through an alias (W_ARG walks, in "walks of object graphs").

Each program has two tasks, each doing one operation with its own key after a yield; DPOR must
reach the outcomes brute force reaches.  The classes of the "library" below are compiled under
a file name no instrumentation covers, as an installed package's are.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
from test_capture_order import _TWO_TASKS, _explore
from test_loop_model import load

_LIBRARY = '''
import collections


class LRU:
    """A cache of `size` entries whose lookup makes the key the most recent."""

    def __init__(self, size):
        self.size = size
        self.data = collections.OrderedDict()

    def __getitem__(self, k):
        self.data.move_to_end(k)
        return self.data[k]

    def __setitem__(self, k, v):
        self.data[k] = v
        self.data.move_to_end(k)
        while len(self.data) > self.size:
            self.data.popitem(last=False)

    def __contains__(self, k):
        return k in self.data

    def __iter__(self):
        return iter(self.data)


class Model:
    """Remembers the order its fields were set in."""

    def __init__(self):
        object.__setattr__(self, "fields_set", [])

    def __setattr__(self, name, value):
        self.fields_set.append(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self.fields_set.append("-" + name)
        object.__delattr__(self, name)


class Journal(dict):
    """A dict that logs its deletions and its membership tests."""

    def __init__(self, *a):
        super().__init__(*a)
        self.log = []

    def __delitem__(self, k):
        self.log.append(k)
        super().__delitem__(k)

    def __contains__(self, k):
        self.log.append(k)
        return super().__contains__(k)


class Bag:
    def __init__(self):
        self.items = []

    def put(self, k):
        self.items.append(k)

    def __setitem__(self, k, v):
        self.items.append(k)


class SlotBag:
    __slots__ = ("items",)

    def __init__(self):
        self.items = []

    def put(self, k):
        self.items.append(k)


class Shelf:
    """Keeps its lists in a dict: what it changes is two objects away from it."""

    def __init__(self):
        self.bins = {"x": []}

    def put(self, k):
        self.bins["x"].append(k)


class Counter:
    """A method named like a pure query that changes its object."""

    def __init__(self):
        self.calls = []

    def count(self):
        self.calls.append(1)
        return len(self.calls)


def plugin_class():
    """A class whose classmethod appends to a list its base holds (a fresh pair per call)."""

    class Registry:
        handlers = {"x": []}

        @classmethod
        def register(cls, k):
            cls.handlers["x"].append(k)

    class Plugins(Registry):
        pass

    return Plugins


class Lazy:
    """Properties, a descriptor and a fallback lookup whose code changes the object."""

    def __init__(self):
        self.items = []

    @property
    def n(self):
        self.items.append("n")
        return len(self.items)

    @n.setter
    def n(self, v):
        self.items.append(v)

    @n.deleter
    def n(self):
        self.items.append("-")

    def __getattr__(self, name):
        self.items.append(name)
        return len


class Counted:
    """A descriptor counting its reads in the instance."""

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        obj.items.append("c")
        return len(obj.items)


class Watched:
    def __init__(self):
        self.items = []

    hits = Counted()
    label = "w"

    def __getattribute__(self, name):
        if name != "items":
            object.__getattribute__(self, "items").append(name)
        return object.__getattribute__(self, name)


def fill(obj, k):
    obj.items.append(k)


class Fallback(dict):
    """A dict whose missing keys are inserted with their default (a library's __missing__)."""

    def __missing__(self, k):
        self[k] = 0
        return 0
'''


def installed_library(name: str, source: str) -> Iterator[types.ModuleType]:
    """`source` imported as the module `name`, from a file name no instrumentation covers (as an
    installed package's), for the duration of the generator."""
    mod = types.ModuleType(name)
    exec(compile(source, f"<site-packages>/{name}.py", "exec"), vars(mod))  # noqa: S102
    sys.modules[name] = mod
    yield mod
    del sys.modules[name]


@pytest.fixture(autouse=True, scope="module")
def library() -> Iterator[types.ModuleType]:
    yield from installed_library("cs_protocol_library", _LIBRARY)


#: what every program's setup starts with (the rest of the program: test_capture_order's)
_PRELUDE = """
import weakref
import cs_protocol_library as lib

class Obj:
    pass

OBJS = {'a': Obj(), 'b': Obj()}
"""

#: name -> (setup defining make(), the operation on s and k, what the end observes, outcomes)
OPAQUE: dict[str, tuple[str, str, str, int]] = {
    "cached_property computing": (
        (
            "import functools\n\n"
            "class C:\n"
            "    @functools.cached_property\n    def a(self): return 1\n"
            "    @functools.cached_property\n    def b(self): return 2\n\n"
            "def make(): return C()"
        ),
        "    getattr(s, k)",
        "tuple(vars(s))",
        2,
    ),
    "WeakValueDictionary store": (
        "def make(): return weakref.WeakValueDictionary()",
        "    s[k] = OBJS[k]",
        "tuple(s.keys())",
        2,
    ),
    "UserDict store": (
        "def make(): return collections.UserDict()",
        "    s[k] = 1",
        "tuple(s)",
        2,
    ),
    "LRU store evicts": ("def make(): return lib.LRU(1)", "    s[k] = 1", "tuple(s)", 2),
    "LRU lookup reorders": (
        "def make():\n    c = lib.LRU(2)\n    c['a'] = c['b'] = 0\n    return c",
        "    s[k]",
        "tuple(s)",
        2,
    ),
    "LRU membership then store": (
        "def make(): return lib.LRU(1)",
        "    if k not in s:\n        s[k] = 1",
        "tuple(s)",
        2,
    ),
    "model fields set": (
        "def make(): return lib.Model()",
        "    setattr(s, k, 1)",
        "tuple(s.fields_set)",
        2,
    ),
    "model attribute stores": (
        "def make(): return lib.Model()",
        "    if k == 'a':\n        s.a = 1\n    else:\n        s.b = 1",
        "tuple(s.fields_set)",
        2,
    ),
    "model attribute deletions": (
        "def make():\n    m = lib.Model()\n    m.a = m.b = 0\n    return m",
        "    if k == 'a':\n        del s.a\n    else:\n        del s.b",
        "tuple(s.fields_set)",
        2,
    ),
    "journal deletions": (
        "def make(): return lib.Journal({'a': 0, 'b': 0})",
        "    del s[k]",
        "tuple(s.log)",
        2,
    ),
    "journal membership": (
        "def make(): return lib.Journal()",
        "    k in s",
        "tuple(s.log)",
        2,
    ),
    "library __missing__ inserts": (
        "def make(): return lib.Fallback()",
        "    s[k]",
        "tuple(s)",
        2,
    ),
}

#: operations the builtin slots do exactly: still independent (one execution)
PRECISE: dict[str, tuple[str, str, str]] = {
    "Enum values, properties of instrumented code, namedtuple fields": (
        (
            "import enum\n\n"
            "class Color(enum.Enum):\n    RED = 1\n\n"
            "Point = collections.namedtuple('Point', 'a b')\n\n"
            "class P:\n    def __init__(self): self.d = {'a': 0, 'b': 0}\n"
            "    @property\n    def red(self): return Color.RED\n"
            "    @property\n    def point(self): return Point(1, 2)\n\n"
            "def make(): return P()"
        ),
        "    getattr(s.point, k) + s.red.value + len(s.red.name)",
        "tuple(s.d.items())",
    ),
    "dict subclass updates": (
        "class D(dict):\n    pass\n\ndef make(): return D(a=0, b=0)",
        "    s[k] = 1",
        "tuple(s.items())",
    ),
    "Counter lookups": (
        "def make(): return collections.Counter(a=1)",
        "    s[k]",
        "tuple(s.items())",
    ),
    "OrderedDict updates": (
        "def make(): return collections.OrderedDict(a=0, b=0)",
        "    s[k] = 1",
        "tuple(s.items())",
    ),
    "instrumented __setitem__": (
        (
            "class Store:\n    def __init__(self):\n        self.d = {'a': 0, 'b': 0}\n"
            "    def __setitem__(self, k, v):\n        self.d[k] = v\n\n"
            "def make(): return Store()"
        ),
        "    s[k] = 1",
        "tuple(s.d.items())",
    ),
}


@pytest.mark.parametrize("name", sorted(OPAQUE))
def test_opaque_protocols_are_whole_writes(name: str) -> None:
    setup, op, observe, outcomes = OPAQUE[name]
    module = load(_TWO_TASKS.format(setup=_PRELUDE + setup, op=op, observe=observe))
    brute, _ = _explore(module, "exhaustive")
    dpor, executions = _explore(module, "dpor")
    assert len(brute) == outcomes
    assert dpor == brute
    assert executions == outcomes


@pytest.mark.parametrize("name", sorted(PRECISE))
def test_modelled_protocols_stay_keyed(name: str) -> None:
    setup, op, observe = PRECISE[name]
    module = load(_TWO_TASKS.format(setup=_PRELUDE + setup, op=op, observe=observe))
    brute, _ = _explore(module, "exhaustive")
    dpor, executions = _explore(module, "dpor")
    assert dpor == brute
    assert len(brute) == 1
    assert executions == 1


#: code that does not record itself changes what its receiver or argument holds, which the other
#: task reads through an alias taken before its yield: the hooks walk what such code can reach
#: (name -> (make(), the operation, the alias, what is read through it))
REACHABLE: dict[str, tuple[str, str, str, str]] = {
    "a method's receiver": ("lib.Bag()", "s.put('a')", "s.items", "len(items)"),
    "an opaque __setitem__'s object": ("lib.Bag()", "s['a'] = 1", "s.items", "len(items)"),
    "a slot of the receiver": ("lib.SlotBag()", "s.put('a')", "s.items", "len(items)"),
    "a list in a dict of the receiver": ("lib.Shelf()", "s.put('a')", "s.bins", "len(items['x'])"),
    "an argument's attribute": ("Plain()", "lib.fill(s, 'a')", "s.items", "len(items)"),
    "a method named like a query": ("lib.Counter()", "s.count()", "s.calls", "len(items)"),
    "a property's getter": ("lib.Lazy()", "s.n", "s.items", "len(items)"),
    "a property's setter": ("lib.Lazy()", "s.n = 1", "s.items", "len(items)"),
    "a property's deleter": ("lib.Lazy()", "del s.n", "s.items", "len(items)"),
    "a __getattr__": ("lib.Lazy()", "s.missing", "s.items", "len(items)"),
    "a __getattr__ through getattr()": (
        "lib.Lazy()",
        "getattr(s, 'missing')",
        "s.items",
        "len(items)",
    ),
    "a __getattr__ through a method call": ("lib.Lazy()", "s.missing([])", "s.items", "len(items)"),
    "a descriptor's __get__": ("lib.Watched()", "s.hits", "s.items", "len(items)"),
    "a __getattribute__": ("lib.Watched()", "s.label", "s.items", "len(items)"),
    "a base's class attribute": (
        "lib.plugin_class()",
        "s.register('a')",
        "s.handlers['x']",
        "len(items)",
    ),
}

_ALIAS = """
import asyncio
import cs_protocol_library as lib

class Plain:
    def __init__(self):
        self.items = []

async def changer(s):
    await asyncio.sleep(0)
    {op}

async def reader(s, box):
    items = {alias}
    await asyncio.sleep(0)
    box["final"] = {read}

async def main(box):
    s = {make}
    await asyncio.gather(changer(s), reader(s, box))
"""


@pytest.mark.parametrize("name", sorted(REACHABLE))
def test_what_opaque_code_can_reach_is_written(name: str) -> None:
    make, op, alias, read = REACHABLE[name]
    module = load(_ALIAS.format(make=make, op=op, alias=alias, read=read))
    brute, _ = _explore(module, "exhaustive")
    dpor, _ = _explore(module, "dpor")
    assert len(brute) == 2
    assert dpor == brute
