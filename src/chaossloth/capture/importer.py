"""The import hook that instruments the user's modules, and ``load_file`` for the CLI.

Only modules chosen by the caller are instrumented: a file given by path, the modules found in
the directories given to :func:`install` (never anything under ``site-packages`` or the
standard library unless its name is passed explicitly), and modules named explicitly.
Instrumented code is compiled from source every time (no ``.pyc`` is read or written), with the
real filename so that tracebacks and ``linecache`` show the user's lines.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from chaossloth import _core
from chaossloth.capture.instrument import compile_instrumented, hook_namespace
from chaossloth.errors import InputError

#: co_filename of every instrumented module; the C hooks hold the same set object
INSTRUMENTED_FILES: set[str] = set()
_lock = threading.Lock()
_files_registered = False


def _register_file(filename: str) -> None:
    global _files_registered
    with _lock:
        INSTRUMENTED_FILES.add(filename)
        if not _files_registered:
            _core.set_instrumented_files(INSTRUMENTED_FILES)
            _files_registered = True


def _library_dirs() -> list[str]:
    out = []
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            out.append(os.path.realpath(p))
    return out


class InstrumentingLoader(importlib.machinery.SourceFileLoader):
    """A source loader whose code is the instrumented ``ast`` of the file."""

    def source_to_code(self, data: Any, path: Any, *, _optimize: int = -1) -> Any:  # type: ignore[override]
        return compile_instrumented(data, str(path))

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        return self.source_to_code(data, path)

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__.update(hook_namespace())
        filename = self.get_filename(module.__name__)
        _register_file(str(filename))
        super().exec_module(module)


class CaptureFinder(importlib.abc.MetaPathFinder):
    """Finds the modules to instrument: names in `modules` (and their submodules), and source
    files under `paths` that are not part of the installed libraries."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = (),
                 modules: Iterable[str] = ()) -> None:  # fmt: skip
        self.paths = [os.path.realpath(p) for p in paths]
        self.modules = set(modules)
        self.excluded = _library_dirs()

    def _wanted_name(self, fullname: str) -> bool:
        return any(fullname == m or fullname.startswith(m + ".") for m in self.modules)

    def _wanted_file(self, origin: str) -> bool:
        real = os.path.realpath(origin)
        if any(real.startswith(d + os.sep) for d in self.excluded):
            return False
        return any(real.startswith(p + os.sep) for p in self.paths)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:  # fmt: skip
        if fullname.startswith("chaossloth"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        origin = spec.origin or ""
        if not origin.endswith(".py"):
            return None
        if not (self._wanted_name(fullname) or self._wanted_file(origin)):
            return None
        loader = InstrumentingLoader(fullname, origin)
        new = importlib.util.spec_from_file_location(
            fullname, origin, loader=loader,
            submodule_search_locations=spec.submodule_search_locations,
        )  # fmt: skip
        return new


def install(paths: Iterable[str | os.PathLike[str]] = (),
            modules: Iterable[str] = ()) -> CaptureFinder:  # fmt: skip
    """Puts a finder first on ``sys.meta_path``; undo with :func:`uninstall`.  Modules already
    imported are not re-imported."""
    finder = CaptureFinder(paths, modules)
    sys.meta_path.insert(0, finder)
    return finder


def uninstall(finder: CaptureFinder) -> None:
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


_dir_finders: dict[str, CaptureFinder] = {}


def load_file(path: str | os.PathLike[str], module_name: str | None = None) -> ModuleType:
    """Loads the Python file at `path` as an instrumented module and returns it.

    The module is registered in ``sys.modules`` (under `module_name`, by default the file's
    stem, or a unique name if another module already has that one), its directory is put on
    ``sys.path``, and sibling modules it imports from that directory are instrumented too.
    Unreadable files and syntax errors raise InputError with one readable message; an exception
    raised by the module's own top-level code propagates unchanged.
    """
    p = Path(path)
    try:
        real = p.resolve(strict=True)
    except (OSError, RuntimeError):
        raise InputError(f"{path}: no such file") from None
    if not real.is_file():
        raise InputError(f"{path}: not a file")
    try:
        data = real.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    filename = str(real)
    try:
        code = compile_instrumented(data, filename)
    except SyntaxError as exc:
        line = exc.lineno if exc.lineno is not None else "?"
        raise InputError(f"{filename}:{line}: syntax error: {exc.msg}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{filename}: cannot compile the file: {exc}") from None

    directory = str(real.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    if directory not in _dir_finders:
        _dir_finders[directory] = install(paths=[directory])

    name = module_name or real.stem
    existing = sys.modules.get(name)
    if (
        module_name is None
        and existing is not None
        and getattr(existing, "__file__", None) != filename
    ):
        n = 1
        while f"{name}__cs{n}" in sys.modules:
            n += 1
        name = f"{name}__cs{n}"
    loader = InstrumentingLoader(name, filename)
    spec = importlib.util.spec_from_file_location(name, filename, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(hook_namespace())
    _register_file(filename)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
