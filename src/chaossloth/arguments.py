"""The arguments of a ``--cls/--method`` workload: ``--args``/``--init-args`` parsed, or
synthesized from the signature when the option is absent.

**Parsing.** The text is a Python literal (``"'audit'"``, ``"('a', 1)"``, ``"[1, 2]"``): a tuple
or a list gives several positional arguments, any other literal the single argument, empty text
none.  Inside it, a name (``Color.RED``, ``mod.Color.RED``) may stand for an Enum member defined
or imported in FILE, resolved in FILE's namespace after it is loaded; any other name is an error.

**Synthesis** (the option absent: ``None``; an explicit ``--args ""`` passes no arguments and
synthesizes nothing).  Each required positional parameter gets one value, and every concurrent
call the *same* one, so that the calls collide on whatever the argument selects (the seed's
``handle_request('client_id')`` twice is the lost update).  From the parameter's annotation:

=============================================  ============================================
``str``                                        the parameter's name (``'client_id'``)
``int`` / ``float`` / ``bool`` / ``bytes``     ``1`` / ``1.0`` / ``True`` / ``b'x'``
``Optional[X]``, ``X | None``, ``None``        ``None``
``X | Y`` (no None)                            the first member, in written order, that gives one
an Enum                                        its first member
``Literal[a, b]``                              ``a``
``list``/``dict``/``set``/``tuple`` (bare or   an empty one: the one value of the type that needs
parameterized)                                 no element synthesized, equal in every call
``Annotated[X, ...]``, ``NewType(.., X)``      as ``X``
=============================================  ============================================

A parameter with a default is not passed (so it gets its default).  ``*args``/``**kwargs`` get
nothing.  Annotations are resolved with :func:`typing.get_type_hints`; when that fails (a name
imported under ``TYPE_CHECKING``, a forward reference to a local class), each annotation's
text is evaluated in the function's globals with unknown names standing for an unknown class,
so that ``Optional[Unknown]`` is still ``None`` and ``Unknown`` alone still an error.  A required
parameter with no annotation, an annotation that gives nothing (``Any``, an arbitrary class), or
a required keyword-only one (the workload passes positional arguments only) is an InputError
naming it and suggesting the option.

The chosen values are kept as literal text (:attr:`Arguments.text`), which the schedule file
stores as ``args``/``init_args`` so that ``chaossloth replay`` runs the same calls.
"""

from __future__ import annotations

import ast
import builtins
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from chaossloth.errors import InputError

_EXAMPLES = 'examples: "\'audit\'", "(\'a\', 1)", "[1, 2]"'


@dataclass(frozen=True)
class Arguments:
    """Positional arguments and the literal text that reproduces them."""

    values: tuple[Any, ...]
    #: a literal that :func:`parse` turns back into `values` (in the same namespace); None
    #: when the option was absent and nothing needed synthesizing
    text: str | None
    #: chosen from the signature (the option was absent), not given by the user
    synthesized: bool = False


# ------------------------------------------------------------------ parsing


def check_syntax(text: str | None, what: str) -> None:
    """Rejects text that cannot be a literal before the user's file is loaded (names are
    resolved by :func:`parse` only once it is)."""
    if text is None or not text.strip():
        return
    try:
        ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise InputError(f"{what} {text!r} is not a Python literal ({_EXAMPLES})") from None


def parse(text: str | None, what: str, namespace: Mapping[str, Any] | None = None) -> tuple:
    """The positional arguments that `text` (an option's value) gives; names are looked up in
    `namespace` (FILE's globals) and must be Enum members."""
    if text is None or not text.strip():
        return ()
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise InputError(f"{what} {text!r} is not a Python literal ({_EXAMPLES})") from None
    tree = _EnumNames(namespace or {}, what, text).visit(tree)
    try:
        value = ast.literal_eval(tree)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise InputError(f"{what} {text!r} is not a Python literal ({_EXAMPLES})") from None
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,)


class _EnumNames(ast.NodeTransformer):
    """Replaces each dotted name that resolves to an Enum member by a constant holding the
    member.  ``ast.literal_eval`` returns a Constant's value as it is (on every supported
    Python), so the member passes through while every other non-literal node is still
    rejected by it."""

    def __init__(self, namespace: Mapping[str, Any], what: str, text: str) -> None:
        self.namespace, self.what, self.text = namespace, what, text

    def _resolve(self, node: ast.expr) -> ast.expr:
        path = _dotted(node)
        value = _lookup(path, self.namespace) if path is not None else None
        if not isinstance(value, enum.Enum):
            shown = path if path is not None else ast.unparse(node)
            raise InputError(
                f"{self.what} {self.text!r} is not a Python literal ({_EXAMPLES}); a name in it "
                f"must be an Enum member of the file, and {shown} is not one"
            )
        return ast.copy_location(ast.Constant(value), node)

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self._resolve(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        return self._resolve(node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        return node  # `set()` is a literal to ast.literal_eval, which rejects any other call


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _lookup(path: str, namespace: Mapping[str, Any]) -> Any:
    head, *rest = path.split(".")
    if head not in namespace:
        return None
    value = namespace[head]
    for attr in rest:
        if not isinstance(value, (type, types.ModuleType)):
            return None  # only names through modules and classes (an Enum's members)
        try:
            value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - a name that does not resolve names nothing
            return None
    return value


def call_text(name: str, text: str | None) -> str:
    """``name(arg, ...)`` for the arguments of option text `text` (as the user wrote them)."""
    if text is None or not text.strip():
        return f"{name}()"
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return f"{name}({text})"
    elts = body.elts if isinstance(body, (ast.Tuple, ast.List)) else [body]
    return f"{name}({', '.join(ast.unparse(e) for e in elts)})"


# ------------------------------------------------------------------ synthesis


class _Nothing:
    """No value can be synthesized from this type (distinct from the value None)."""


_NOTHING = _Nothing()


def synthesize(
    params: list[inspect.Parameter],
    annotated: Callable[..., Any] | None,
    namespace: Mapping[str, Any],
    where: str,
    option: str,
) -> Arguments:
    """Arguments for the required positional parameters `params` (self already left out);
    `annotated` is the function whose annotations they carry (for get_type_hints and its
    globals), `namespace` FILE's globals (to name Enum members), `where` the callable as the
    user knows it (``Server.handle``) and `option` the option that would choose them."""
    hints = _type_hints(annotated)
    globalns = getattr(annotated, "__globals__", None) or dict(namespace)
    values: list[Any] = []
    texts: list[str] = []
    for p in params:
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if p.default is not inspect.Parameter.empty:
            continue  # not passed: the call gets the default
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            raise InputError(
                f"{where}: parameter {p.name!r} is keyword-only and has no default; the workload "
                f"passes positional arguments only (give it a default, or run a --scenario)"
            )
        if p.annotation is inspect.Parameter.empty:
            raise _cannot(where, p.name, "has no annotation and no default", option)
        tp = hints[p.name] if p.name in hints else _annotation_from_text(p.annotation, globalns)
        value = _choose(tp, p.name)
        if value is _NOTHING:
            shown = p.annotation if isinstance(p.annotation, str) else _type_text(p.annotation)
            raise _cannot(where, p.name, f"is annotated {shown}", option)
        values.append(value)
        texts.append(_literal_text(value, namespace, where, p.name, option))
    if not values:
        return Arguments((), "()", synthesized=True)
    # always the tuple form: a single `()` or `[]` argument written alone would mean "no
    # arguments" / "its elements as the arguments" to parse()
    return Arguments(tuple(values), f"({', '.join(texts)},)", synthesized=True)


def _cannot(where: str, name: str, why: str, option: str) -> InputError:
    return InputError(
        f"{where}: parameter {name!r} {why}: nothing to synthesize an argument from; "
        f"give {option} (a Python literal, e.g. {option} \"('a', 1)\")"
    )


def _type_hints(fn: Callable[..., Any] | None) -> dict[str, Any]:
    if fn is None:
        return {}
    try:
        return typing.get_type_hints(getattr(fn, "__func__", fn))
    except Exception:  # noqa: BLE001 - any failure: each annotation's text is read instead
        return {}


class _UnknownMeta(type):
    """Unknown names in an annotation's text: ``mod.Thing`` and ``Thing[int]`` stay unknown."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unknown

    def __getitem__(cls, item: Any) -> Any:
        return _Unknown


class _Unknown(metaclass=_UnknownMeta):
    """Stands for a name an annotation's text uses that cannot be resolved: a class we know
    nothing about (so ``Optional[_Unknown]`` is None and ``_Unknown`` alone gives nothing)."""


class _Names(dict):  # type: ignore[type-arg]
    """eval's locals: a name missing from the globals and builtins is :class:`_Unknown` (a
    dict subclass, so that name lookups go through ``__missing__``)."""

    def __init__(self, globalns: Mapping[str, Any]) -> None:
        super().__init__()
        self.globalns = globalns

    def __missing__(self, key: str) -> Any:
        if key in self.globalns or hasattr(builtins, key):
            raise KeyError(key)
        return _Unknown


def _annotation_from_text(annotation: Any, globalns: Mapping[str, Any]) -> Any:
    """A runtime annotation as it is; a string one (``from __future__ import annotations``,
    or a quoted forward reference) evaluated with unknown names as :class:`_Unknown`; text
    that still does not evaluate gives :class:`_Unknown` (nothing to synthesize from)."""
    if not isinstance(annotation, str):
        return annotation
    try:
        # the user's own annotation text, evaluated as `typing.get_type_hints` would
        return eval(annotation, dict(globalns), _Names(globalns))
    except Exception:  # noqa: BLE001 - text that does not evaluate tells nothing
        return _Unknown


def _choose(tp: Any, name: str) -> Any:
    """The value of a parameter named `name` annotated `tp`, or ``_NOTHING``."""
    if tp is None or tp is type(None):
        return None
    if isinstance(tp, str):  # a quoted annotation get_type_hints left (nested forward ref)
        return _NOTHING
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _choose(args[0], name)
    if origin is typing.Union or origin is types.UnionType:
        if type(None) in args:
            return None
        for arm in args:  # tie-break: the first arm, in written order, that gives a value
            value = _choose(arm, name)
            if value is not _NOTHING:
                return value
        return _NOTHING
    if origin is typing.Literal:
        return args[0] if args else _NOTHING
    if origin in (list, dict, set, tuple):
        return origin()
    if tp in (list, dict, set, tuple):
        return tp()
    if tp is str:
        return name
    if tp is bool:
        return True
    if tp is int:
        return 1
    if tp is float:
        return 1.0
    if tp is bytes:
        return b"x"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = list(tp)
        return members[0] if members else _NOTHING
    supertype = getattr(tp, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return _choose(supertype, name)
    return _NOTHING


def _literal_text(
    value: Any, namespace: Mapping[str, Any], where: str, param: str, option: str
) -> str:
    """Text that :func:`parse` turns back into `value` in `namespace`."""
    if isinstance(value, enum.Enum):
        path = _enum_path(value, namespace)
        if path is None:
            raise _cannot(
                where,
                param,
                f"is an Enum ({type(value).__qualname__}) that the file's namespace does not name",
                option,
            )
        return path
    text = repr(value)
    try:
        back = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        back = _NOTHING
    if back != value or type(back) is not type(value):
        raise _cannot(where, param, f"gives {text}, which is not a Python literal", option)
    return text


def _enum_path(member: enum.Enum, namespace: Mapping[str, Any]) -> str | None:
    """A dotted name of `member` in `namespace`: through its class's qualified name, or a
    global bound to its class, or a module global holding its class; None if none."""
    cls = type(member)
    if not member.name.isidentifier() or _lookup(f"_.{member.name}", {"_": cls}) is not member:
        return None
    candidates = [cls.__qualname__]
    candidates += sorted(k for k, v in namespace.items() if v is cls)
    candidates += sorted(
        f"{k}.{cls.__qualname__}" for k, v in namespace.items() if isinstance(v, types.ModuleType)
    )
    for path in candidates:
        if "<locals>" not in path and _lookup(path, namespace) is cls:
            return f"{path}.{member.name}"
    return None


def _type_text(tp: Any) -> str:
    return inspect.formatannotation(tp)


def arguments_line(
    cls: str,
    method: str,
    tasks: int,
    args: str | None,
    init_args: str | None,
    args_synthesized: bool,
    init_args_synthesized: bool,
) -> str:
    """Stage 1's line naming the calls a workload runs."""
    ctor = f"{call_text(cls, init_args)}, then " if init_args and init_args.strip() else ""
    line = f"arguments: {ctor}{call_text(method, args)} x{tasks}"
    if args_synthesized and init_args_synthesized:
        line += " (synthesized from the signatures; --args, --init-args to choose)"
    elif args_synthesized:
        line += " (synthesized from the signature; --args to choose)"
    elif init_args_synthesized:
        line += " (constructor arguments synthesized from its signature; --init-args to choose)"
    return line
