"""The import hook and load_file."""

from __future__ import annotations

import asyncio
import collections
import sys
from pathlib import Path
from typing import Any

import pytest

from chaossloth.capture import importer, install, load_file, uninstall
from chaossloth.errors import InputError


def test_load_file_instruments_and_keeps_lines(tmp_path: Path) -> None:
    f = tmp_path / "user_mod_a.py"
    f.write_text("class O:\n    pass\n\ndef boom(o):\n    return o.missing\n")
    mod = load_file(f)
    assert "_cs_ga" in vars(mod)
    assert sys.modules[mod.__name__] is mod
    with pytest.raises(AttributeError) as info:
        mod.boom(mod.O())
    frame = info.traceback[-1]
    assert Path(str(frame.path)) == f.resolve() and frame.lineno + 1 == 5


def test_syntax_error_is_an_input_error(tmp_path: Path) -> None:
    f = tmp_path / "user_bad.py"
    f.write_text("def f(:\n    pass\n")
    with pytest.raises(InputError) as info:
        load_file(f)
    assert "user_bad.py:1: syntax error" in str(info.value)
    with pytest.raises(InputError):
        load_file(tmp_path / "absent.py")


def test_siblings_are_instrumented_libraries_are_not(tmp_path: Path) -> None:
    (tmp_path / "user_helper_b.py").write_text("def get(d):\n    return d['k']\n")
    main = tmp_path / "user_main_b.py"
    main.write_text("import json\nimport user_helper_b\n")
    mod = load_file(main)
    assert "_cs_gi" in vars(mod.user_helper_b)
    assert "_cs_ga" not in vars(mod.json)


def test_finder_by_module_name(tmp_path: Path) -> None:
    pkg = tmp_path / "user_pkg_c"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import inner\n")
    (pkg / "inner.py").write_text("X = {}\ndef put(k):\n    X[k] = 1\n")
    sys.path.insert(0, str(tmp_path))
    finder = install(modules=["user_pkg_c"])
    try:
        import user_pkg_c  # type: ignore[import-not-found]

        assert "_cs_si" in vars(user_pkg_c.inner)
        user_pkg_c.inner.put("a")
        assert user_pkg_c.inner.X == {"a": 1}
    finally:
        uninstall(finder)
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("user_pkg_c")]:
            del sys.modules[name]


RESET_MODULE = """\
BIG = 10 ** 30
LOG = []
NAME = "x"


class Conf:
    LIMIT = 10 ** 20
    ITEMS = [1, 2]

    def method(self):
        return self.LIMIT
"""


@pytest.fixture
def reset_module(tmp_path: Path) -> Any:
    f = tmp_path / "user_reset_mod.py"
    f.write_text(RESET_MODULE)
    importer.begin_program()
    try:
        mod = load_file(f)
        importer.program_loaded()
        yield mod
    finally:
        importer.end_program()
        sys.modules.pop(mod.__name__, None)


def test_reset_puts_back_the_identical_objects_every_time(reset_module: Any) -> None:
    """Rebinding to an equal but distinct object, adding, deleting and re-adding names (which
    reorders the namespace), in place changes of containers: each reset puts back the very
    objects of the initial state, including after a reset that had to rebind (the snapshot
    of the initial state taken again) and after resets with nothing to rebind."""
    mod = reset_module
    big, log, conf = mod.BIG, mod.LOG, mod.Conf
    limit, items, method = conf.LIMIT, conf.ITEMS, conf.__dict__["method"]
    names = list(vars(mod))

    def check() -> None:
        assert mod.BIG is big and mod.LOG is log and mod.Conf is conf
        assert log == [] and items == [1, 2]
        assert conf.LIMIT is limit and conf.ITEMS is items and conf.__dict__["method"] is method
        assert sorted(vars(mod)) == sorted(names)
        assert not hasattr(conf, "EXTRA")

    changes = [
        lambda: setattr(mod, "BIG", int(str(10**30))),  # equal, not identical
        lambda: log.append(1),  # in place only
        lambda: setattr(mod, "ADDED", 1),
        lambda: (delattr(mod, "NAME"), setattr(mod, "NAME", "x")),  # reordered
        lambda: None,  # nothing at all
        lambda: setattr(conf, "LIMIT", int(str(10**20))),
        lambda: setattr(conf, "EXTRA", 1),
        lambda: (delattr(conf, "method"), setattr(conf, "method", method)),
        lambda: items.append(3),
        lambda: setattr(mod, "LOG", [9]),
        lambda: None,
        lambda: setattr(mod, "BIG", 0),
    ]
    for change in changes:
        change()
        importer.reset_modules()
        check()
        importer.reset_modules()  # a reset of the reset state changes nothing
        check()


SHARING_MODULE = """\
import user_shared_core as core


class Definition:
    def __init__(self, impl):
        self.impl = impl


LOCAL = Definition(core.STRING)
REGISTRY = {str: Definition(core.STRING), "local": LOCAL, "made": [Definition(None)]}
"""


def test_reset_keeps_the_objects_modules_bind_by_identity(tmp_path: Path) -> None:
    """A registry holding another module's object (graphql-core's String scalar in
    strawberry's DEFAULT_SCALAR_REGISTRY), or one this module binds itself, is put back with
    those very objects: a deep copy of them made a second String scalar, and the library's
    identity check failed on the first run of the stock order.  Objects no module binds are
    still put back as copies of their initial state."""
    (tmp_path / "user_shared_core.py").write_text("class Scalar:\n    pass\n\nSTRING = Scalar()\n")
    f = tmp_path / "user_sharing_mod.py"
    f.write_text(SHARING_MODULE)
    sys.path.insert(0, str(tmp_path))
    importer.begin_program()
    try:
        mod = load_file(f)
        importer.program_loaded()
        core = sys.modules["user_shared_core"]
        made = mod.REGISTRY["made"][0]
        for _ in range(3):
            mod.REGISTRY["extra"] = 1
            made.impl = "changed"
            importer.reset_modules()
            assert "extra" not in mod.REGISTRY
            assert mod.REGISTRY[str].impl is core.STRING
            assert mod.REGISTRY["local"] is mod.LOCAL and mod.LOCAL.impl is core.STRING
            assert mod.REGISTRY["made"][0].impl is None
    finally:
        importer.end_program()
        sys.path.remove(str(tmp_path))
        for name in ("user_sharing_mod", "user_shared_core"):
            sys.modules.pop(name, None)


def test_reset_skips_the_rebinding_pass_when_nothing_was_rebound(
    reset_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot comparison decides: the full pass (restore) runs only when a name was
    rebound, added or removed; containers are put back in either case."""
    full: list[str] = []
    real = importer._Namespace.restore

    def counting(self: Any, ns: Any, setter: Any = None, deleter: Any = None) -> None:
        full.append("class" if setter is not None else "globals")
        real(self, ns, setter, deleter)

    monkeypatch.setattr(importer._Namespace, "restore", counting)
    importer.reset_modules()
    reset_module.LOG.append(1)
    importer.reset_modules()
    assert full == [] and reset_module.LOG == []
    reset_module.Conf.LIMIT = 3
    importer.reset_modules()
    assert full == ["class"] and reset_module.Conf.LIMIT == 10**20
    reset_module.ADDED = 1
    importer.reset_modules()
    assert full == ["class", "globals"] and not hasattr(reset_module, "ADDED")
    importer.reset_modules()
    assert full == ["class", "globals"]


IMPORT_OBJECTS_MODULE = """\
import asyncio
import collections
import types


class Cache:
    def __init__(self):
        self.entries = {}
        self.lock = asyncio.Lock()
        self.hits = 0


class Service:
    shared_lock = asyncio.Lock()  # a class attribute made at import


class Registry(dict):
    def __setitem__(self, key, value):  # an override the reset must not run
        raise AssertionError("the reset ran the program's __setitem__")


CACHE = Cache()
REGISTRY = Registry(static=1)
QUEUE = asyncio.Queue()
CONDITION = asyncio.Condition()
RECENT = collections.deque(maxlen=3)
LIBRARY_OBJECT = types.SimpleNamespace(n=0)  # a library class's instance: not reset
"""

REGISTRY_MODULE = "HANDLERS = {}\n\ndef register(name):\n    def deco(fn):\n        HANDLERS[name] = fn\n        return fn\n    return deco\n"
HANDLERS_MODULE = (
    "import user_registry_mod as r\n\n@r.register('ping')\ndef ping():\n    return 'pong'\n"
)


def test_reset_puts_back_objects_made_at_import(tmp_path: Path) -> None:
    """Instances of the program's classes and asyncio's primitives made at import (a module's
    globals, a class attribute, an object's attributes) get their attributes back, so a lock or
    queue an execution bound to its loop starts unbound again; a registry another module fills
    at import keeps what the imports put in it; a library class's instance is left alone."""
    (tmp_path / "user_registry_mod.py").write_text(REGISTRY_MODULE)
    (tmp_path / "user_handlers_mod.py").write_text(HANDLERS_MODULE)
    f = tmp_path / "user_objects_mod.py"
    f.write_text(IMPORT_OBJECTS_MODULE + "import user_handlers_mod\n")
    sys.path.insert(0, str(tmp_path))
    finder = install(paths=[str(tmp_path)])
    importer.begin_program()
    try:
        mod = load_file(f)
        importer.program_loaded()  # what scenario.load_instrumented does once the file ran
        registry = sys.modules["user_registry_mod"]
        assert list(registry.HANDLERS) == ["ping"]

        async def use() -> None:
            async with mod.CACHE.lock:
                mod.CACHE.entries["k"] = 1
                mod.CACHE.hits += 1
                mod.CACHE.extra = True
            await mod.QUEUE.put(1)
            async with mod.CONDITION:
                mod.CONDITION.notify_all()
            async with mod.Service.shared_lock:
                pass
            mod.RECENT.append(1)
            dict.__setitem__(mod.REGISTRY, "added", 2)
            mod.REGISTRY.tag = "x"
            mod.LIBRARY_OBJECT.n += 1
            registry.HANDLERS["late"] = None

        for run in range(3):
            asyncio.run(use())  # a fresh loop each time, as every execution has
            importer.reset_modules()
            assert mod.CACHE.entries == {} and mod.CACHE.hits == 0
            assert not hasattr(mod.CACHE, "extra")
            assert mod.QUEUE.qsize() == 0 and not mod.QUEUE._unfinished_tasks
            assert mod.CACHE.lock._loop is None and mod.QUEUE._loop is None
            assert mod.Service.shared_lock._loop is None and mod.CONDITION._loop is None
            assert list(mod.RECENT) == [] and mod.RECENT.maxlen == 3
            assert dict(mod.REGISTRY) == {"static": 1} and not hasattr(mod.REGISTRY, "tag")
            assert mod.LIBRARY_OBJECT.n == run + 1
            assert list(registry.HANDLERS) == ["ping"]
    finally:
        importer.end_program()
        uninstall(finder)
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("user_")]:
            del sys.modules[name]


COUNTERS_MODULE = """\
import collections
import itertools
import random

IDS = itertools.count(1)
STEPPED = itertools.count(10, 5)
RNG = random.Random(7)
HITS = collections.defaultdict(int)
SEEN = collections.Counter()
ORDER = collections.OrderedDict()


class Order:
    numbers = itertools.count()

    def __init__(self):
        self.ids = itertools.count(100)


ORDER_MAKER = Order()
"""


def test_reset_puts_back_counters_generators_and_dict_subclasses(tmp_path: Path) -> None:
    """An itertools.count made at import starts where it was in every execution (a fresh count
    where the initial one advanced), a seeded random.Random draws the same numbers, and the
    standard dict subclasses get their contents back."""
    f = tmp_path / "user_counters_mod.py"
    f.write_text(COUNTERS_MODULE)
    importer.begin_program()
    try:
        mod = load_file(f)
        importer.program_loaded()
        first = None
        for _ in range(3):
            drawn = (
                next(mod.IDS),
                next(mod.IDS),
                next(mod.STEPPED),
                mod.RNG.random(),
                next(mod.Order.numbers),
                next(mod.ORDER_MAKER.ids),
            )
            mod.HITS["a"] += 1
            mod.SEEN["a"] += 2
            mod.ORDER["x"] = 1
            assert first is None or drawn == first, (drawn, first)
            first = drawn
            importer.reset_modules()
            assert not mod.HITS and not mod.SEEN and not mod.ORDER
            assert type(mod.HITS) is collections.defaultdict and mod.HITS.default_factory is int
        assert first[:3] == (1, 2, 10) and first[4:] == (0, 100)
    finally:
        importer.end_program()
        sys.modules.pop("user_counters_mod", None)


def test_instrumented_code_is_compiled_once_per_source() -> None:
    """A process instruments the same file for every program it loads (the pytest plugin, per
    test): the code object is cached by file name and source, and a changed source compiles
    anew."""
    from chaossloth.capture.instrument import compile_instrumented

    first = compile_instrumented(b"x = 1\n", "/nowhere/cached_mod.py")
    assert compile_instrumented(b"x = 1\n", "/nowhere/cached_mod.py") is first
    other = compile_instrumented(b"x = 2\n", "/nowhere/cached_mod.py")
    assert other is not first
    ns: dict[str, object] = {}
    exec(other, ns)  # noqa: S102
    assert ns["x"] == 2
