"""The import hook and load_file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from chaossloth.capture import install, load_file, uninstall
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
