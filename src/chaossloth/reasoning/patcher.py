"""The Python API of the repair: ``Patched, diff = ASTConcurrencyPatcher.patch_and_compile(cls,
"method")``.

It runs the whole pipeline on the class (the file that defines it, loaded instrumented; ``tasks``
concurrent calls checked by the serializability oracle), so the hazard is found, the patch
synthesized and verified exactly as ``chaossloth fix`` does, then compiles the patched methods
into a new class: a subclass of `cls` (same name and module) whose patched functions are compiled
from the patched source with the module's own globals, the original closures (``super()``'s
``__class__`` cell included) and the original line numbers for every line the patch did not add.
Nothing is written: neither the user's file nor a schedule file.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
import tempfile
import types
import weakref
from collections.abc import Sequence
from typing import Any

from chaossloth import pipeline, scenario
from chaossloth.config import Config
from chaossloth.errors import InputError
from chaossloth.reasoning.repair import Repair
from chaossloth.reasoning.synthesis import Patch


class PatchError(Exception):
    """patch_and_compile could not produce a verified patch; the message says why."""


class NothingToFix(PatchError):
    """Every explored schedule of the class passes: there is nothing to patch."""


def _literal(value: Sequence[Any] | str | None, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    text = repr(tuple(value))
    try:
        if ast.literal_eval(text) != tuple(value):
            raise ValueError
    except (ValueError, SyntaxError):
        raise PatchError(f"{what} must be Python literals (got {value!r})") from None
    return text


class ASTConcurrencyPatcher:
    """Synthesizes, verifies and compiles ordered-lock patches (see the module docstring)."""

    @staticmethod
    def patch_and_compile(
        cls: type,  # noqa: PLW0211 - the user's class (the documented API's name)
        method: str,
        *,
        args: Sequence[Any] | str | None = None,
        init_args: Sequence[Any] | str | None = None,
        tasks: int = 2,
        invariant: str | None = None,
        max_executions: int | None = None,
        time_limit: float | None = None,
    ) -> tuple[type, str]:
        """The patched class and the unified diff of its file.  `args`/`init_args`: the
        arguments of each call and of the constructor (a tuple, or the CLI's literal text;
        None: synthesized from the signature as the CLI does).  Raises :class:`NothingToFix`
        when every schedule passes, :class:`PatchError` when no lock fixes the hazard or no
        patch survived verification, InputError for bad input."""
        if not inspect.isclass(cls):
            raise InputError(f"patch_and_compile takes a class, not {type(cls).__name__}")
        path = inspect.getsourcefile(cls)
        if path is None:
            raise InputError(f"{cls.__qualname__}: its source file cannot be found")
        with tempfile.TemporaryDirectory(prefix="chaossloth-api-") as tmp:
            cfg = Config(
                cls=cls.__name__,
                method=method,
                tasks=tasks,
                args=_literal(args, "args"),
                init_args=_literal(init_args, "init_args"),
                invariant=invariant,
                max_executions=max_executions,
                time_limit=time_limit,
                quiet=True,
                schedule_out=f"{tmp}/failing.schedule.json",
                database="",  # the API writes nothing outside its temporary directory
            )
            program = scenario.load(path, cfg)
            try:
                res = pipeline.run(program, cfg, None, full=True)
            finally:
                program.release()
        rep = res.repair_obj
        if rep is None:
            raise NothingToFix(
                f"{cls.__qualname__}.{method}: nothing to fix: "
                + (
                    f"all {res.executions} schedules pass (complete)"
                    if res.complete
                    else f"no failing schedule in {res.executions} executions"
                )
            )
        if not rep.verified or rep.patch is None:
            raise PatchError(
                f"{cls.__qualname__}.{method}: {res.hazard}: "
                + (rep.explanation or "no patch survived verification")
            )
        return compile_patched(cls, rep), rep.diff


def compile_patched(cls: type, rep: Repair) -> type:
    """A subclass of `cls` with the functions the patch changed or added, compiled from the
    patched text in the original module's globals."""
    patch = rep.patch
    assert patch is not None
    module = sys.modules.get(cls.__module__)
    namespace: dict[str, Any] = vars(module) if module is not None else {}
    tree = ast.parse(patch.patched, filename=patch.path)
    _ensure_names(namespace, patch, tree)
    cls_node = _find_class(tree, cls.__qualname__)
    if cls_node is None:
        raise PatchError(f"{cls.__qualname__}: not found in the patched source")
    original = ast.parse(patch.original, filename=patch.path)
    orig_cls = _find_class(original, cls.__qualname__)
    before = {
        n.name: ast.dump(n, include_attributes=False)
        for n in (orig_cls.body if orig_cls is not None else [])
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    members: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    if cls.__doc__ is not None:
        members["__doc__"] = cls.__doc__
    for node in cls_node.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if before.get(node.name) == ast.dump(node, include_attributes=False):
            continue  # untouched: inherited from cls as it is
        members[node.name] = _compile_function(cls, node, patch, namespace)
    return type(cls)(cls.__name__, (cls,), members)


def _ensure_names(namespace: dict[str, Any], patch: Patch, tree: ast.Module) -> None:
    """The names the patch's code uses that the module may lack: ``asyncio`` (when the patch
    adds the import) and the per-loop table of module-level locks."""
    namespace.setdefault("asyncio", asyncio)
    if any(lk.scope == "module" for lk in patch.locks) and "_chaossloth_lock" not in namespace:
        namespace.setdefault("weakref", weakref)
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(
                    isinstance(t, ast.Name) and t.id == "_chaossloth_locks" for t in node.targets
                )
            ) or (isinstance(node, ast.FunctionDef) and node.name == "_chaossloth_lock"):
                code = compile(ast.Module(body=[node], type_ignores=[]), patch.path, "exec")
                exec(code, namespace)  # noqa: S102 - our own two definitions


def _find_class(tree: ast.Module, qualname: str) -> ast.ClassDef | None:
    body: list[ast.stmt] = tree.body
    found: ast.ClassDef | None = None
    for part in qualname.split("."):
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if found is None:
            return None
        body = found.body
    return found


def _compile_function(
    cls: type, node: ast.FunctionDef | ast.AsyncFunctionDef, patch: Patch, namespace: dict[str, Any]
) -> Any:
    """Compiles one patched function.  Its free variables (``__class__`` for ``super()``) are
    parameters of a factory function, called with the values of the original's closure cells
    (of the function it copies, for an unlocked copy); line numbers are mapped back to the
    original file's, an added line taking the number of the original line before it."""
    source_fn = _original_function(cls, node.name)
    code_names: dict[str, Any] = {}
    if source_fn is not None and source_fn.__closure__:
        for name, cell in zip(source_fn.__code__.co_freevars, source_fn.__closure__, strict=True):
            try:
                code_names[name] = cell.cell_contents
            except ValueError:
                code_names[name] = None
    code_names.setdefault("__class__", cls)
    node = _with_original_lines(node, patch)
    factory = ast.FunctionDef(
        name="__chaossloth_factory__",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=n) for n in code_names],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=[node, ast.Return(value=ast.Name(id=node.name, ctx=ast.Load()))],
        decorator_list=[],
        returns=None,
        type_comment=None,
        **({"type_params": []} if sys.version_info >= (3, 12) else {}),
    )
    ast.copy_location(factory, node)
    ast.fix_missing_locations(factory)
    mod = ast.Module(body=[factory], type_ignores=[])
    code = compile(mod, patch.path, "exec")
    scope: dict[str, Any] = {}
    exec(code, namespace, scope)  # noqa: S102 - the user's own patched method
    fn = scope["__chaossloth_factory__"](*code_names.values())
    if isinstance(fn, types.FunctionType):
        fn.__qualname__ = f"{cls.__qualname__}.{node.name}"
    return fn


def _original_function(cls: type, name: str) -> Any:
    """The original function a patched one comes from: the method itself, or the one an
    unlocked copy ``_<m>_holding_locks`` copies."""
    candidates = [name]
    if name.startswith("_") and name.endswith("_holding_locks"):
        candidates.append(name[1 : -len("_holding_locks")])
    for n in candidates:
        value = inspect.getattr_static(cls, n, None)
        fn = getattr(value, "__func__", value)
        if isinstance(fn, types.FunctionType):
            return fn
    return None


def _with_original_lines(
    node: ast.FunctionDef | ast.AsyncFunctionDef, patch: Patch
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    last = 1
    mapped: dict[int, int] = {}
    for row in range(1, len(patch.origin) + 1):
        orig = patch.original_line(row)
        if orig is not None:
            last = orig
        mapped[row] = last
    for sub in ast.walk(node):
        for attr in ("lineno", "end_lineno"):
            v = getattr(sub, attr, None)
            if isinstance(v, int):
                setattr(sub, attr, mapped.get(v, v))
        if (
            isinstance(getattr(sub, "end_lineno", None), int)
            and isinstance(getattr(sub, "lineno", None), int)
            and sub.end_lineno < sub.lineno  # type: ignore[attr-defined]
        ):
            sub.end_lineno = sub.lineno  # type: ignore[attr-defined]
        if (
            getattr(sub, "end_lineno", None) == getattr(sub, "lineno", 0)
            and isinstance(getattr(sub, "end_col_offset", None), int)
            and sub.end_col_offset < sub.col_offset  # type: ignore[attr-defined]
        ):
            sub.end_col_offset = sub.col_offset  # type: ignore[attr-defined]
    return node
