"""The import hook and load_file."""

from __future__ import annotations

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
