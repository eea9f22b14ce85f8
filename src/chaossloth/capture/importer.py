"""The import hook that instruments the user's modules, ``load_file`` for the CLI, and the
project scope: which modules a run instruments.

Only modules chosen by the caller are instrumented: a file given by path, the modules found in
the directories given to :func:`install` (never anything under ``site-packages`` or the
standard library unless its name is passed explicitly), and modules named explicitly.
Instrumented code is compiled from source every time (no ``.pyc`` is read or written), with the
real filename so that tracebacks and ``linecache`` show the user's lines.

The project scope (:class:`Scope`, :func:`scope_for`): a run instruments every module whose
file lives under the project root (the nearest ancestor of the program's file, or of pytest's
rootdir, holding one of :data:`PROJECT_MARKERS`; else the file's directory) or under the
current directory, except the installed libraries (site-packages, dist-packages, the standard
library), virtualenvs inside the project (``.venv``, ``venv``, any directory holding
``pyvenv.cfg``), ``build/`` and ChaosSloth itself; plus the installed packages named by
``--instrument`` and ``[tool.chaossloth] instrument`` in the project's pyproject.toml.  An
editable install of the user's package resolves to files under the project: instrumented.

Modules imported before the run (by pytest's collection, a conftest) would run uninstrumented:
:func:`activate` re-imports them instrumented for the run (every in-scope module of a top-level
package the program's file reaches by its imports, statically) and :meth:`Activation.restore`
puts the originals back.
"""

from __future__ import annotations

import ast
import asyncio
import collections
import copy
import enum
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import os
import random
import re
import site
import sys
import sysconfig
import threading
import tomllib
import types
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import is_ as _is
from pathlib import Path
from types import ModuleType
from typing import Any

from chaossloth import _core
from chaossloth.capture import entropy, escapes
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


def _library_dirs(
    keys: tuple[str, ...] = ("stdlib", "platstdlib", "purelib", "platlib"),
) -> list[str]:
    """The installed libraries: the standard library and the site-packages directories."""
    out = []
    for key in keys:
        p = sysconfig.get_paths().get(key)
        if p:
            out.append(os.path.realpath(p))
    for p in site.getsitepackages() if "purelib" in keys else ():
        out.append(os.path.realpath(p))
    return list(dict.fromkeys(out))


def _in_site_packages(real: str) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in real.split(os.sep))


def modelled_code_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The directories whose code's module state the hooks take as modelled rather than walk
    it (the standard library's and ChaosSloth's own), and the directories inside them whose
    code is not (site-packages): ext/hooks.c, "the environment of code that does not record
    itself".  The most specific directory decides, so ChaosSloth's own package is modelled
    wherever it is installed (inside site-packages too).  Each as imported and resolved,
    ending with a separator."""

    def spelled(paths: list[str]) -> tuple[str, ...]:
        out = [v.rstrip(os.sep) + os.sep for p in paths for v in (p, os.path.realpath(p))]
        return tuple(dict.fromkeys(out))

    paths = sysconfig.get_paths()
    std = [paths[k] for k in ("stdlib", "platstdlib") if paths.get(k)]
    sites = [paths[k] for k in ("purelib", "platlib") if paths.get(k)]
    sites += [*site.getsitepackages(), site.getusersitepackages()]
    return spelled([*std, _OWN_DIR]), spelled(sites)


#: what marks a project's root directory
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
#: directory names under a root that are never the user's code (virtualenvs, build output)
_SKIPPED_DIRS = frozenset({".venv", "venv", "build", "site-packages", "dist-packages"})
#: ChaosSloth's own package directory: never instrumented
_OWN_DIR = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_core.set_modelled_code(*modelled_code_dirs())


def project_root(start: str | os.PathLike[str]) -> Path:
    """The nearest ancestor of `start` (a file or a directory) holding one of PROJECT_MARKERS;
    else `start`'s directory."""
    p = Path(start).resolve()
    first = p if p.is_dir() else p.parent
    for d in (first, *first.parents):
        if any((d / m).exists() for m in PROJECT_MARKERS):
            return d
    return first


def pyproject_instrument(root: str | os.PathLike[str]) -> tuple[str, ...]:
    """``[tool.chaossloth] instrument`` of the pyproject.toml in `root` (none: ())."""
    path = Path(root) / "pyproject.toml"
    if not path.is_file():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: cannot read the file ({exc})") from None
    tool = data.get("tool", {})
    section = tool.get("chaossloth", {}) if isinstance(tool, dict) else {}
    value = section.get("instrument", []) if isinstance(section, dict) else []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(
            f"{path}: [tool.chaossloth] instrument must be a list of package names, not {value!r}"
        )
    return tuple(value)


def _in_venv_or_build(real: str, root: str) -> bool:
    """`real` (a file under `root`) lies in a virtualenv or build directory inside `root`."""
    parts = os.path.relpath(real, root).split(os.sep)[:-1]
    d = root
    for part in parts:
        if part in _SKIPPED_DIRS:
            return True
        d = os.path.join(d, part)
        if os.path.exists(os.path.join(d, "pyvenv.cfg")):
            return True
    return False


def _under(real: str, directory: str) -> bool:
    return real == directory or real.startswith(directory + os.sep)


@dataclass(frozen=True)
class Scope:
    """What a run instruments: source files under `roots` (see the module docstring for what
    is left out) and the modules named in `modules` with their submodules."""

    roots: tuple[str, ...]
    modules: tuple[str, ...] = ()
    excluded: tuple[str, ...] = field(default_factory=lambda: tuple(_library_dirs()))

    def wants_name(self, fullname: str) -> bool:
        return any(fullname == m or fullname.startswith(m + ".") for m in self.modules)

    def wants_file(self, origin: str) -> bool:
        real = os.path.realpath(origin)
        if _under(real, _OWN_DIR) or _in_site_packages(real):
            return False
        if any(_under(real, d) for d in self.excluded):
            return False
        return any(_under(real, root) and not _in_venv_or_build(real, root) for root in self.roots)

    def wants(self, fullname: str, origin: str) -> bool:
        """The module `fullname` whose file is `origin` is instrumented in this scope."""
        if fullname == "chaossloth" or fullname.startswith("chaossloth."):
            return False
        return self.wants_name(fullname) or self.wants_file(origin)


def _check_package(name: str, where: str) -> None:
    """`name` is an installed top-level module or package that may be instrumented."""
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise InputError(f"{where}: {name!r} is not a module name")
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names:
        raise InputError(
            f"{where}: {name} is part of the standard library, which ChaosSloth models and "
            "does not instrument"
        )
    if top == "chaossloth":
        raise InputError(f"{where}: ChaosSloth does not instrument itself")
    if locate(name) is None:
        raise InputError(f"{where}: no installed package or module named {name!r}")


def scope_for(
    path: str | os.PathLike[str],
    instrument: Iterable[str] = (),
    rootdir: str | os.PathLike[str] | None = None,
) -> Scope:
    """The scope of a run of the program in file `path`: the project of `path` (and of
    `rootdir`, pytest's rootdir, when given), the current directory, the file's own
    directory, and the packages of `instrument` and of the project's pyproject.toml.  A name
    that is no installed package is an InputError."""
    file = Path(path).resolve()
    projects = [project_root(file)]
    if rootdir is not None:
        projects.append(project_root(rootdir))
    roots = [*projects, Path.cwd().resolve(), file.parent]
    modules: list[str] = []
    for name in instrument:
        _check_package(name, "--instrument")
        modules.append(name)
    for root in dict.fromkeys(projects):
        for name in pyproject_instrument(root):
            _check_package(name, f"{root / 'pyproject.toml'}: [tool.chaossloth] instrument")
            modules.append(name)
    unique_roots = tuple(dict.fromkeys(os.path.realpath(r) for r in roots))
    return Scope(unique_roots, tuple(dict.fromkeys(modules)))


def locate(fullname: str) -> str | None:
    """The file the module `fullname` would be loaded from, found without importing anything
    (a namespace package: its first directory; not found: None).  Asks the finders on
    ``sys.meta_path`` (an editable install's finder too), ChaosSloth's own excepted."""
    parts = fullname.split(".")
    search: list[str] | None = None
    origin: str | None = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        spec = _find_spec_elsewhere(name, search)
        if spec is None:
            return None
        origin = spec.origin if spec.has_location else None
        locations = spec.submodule_search_locations
        search = list(locations) if locations is not None else None
        if origin is None and search:
            origin = search[0]
        if i < len(parts) - 1 and search is None:
            return None
    return origin


def _find_spec_elsewhere(
    fullname: str, path: Sequence[str] | None
) -> importlib.machinery.ModuleSpec | None:
    """The spec the other finders on ``sys.meta_path`` give `fullname` (none: None)."""
    for finder in list(sys.meta_path):
        if isinstance(finder, CaptureFinder):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(fullname, path)
        except Exception:  # noqa: BLE001, S112 - a finder that breaks on a name does not find it
            continue
        if spec is not None:
            return spec
    return None


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
        record_initial_state(module)


class CaptureFinder(importlib.abc.MetaPathFinder):
    """Finds the modules to instrument: names in `modules` (and their submodules), and source
    files under `paths` that are not part of the installed libraries, a virtualenv or a build
    directory (see :class:`Scope`).  The spec comes from the other finders (``PathFinder``, an
    editable install's finder, pytest's assertion rewriter): a module whose source is a ``.py``
    file in scope is loaded from that file, instrumented."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = (),
                 modules: Iterable[str] = (), scope: Scope | None = None) -> None:  # fmt: skip
        if scope is None:
            scope = Scope(tuple(os.path.realpath(p) for p in paths), tuple(modules))
        self.scope = scope

    def wants(self, fullname: str, origin: str) -> bool:
        return self.scope.wants(fullname, origin)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:  # fmt: skip
        if fullname == "chaossloth" or fullname.startswith("chaossloth."):
            return None
        spec = _find_spec_elsewhere(fullname, path)
        if spec is None or not spec.has_location:
            return None
        origin = spec.origin or ""
        if not origin.endswith(".py") or not os.path.isfile(origin):
            return None
        if not self.wants(fullname, origin):
            return None
        loader = InstrumentingLoader(fullname, origin)
        new = importlib.util.spec_from_file_location(
            fullname, origin, loader=loader,
            submodule_search_locations=spec.submodule_search_locations,
        )  # fmt: skip
        return new


def install(paths: Iterable[str | os.PathLike[str]] = (),
            modules: Iterable[str] = (), scope: Scope | None = None) -> CaptureFinder:  # fmt: skip
    """Puts a finder first on ``sys.meta_path``; undo with :func:`uninstall`.  Modules already
    imported are not re-imported (see :func:`activate`)."""
    finder = CaptureFinder(paths, modules, scope)
    sys.meta_path.insert(0, finder)
    return finder


def uninstall(finder: CaptureFinder) -> None:
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


def is_instrumented(module: ModuleType) -> bool:
    """The module's code is ChaosSloth's rewrite of its source (loaded by the finder or
    :func:`load_file`; the same file imported plainly elsewhere is not)."""
    spec = getattr(module, "__spec__", None)
    return isinstance(getattr(spec, "loader", None), InstrumentingLoader)


def instrumented_modules() -> list[str]:
    """The names of the instrumented modules now in ``sys.modules``, sorted."""
    return sorted(n for n, m in list(sys.modules.items()) if m is not None and is_instrumented(m))


def _module_file(module: ModuleType) -> str | None:
    f = getattr(module, "__file__", None)
    return f if isinstance(f, str) and f.endswith(".py") else None


def _imported_names(filename: str, package: str) -> set[str]:
    """The absolute names of the modules a source file imports (every ``import`` and
    ``from ... import`` anywhere in it, relative ones resolved against `package`; for
    ``from a import b`` both ``a`` and ``a.b``).  An unreadable file imports nothing seen."""
    try:
        tree = ast.parse(Path(filename).read_bytes(), filename)
    except (OSError, SyntaxError, ValueError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, package)
                except (ImportError, ValueError):
                    continue
            if base:
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return out


def reached_packages(filename: str, scope: Scope, package: str = "") -> set[str]:
    """The top-level names of the in-scope modules the file reaches through its imports, read
    statically and transitively through in-scope modules (already imported or not)."""
    seen_files: set[str] = set()
    tops: set[str] = set()
    todo = [(filename, package)]
    while todo:
        file, pkg = todo.pop()
        real = os.path.realpath(file)
        if real in seen_files:
            continue
        seen_files.add(real)
        for name in _imported_names(file, pkg):
            mod = sys.modules.get(name)
            origin = _module_file(mod) if mod is not None else locate(name)
            if origin is None or not origin.endswith(".py") or not scope.wants(name, origin):
                continue
            tops.add(name.partition(".")[0])
            is_pkg = os.path.basename(origin) == "__init__.py"
            todo.append((origin, name if is_pkg else name.rpartition(".")[0]))
    return tops


@dataclass
class Activation:
    """The scope a run instruments, live: its finder is on ``sys.meta_path``, and the modules
    it re-imports instrumented are out of ``sys.modules`` until :meth:`restore`."""

    scope: Scope
    finder: CaptureFinder
    #: the uninstrumented modules taken out of sys.modules, to put back
    saved: dict[str, ModuleType] = field(default_factory=dict)
    #: the names in sys.modules when the activation began
    before: frozenset[str] = frozenset()
    restored: bool = False

    def instrumented(self) -> list[str]:
        """The instrumented modules of this scope now in ``sys.modules``, sorted."""
        return sorted(
            name
            for name, mod in list(sys.modules.items())
            if mod is not None
            and is_instrumented(mod)
            and (f := _module_file(mod)) is not None
            and self.scope.wants(name, f)
        )

    def unseen(self) -> list[str]:
        """In-scope modules that still run uninstrumented although an instrumented module of
        this scope refers to them (a global naming the module, or a function or class defined
        there): imported before the run, and not reached by the static reading of the imports
        (an ``importlib.import_module``, say).  Sorted names."""
        out: set[str] = set()
        for name in self.instrumented():
            mod = sys.modules.get(name)
            for value in list(vars(mod).values()) if mod is not None else ():
                if isinstance(value, ModuleType):
                    owner = value.__name__
                else:
                    owner = getattr(value, "__module__", None)
                    if not isinstance(owner, str) or not callable(value):
                        continue
                other = sys.modules.get(owner)
                f = _module_file(other) if other is not None else None
                if other is None or f is None or is_instrumented(other) or owner == "__main__":
                    continue
                if self.scope.wants(owner, f):
                    out.add(owner)
        return sorted(out)

    def restore(self) -> None:
        """Takes the scope's finder off ``sys.meta_path``, drops the modules instrumented since
        the activation and puts the saved modules back (idempotent)."""
        if self.restored:
            return
        self.restored = True
        _release_finder(self.scope)
        for name in [n for n in list(sys.modules) if n not in self.before]:
            mod = sys.modules.get(name)
            if mod is not None and is_instrumented(mod):
                del sys.modules[name]
        for name, mod in self.saved.items():
            sys.modules[name] = mod


def activate(
    scope: Scope, filename: str | os.PathLike[str], also: Iterable[str] = ()
) -> Activation:
    """Instruments `scope` for a run of the program in `filename`: installs its finder first
    on ``sys.meta_path`` and takes out of ``sys.modules`` every uninstrumented in-scope module
    of a top-level package the file reaches, or of `also` (so the program's imports load them
    again, instrumented).  Undo with :meth:`Activation.restore`."""
    real = os.path.realpath(filename)
    tops = reached_packages(str(filename), scope, package_of(Path(real)))
    tops |= {n.partition(".")[0] for n in also}
    saved: dict[str, ModuleType] = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or name == "__main__" or is_instrumented(mod):
            continue
        origin = _module_file(mod)
        if origin is None:
            continue
        # the program's own file as pytest imported it is replaced by load_file: saved too
        own = os.path.realpath(origin) == real
        if not own and (name.partition(".")[0] not in tops or not scope.wants(name, origin)):
            continue
        saved[name] = mod
        del sys.modules[name]
    return Activation(scope, _acquire_finder(scope), saved, frozenset(sys.modules))


class _ActiveScopesFinder(CaptureFinder):
    """The one finder of the active scopes: a module is instrumented when one of them wants it
    (several runs in one process, nested or not, share it)."""

    def __init__(self) -> None:
        super().__init__(scope=Scope(()))

    def wants(self, fullname: str, origin: str) -> bool:
        with _lock:
            scopes = list(_active)
        return any(s.wants(fullname, origin) for s in scopes)


#: how many activations use each active scope
_active: dict[Scope, int] = {}
_scopes_finder = _ActiveScopesFinder()


def _acquire_finder(scope: Scope) -> CaptureFinder:
    with _lock:
        _active[scope] = _active.get(scope, 0) + 1
        if _scopes_finder not in sys.meta_path:
            sys.meta_path.insert(0, _scopes_finder)
    return _scopes_finder


def _release_finder(scope: Scope) -> None:
    with _lock:
        users = _active.get(scope, 0)
        if users > 1:
            _active[scope] = users - 1
            return
        _active.pop(scope, None)
        if not _active:
            uninstall(_scopes_finder)


_STDLIB_DIRS = _library_dirs(("stdlib", "platstdlib"))
#: the test runner's own packages: their frames in a failure are not the program's code
_TEST_TOOLS = frozenset({"pytest", "_pytest", "pluggy"})


def uninstrumented_modules(files: Iterable[str]) -> list[str]:
    """The top-level names of the modules among `files` (frames and await sites of a failing
    execution) that ran uninstrumented and are neither the standard library (asyncio
    included) nor ChaosSloth: the code whose accesses the run did not see.  A file that is
    no imported module is named by its path."""
    by_file: dict[str, str] = {}
    for name, mod in list(sys.modules.items()):
        f = _module_file(mod) if mod is not None else None
        if f is not None and not is_instrumented(mod):
            by_file.setdefault(os.path.realpath(f), name)
    instrumented = {os.path.realpath(f) for f in INSTRUMENTED_FILES}
    out: list[str] = []
    for file in files:
        if not file.endswith(".py") or not os.path.isfile(file):
            continue  # <frozen ...>, <string>: not a file a user can instrument
        real = os.path.realpath(file)
        if real in instrumented or _under(real, _OWN_DIR):
            continue
        if any(_under(real, d) for d in _STDLIB_DIRS) and not _in_site_packages(real):
            continue
        name = by_file.get(real)
        top = name.partition(".")[0] if name is not None else None
        if top in _TEST_TOOLS:
            continue  # pytest.fail(), pytest.raises: the test's tool, not the program
        out.append(top if top is not None else file)
    return list(dict.fromkeys(out))


_dir_finders: dict[str, CaptureFinder] = {}


_RELATIVE_IMPORT = re.compile(rb"^[ \t]*from[ \t]+\.", re.MULTILINE)


def package_of(real: Path) -> str:
    """The dotted name of the package a file's directory is (``__init__.py`` up to the first
    directory without one), as pytest's rootdir-based import names it; "" outside one."""
    parts: list[str] = []
    d = real.parent
    while (d / "__init__.py").is_file() and d.name.isidentifier() and d.parent != d:
        parts.append(d.name)
        d = d.parent
    return ".".join(reversed(parts))


def _package_prefix(real: Path, data: bytes) -> str:
    """``"pkg.sub."`` for a file with relative imports (``from .conftest import x``) in a
    package directory, as pytest names such a test module; else ``""``, a top-level module
    named after the file."""
    if not _RELATIVE_IMPORT.search(data):
        return ""
    package = package_of(real)
    return f"{package}." if package else ""


def load_file(
    path: str | os.PathLike[str], module_name: str | None = None, *, siblings: bool = True
) -> ModuleType:
    """Loads the Python file at `path` as an instrumented module and returns it.

    The module is registered in ``sys.modules`` (under `module_name`, by default the file's
    stem, or a unique name if another module already has that one), its directory is put on
    ``sys.path``, and (`siblings`) sibling modules it imports from that directory are
    instrumented too, by a finder that stays installed (a run's :func:`activate` covers the
    file's directory instead).
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
    if siblings and directory not in _dir_finders:
        _dir_finders[directory] = install(paths=[directory])

    prefix = _package_prefix(real, data) if module_name is None else ""
    if prefix:  # the package's own parent: where its absolute name is found
        root = str(real.parents[prefix.count(".")])
        if root not in sys.path:
            sys.path.insert(1, root)
    name = module_name or prefix + real.stem
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
    record_initial_state(module)
    return module


# ------------------------------------------------------------------ initial state

#: the types whose contents reset_modules puts back in place (exactly these types: a subclass
#: may keep state elsewhere)
_CONTAINERS = (
    list,
    dict,
    set,
    bytearray,
    collections.deque,
    collections.defaultdict,
    collections.OrderedDict,
    collections.Counter,
)
#: objects whose state is put back in place by other means than their contents: a seeded
#: random.Random (its generator state)
_STATEFUL = (random.Random,)


@dataclass(frozen=True)
class _GeneratorState:
    """A random.Random's state (getstate), put back with setstate."""

    state: Any


@dataclass(frozen=True)
class _Shallow:
    """The contents of a container that deepcopy cannot copy (it holds a lock, a socket, a
    generator...): a shallow copy, so the reset puts back which items it holds, not their
    own state.  Said once per run (shallow_resets)."""

    items: Any
    reason: str


#: what deepcopy keeps by identity anyway (atomic for it): left out of _shared_globals
_ATOMIC_TYPES = (
    int,
    float,
    complex,
    str,
    bytes,
    bool,
    type(None),
    type,
    ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
)
_shared: dict[int, Any] = {}
_shared_for = -1


def _shared_globals() -> dict[int, Any]:
    """id -> object for every object bound as a global of a loaded module (refreshed when a
    module was loaded since; it holds them, so their ids stay theirs)."""
    global _shared_for
    if len(sys.modules) != _shared_for:
        _shared.clear()
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            for v in list(names.values()):
                if not isinstance(v, _ATOMIC_TYPES):
                    _shared[id(v)] = v
        _shared_for = len(sys.modules)
    return _shared


class _KeepShared(dict):  # type: ignore[type-arg]
    """A deepcopy memo that hands back, uncopied, every object a module binds as a global
    (another module's ``STRING = Scalar("String")`` in this module's registry), except the
    container being copied: a copy of it would be a second object where code compares by
    identity (graphql-core's one String scalar per schema), and that object's own state is
    the business of whatever resets its module (_import_objects), not of this container."""

    def __init__(self, root: Any) -> None:
        super().__init__()
        self._shared = _shared_globals()
        self._root = id(root)

    def get(self, key: Any, default: Any = None) -> Any:
        hit = dict.get(self, key, _MISSING)
        if hit is not _MISSING:
            return hit
        if key != self._root:
            kept = self._shared.get(key, _MISSING)
            if kept is not _MISSING:
                return kept
        return default


_MISSING = object()


def _deep_copy(value: Any) -> Any:
    """deepcopy, keeping the objects modules bind (_KeepShared)."""
    return copy.deepcopy(value, _KeepShared(value))


def _copy_contents(value: Any, name: str = "") -> Any:
    """A deep copy of a container's contents (_deep_copy); when deepcopy fails, a _Shallow
    copy (recorded in shallow_resets under `name`)."""
    try:
        return _deep_copy(value)
    except Exception as exc:  # noqa: BLE001 - any object may refuse a deep copy
        reason = f"{type(exc).__name__}: {exc}"
        if name:
            shallow_resets.setdefault(name, reason)
        return _Shallow(copy.copy(value), reason)


_UNCOPYABLE = object()
#: module.name -> why its container is reset shallowly (deepcopy's error), for the report
shallow_resets: dict[str, str] = {}


def _count_args(counter: itertools.count) -> tuple[str, tuple[Any, ...]]:
    """An itertools.count's repr and the arguments that make a count where it is now (its
    repr is ``count(start)`` or ``count(start, step)``, numbers in Python syntax)."""
    text = repr(counter)
    args = ast.literal_eval(text[len("count") :])
    return text, args if isinstance(args, tuple) else (args,)


def _put_back(value: Any, saved: Any) -> None:
    """Puts a container's saved contents back in place (a fresh deep copy of them, or of its
    items for a _Shallow copy), so that every reference to it (another module's ``from m import
    RUNS``, a default argument) sees the reset."""
    if isinstance(saved, _GeneratorState):
        value.setstate(saved.state)
        return
    shallow = isinstance(saved, _Shallow)
    if shallow:
        saved = saved.items
    try:
        if value == saved:
            return
    except Exception:  # noqa: BLE001, S110 - a comparison that fails: reset anyway
        pass
    fresh = copy.copy(saved) if shallow else _deep_copy(saved)
    if isinstance(value, list | bytearray):
        value[:] = fresh
    elif isinstance(value, collections.deque):
        value.clear()
        value.extend(fresh)
    elif isinstance(value, collections.Counter):
        value.clear()
        dict.update(value, fresh)  # Counter.update would add the counts
    else:
        value.clear()
        value.update(fresh)


class _Namespace:
    """The initial state of one namespace (a module's globals, or a class defined there):
    its bindings, and a deep copy of the contents of each plain container bound in it.

    :meth:`unchanged` compares the namespace with a snapshot of it taken when it was known to
    be in its initial state (every entry, dunder names included, in the namespace's order):
    when each entry is the very same key object bound to the very same value object
    (identity, never ``==``, which user code may define), nothing was rebound, added or
    removed since, so :meth:`restore`'s rebinding would change nothing and only the
    containers' contents (changed in place, unseen by the snapshot) are put back
    (:meth:`put_back_contents`, in the order restore puts them back)."""

    __slots__ = (
        "_containers",
        "_keys",
        "_public_only",
        "_values",
        "_version",
        "_versioned",
        "bindings",
        "contents",
        "counters",
    )

    def __init__(
        self,
        bindings: dict[str, Any],
        contents: dict[str, Any],
        public_only: bool = False,
        versioned: bool = True,
        counters: dict[str, tuple[str, tuple[Any, ...]]] | None = None,
    ) -> None:
        self.bindings = bindings
        self.contents = contents
        #: name -> (repr, arguments) of an itertools.count bound there: it cannot be put back
        #: in place, so one that advanced is replaced by a fresh count at the initial position
        self.counters = counters or {}
        #: (initial object, its saved contents) in the bindings' order (restore's order)
        self._containers = [(bindings[k], saved) for k, saved in contents.items()]
        #: the snapshot of the whole namespace in its initial state, or None (none taken)
        self._keys: tuple[Any, ...] | None = None
        self._values: tuple[Any, ...] = ()
        #: the bindings leave out the dunder names (a class's attributes)
        self._public_only = public_only
        #: the snapshot's namespace's version tag when it is a dict (a module's globals), or
        #: -1: dict versions are fresh values of a process-wide counter, so an equal tag is
        #: that very dict with the snapshot's very entries (compat.c: dict versions)
        self._version = -1
        #: the version tag may be trusted: not an instance's __dict__, whose attribute stores
        #: on 3.13 go to the object's inline values without changing the dict's tag
        self._versioned = versioned

    @classmethod
    def of(
        cls,
        ns: dict[str, Any] | Any,
        where: str = "",
        *,
        public_only: bool = False,
        versioned: bool = True,
    ) -> _Namespace:
        items = dict(ns)
        if public_only:
            items = {k: v for k, v in items.items() if not k.startswith("__")}
        contents = {}
        counters: dict[str, tuple[str, tuple[Any, ...]]] = {}
        for k, v in items.items():
            # dunder names are the interpreter's (__builtins__ is the builtins' own dict)
            if k.startswith("__") and k.endswith("__"):
                continue
            if type(v) in _CONTAINERS:
                contents[k] = _copy_contents(v, f"{where}.{k}" if where else k)
            elif type(v) in _STATEFUL:
                contents[k] = _GeneratorState(v.getstate())
            elif type(v) is itertools.count:
                counters[k] = _count_args(v)
        out = cls(items, contents, public_only, versioned, counters)
        out.snapshot(ns)
        return out

    def snapshot(self, ns: Any) -> None:
        """Takes the snapshot of `ns` (the live namespace) if its bindings are exactly the
        initial ones (each name bound to the identical object and no other name, dunder names
        aside for a class), else drops it (then :meth:`unchanged` is False)."""
        bindings = self.bindings
        public_only = self._public_only
        names = [k for k in ns if not (public_only and k.startswith("__"))]
        if len(names) == len(bindings) and all(
            k in bindings and ns[k] is bindings[k] for k in names
        ):
            self._keys, self._values = tuple(ns), tuple(ns.values())
            versioned = self._versioned and type(ns) is dict
            self._version = _core.dict_version(ns) if versioned else -1
        else:
            self._keys, self._values, self._version = None, (), -1

    def unchanged(self, ns: Any) -> bool:
        """Every entry of `ns` (the live namespace) is, in order, the identical key bound to
        the identical value of the snapshot."""
        keys = self._keys
        if (
            keys is not None
            and self._version >= 0
            and type(ns) is dict
            and _core.dict_version(ns) == self._version
        ):
            return True
        return (
            keys is not None
            and len(ns) == len(keys)
            and all(map(_is, ns, keys))
            and all(map(_is, ns.values(), self._values))
        )

    def put_back_contents(self) -> None:
        """The containers' contents put back (restore's second half, when nothing was
        rebound)."""
        for value, saved in self._containers:
            _put_back(value, saved)

    def renew_counters(self, ns: Any, setter: Any = None) -> None:
        """Each itertools.count of the initial bindings that advanced is replaced, in the
        bindings and in `ns` (which holds the initial bindings), by a fresh count at the
        initial position; the snapshot is taken again if any was.  A reference to the old
        count held elsewhere (``from m import ids``) keeps counting."""
        renewed = False
        for k, (text, args) in self.counters.items():
            current = self.bindings[k]
            if repr(current) == text:
                continue
            fresh = itertools.count(*args)
            self.bindings[k] = fresh
            if setter is None:
                ns[k] = fresh
            else:
                setter(k, fresh)
            renewed = True
        if renewed:
            self.snapshot(ns)

    def restore(self, ns: dict[str, Any], setter: Any = None, deleter: Any = None) -> None:
        for k in [k for k in ns if k not in self.bindings]:
            if deleter is None:
                del ns[k]
            else:
                deleter(k)
        for k, v in self.bindings.items():
            if ns.get(k, _UNCOPYABLE) is not v:
                if setter is None:
                    ns[k] = v
                else:
                    setter(k, v)
            saved = self.contents.get(k, _UNCOPYABLE)
            if saved is not _UNCOPYABLE:
                _put_back(v, saved)


@dataclass
class _ModuleState:
    module: weakref.ref[ModuleType]
    globals: _Namespace
    #: classes defined in the module: their attributes (methods included, rebinding only)
    classes: list[tuple[type, _Namespace]]
    #: objects made at import that the module reaches (_import_objects): their attributes,
    #: and the items of one whose class derives from a container (_copy_items), else None
    objects: list[tuple[Any, _Namespace, Any]] = field(default_factory=list)


#: the asyncio objects whose state belongs to the loop they first ran on (each execution runs
#: on a fresh loop): one made at import is put back as it was made, unbound, with no waiters
_LOOP_BOUND: tuple[type, ...] = tuple(
    t
    for t in (
        getattr(asyncio, name, None)
        for name in ("Lock", "Event", "Condition", "Semaphore", "Barrier", "Queue")
    )
    if isinstance(t, type)
)
#: how far and how wide _import_objects looks from a module's globals and class attributes
_OBJECT_DEPTH = 4
_OBJECT_LIMIT = 2000


#: the containers a program's class may derive from: an instance's items are put back with the
#: containers' own methods (never the subclass's overrides, which are the program's code)
_ITEM_BASES = (list, dict, set, collections.deque)


def _copy_items(obj: Any, where: str) -> Any:
    """The items of a container subclass's instance, as _copy_contents copies a container's
    (a deep copy, or a _Shallow one)."""
    if isinstance(obj, dict):
        plain: Any = dict(dict.items(obj))
    elif isinstance(obj, list):
        plain = list.copy(obj)
    elif isinstance(obj, set):
        plain = set(set.__iter__(obj))
    else:
        plain = collections.deque(collections.deque.__iter__(obj))
    return _copy_contents(plain, where)


def _put_back_items(obj: Any, saved: Any) -> None:
    """Puts a container subclass's instance's items back, with the base class's methods."""
    shallow = isinstance(saved, _Shallow)
    items = saved.items if shallow else saved
    fresh = copy.copy(items) if shallow else _deep_copy(items)
    if isinstance(obj, dict):
        dict.clear(obj)
        dict.update(obj, fresh)
    elif isinstance(obj, list):
        list.__setitem__(obj, slice(None), fresh)
    elif isinstance(obj, set):
        set.clear(obj)
        set.update(obj, fresh)
    else:
        collections.deque.clear(obj)
        collections.deque.extend(obj, fresh)


def _import_objects(module: ModuleType, program: set[str], seen: set[int]) -> list[Any]:
    """The objects made at import whose attributes reset_modules puts back: instances of the
    program's own classes (a module-level service, a registry) and asyncio's locks, events,
    conditions, semaphores, barriers and queues, reached from the module's globals and the
    attributes of its classes through containers and such objects' own attributes (up to
    _OBJECT_DEPTH links, _OBJECT_LIMIT objects).  An object with no instance ``__dict__``
    (``__slots__``), an Enum member, and an object of a library class other than those
    primitives are not reset.  `seen` (ids) spans the program: an object reached from two
    modules is reset once."""
    name = module.__name__
    roots: list[Any] = [v for k, v in vars(module).items() if not k.startswith("__")]
    for v in list(vars(module).values()):
        if isinstance(v, type) and v.__module__ == name:
            roots.extend(a for k, a in vars(v).items() if not k.startswith("__"))
    found: list[Any] = []
    level = roots
    for _ in range(_OBJECT_DEPTH):
        nxt: list[Any] = []
        for v in level:
            if id(v) in seen or len(seen) >= _OBJECT_LIMIT:
                continue
            t = type(v)
            if t in _CONTAINERS or t is tuple or t is frozenset:
                seen.add(id(v))
                nxt.extend(v.values() if t is dict else v)
                continue
            if isinstance(v, type | ModuleType | enum.Enum):
                continue
            if not (t.__module__ in program or isinstance(v, _LOOP_BOUND)):
                continue
            try:
                attrs = object.__getattribute__(v, "__dict__")
            except AttributeError:
                continue
            if type(attrs) is not dict:
                continue
            seen.add(id(v))
            found.append(v)
            nxt.extend(attrs.values())
            if isinstance(v, _ITEM_BASES):  # a subclass of a container: its items too
                nxt.extend(dict.values(v) if isinstance(v, dict) else list(v))
        level = nxt
    return found


#: id(module) -> its initial state, for every instrumented module of the program loaded last
#: (weakly held)
_initial: dict[int, _ModuleState] = {}
#: the tables of the programs loaded before it and not released yet, innermost last: stage 7
#: loads the patched copy while the original is loaded, and releases it before stage 8 replays
#: the original
_outer: list[dict[int, _ModuleState]] = []


#: while a program loads (begin_program .. program_loaded): its modules, recorded when all of
#: them have run (a module's state is what the program's imports left, other modules' top-level
#: code included: a registry that another module's decorators fill at import keeps its entries)
_loading: list[ModuleType] | None = None
#: ids of the objects made at import that the program's recorded modules reset (_import_objects)
_program_objects: set[int] = set()


def begin_program() -> None:
    """A new program is being loaded (scenario.load_instrumented): from now on reset_modules
    resets its modules only (an execution runs one program), until end_program.  Its modules'
    states are recorded by program_loaded."""
    global _initial, _loading, _program_objects
    _outer.append(_initial)
    _initial = {}
    _loading = []
    _program_objects = set()
    shallow_resets.clear()
    entropy.begin()
    escapes.begin()


def program_loaded() -> None:
    """The program's imports are done: records the state of each of its modules still in
    ``sys.modules`` as they left it (a module imported later, from an execution, is recorded
    when its own top-level code ends)."""
    global _loading
    modules, _loading = _loading or [], None
    entropy.loaded()
    for module in modules:
        if sys.modules.get(module.__name__) is module:
            record_initial_state(module)
    program = {m.__name__ for m in modules}
    for state in _initial.values():
        module = state.module()
        if module is not None:
            for obj in _import_objects(module, program, _program_objects):
                where = _object_name(module, obj)
                attrs = _Namespace.of(vars(obj), where, versioned=False)
                items = _copy_items(obj, where) if isinstance(obj, _ITEM_BASES) else None
                state.objects.append((obj, attrs, items))


def _object_name(module: ModuleType, obj: Any) -> str:
    for k, v in vars(module).items():
        if v is obj:
            return f"{module.__name__}.{k}"
    return f"{module.__name__}: a {type(obj).__qualname__}"


def end_program() -> None:
    """The program loaded last is released (or did not load): reset_modules resets the modules
    of the program loaded before it again."""
    global _initial, _loading
    _initial = _outer.pop() if _outer else {}
    _loading = None
    entropy.end()
    escapes.end()


def record_initial_state(module: ModuleType) -> None:
    """Records the module's state as its top-level code left it: what reset_modules restores
    before every execution (deferred to program_loaded while the program loads)."""
    if _loading is not None:
        _loading.append(module)
        return
    ns = vars(module)
    name = module.__name__
    classes = [
        (
            v,
            _Namespace.of(vars(v), f"{name}.{v.__qualname__}", public_only=True),
        )
        for v in list(ns.values())
        if isinstance(v, type) and v.__module__ == name
    ]
    key = id(module)
    table = _initial
    table[key] = _ModuleState(
        weakref.ref(module, lambda _, key=key, table=table: table.pop(key, None)),
        _Namespace.of(ns, name),
        classes,
    )


def reset_modules() -> None:
    """Puts every instrumented module of the program loaded last (begin_program) that is still
    in ``sys.modules`` back in its initial state, as the program's imports left it
    (program_loaded, which the first reset runs if nothing did): its global names rebound to
    the objects bound then (names added since are removed), the contents of every list, dict,
    set, bytearray and deque bound to a global name or a class attribute put back in place,
    the attributes of the classes it defines rebound, and the attributes of the objects made
    at import it reaches (_import_objects: instances of the program's classes, asyncio's
    primitives) rebound, their containers' contents put back.  What is not reset: other
    objects (a library class's instances, containers nested in containers are put back with
    them, by value) and state outside the instrumented modules.  Called by the runner before
    every execution."""
    if _loading is not None:
        program_loaded()
    entropy.reset()
    for state in list(_initial.values()):
        module = state.module()
        if module is None or sys.modules.get(module.__name__) is not module:
            continue
        # the common case (nothing rebound, added or removed: _Namespace.unchanged) skips
        # the rebinding pass; the full pass runs exactly as before otherwise, then the
        # snapshot is taken again from the state it left
        ns = vars(module)
        if state.globals.unchanged(ns):
            state.globals.put_back_contents()
        else:
            state.globals.restore(ns)
            state.globals.snapshot(ns)
        if state.globals.counters:
            state.globals.renew_counters(ns)
        for klass, cns in state.classes:
            attrs = vars(klass)
            if cns.unchanged(attrs):
                cns.put_back_contents()
                continue
            current = {k: a for k, a in attrs.items() if not k.startswith("__")}
            cns.restore(
                current,
                setter=lambda k, v, klass=klass: setattr(klass, k, v),
                deleter=lambda k, klass=klass: delattr(klass, k),
            )
            cns.snapshot(vars(klass))
        for klass, cns in state.classes:
            if cns.counters:
                cns.renew_counters(
                    vars(klass), setter=lambda k, v, klass=klass: setattr(klass, k, v)
                )
        for obj, ons, items in state.objects:
            if items is not None:
                _put_back_items(obj, items)
            attrs = vars(obj)
            if ons.unchanged(attrs):
                ons.put_back_contents()
            else:
                ons.restore(attrs)
                ons.snapshot(attrs)
            if ons.counters:
                ons.renew_counters(attrs)
