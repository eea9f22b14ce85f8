"""Rewrites a module's ``ast`` so that every access to shared state reports itself.

What is rewritten (only code of the user's modules; see ``importer.py``):

====================================  ================================================
``obj.a`` (load)                       ``_cs_ga(obj, 'a', site)``  (read)
``obj.a = v`` / ``del obj.a``          ``_cs_sa(v, obj, 'a', site)`` / ``_cs_da(...)``
``x[k]``, ``x[k] = v``, ``del x[k]``   ``_cs_gi`` / ``_cs_si`` / ``_cs_di``
``x.m(...)``                           ``_cs_cm(x, 'm', kind, site, site2)(...)``: known mutators
                                       write the whole object, known pure methods read it,
                                       unknown methods write it (unless the callee is
                                       instrumented code, which records for itself)
``d.get(k)``, ``d.pop(k)``,            ``_cs_ck(d.get, kind, site, k, ...)``: keyed access
``d.setdefault(k, v)``                 on an exact dict, whole-object access elsewhere
``k in x`` / ``k not in x``            ``_cs_contains(k, x, site)``: keyed on a dict or
                                       set, else x whole and, for a sequence, its elements
                                       and k read as values
``list(x)``, ``sorted(x)``, ...        ``_cs_it`` / ``_cs_itv``: a whole-object read at once
                                       (iteration of an iterator or a generator is a
                                       write: it consumes it); sorted / min / max / sum /
                                       set / frozenset / dict also read the elements as
                                       values (compared, hashed)
global ``g`` in a function             ``_cs_gr(g, 'g', site)``; a store is followed by
                                       ``_cs_gw('g', site)``
closure cell ``c``                     ``_cs_cr(c, _cs_c_c, site)`` / ``_cs_cw(...)``; the
                                       defining function captures the cell object once
                                       at entry: ``_cs_c_c = (lambda: c).__closure__[0]``
``t.a op= v``                          read then write, ``t`` evaluated once (temporaries)
``[...]``, ``{...}``, ``{k: v}`` and   ``_cs_new(value, site)``: a write of the new object
their comprehensions                   flagged as created by the current step (CS_ID_CREATED),
                                       so the engine names it after its creator in every
                                       execution (not when it is iterated or tested with
                                       ``in`` on the spot: it never escapes the expression)
``C(...)``, ``list(...)``, ...         ``_cs_newcall(C, site, ...)`` for classes defined at
                                       the module's top level and list / dict / set /
                                       bytearray: the hook checks at run time that the callee
                                       only allocates (exact builtin type, or metaclass
                                       ``type`` and ``__new__`` = ``object.__new__``) and then
                                       records the instance as created before ``__init__``
                                       runs; any other callee is called plainly
``if x``, ``while x``, ``not x``,       ``_cs_tt(x, site)``: a truth test reads what
``x and y``, ``x or y``, ``a if x      __bool__ / __len__ read: a container whole, an
else b``, ``assert x``, ``bool(x)``,   instance whose __bool__/__len__ is not instrumented
``len(x)``, comprehension ``if``s      (and its attributes, deeply)
``a == b``, ``a < b``, ``a + b``,      ``_cs_bop(a, b, op, site)`` (chains: ``_cs_rv`` on
``a | b``, ``"%s" % x``, ...           each operand): both operands read as *values*:
                                       a container and every element, an instance whose
                                       comparison / hash / format dunders are not
                                       instrumented (a dataclass's generated ``__eq__``)
                                       and all its attributes (W_VALUE in hooks.c)
``f"{x}"``, ``str/repr/format/hash``   ``_cs_rv(x, site)``: read as a value
``{k: v}``, ``{x}``                    keys / elements read as values (hashed, compared)
``x op= v`` (any target)               ``_cs_aug(x, v, op, site)``: a mutable ``x`` is
                                       written whole (``lst += [...]`` mutates it), ``v``
                                       read as a value; the target stored as before
``for t in x``, comprehensions,        ``_cs_fi(x, site, unpack)`` / ``_cs_afi(x, site)``:
``async for``, ``enumerate/zip/map/    an iterator proxy recording at EVERY next() /
filter/iter(x)``, ``reversed(x)``      __anext__, in whichever step it runs, a read of a
                                       container (a dict view: of its dict) or a write of
                                       an iterator / (async) generator (consumed); the
                                       function given to map / filter is a proxy that
                                       records each call (``_cs_fw``)
``a, b = x``, ``f(*x)``, ``[*x]``,     ``_cs_it`` / ``_cs_rd``: iterated / read on the spot
``{**m}``
``match x``                            ``_cs_ra``: the subject read whole and deeply
``with x``, ``async with x``           ``_cs_cx``: x written whole unless its __enter__ /
                                       __exit__ (__aenter__ / __aexit__) are instrumented;
                                       asyncio's primitives are left to ``sync.py``
any other call                         ``_cs_call(f, site, *args, **kw)`` (after ``cm``:
                                       ``_cs_callm``, receiver already recorded): what f
                                       does to its own state -- a bound method (builtin
                                       or Python, in a variable, stored as a callback,
                                       from getattr) writes its receiver unless it is
                                       instrumented or a known pure method of a builtin
                                       container, a functools.partial acts on its bound
                                       arguments and its function's receiver, another
                                       callable object with an uninstrumented __call__ is
                                       written -- and what it does to the arguments:
                                       instrumented code records nothing extra; pure
                                       builtins, ``math``, builtin types and builtin
                                       methods of builtin containers and immutables read
                                       each mutable argument deeply; anything else writes
                                       it (containers' elements too)
``f(*a, **k)``                         the interpreter's own call (its error messages
                                       name f): ``_cs_fx(f, site)`` records f's own state,
                                       every argument is written (``_cs_aw``, ``_cs_sw``
                                       unpacks ``*a`` where the interpreter would,
                                       ``_cs_kw``)
``exec``, ``eval``, ``compile``,       ``_cs_bar(f, site)``: the global barrier, a write
``globals``, ``locals``,               of (CS_OBJECT_ALL, CS_KEY_WHOLE), which conflicts
``__import__``, ``breakpoint``,        with every access; the same when one of them is
``vars()``, changes of sys.modules     called through an alias (the call hook checks)
====================================  ================================================

Further rules of the hooks (ext/hooks.c): ``obj.name`` where ``name`` is found on the class
(a method, a class variable) also reads the name on each class of the MRO up to the defining
one, so ``Cls.x += 1`` in another task conflicts with ``self.x``; ``obj.__class__ = C`` and
``obj.__dict__ = d`` write the whole object; ``obj.__dict__`` and ``vars(obj)`` return a dict
registered as an alias of ``obj`` (its items are obj's attributes); a key of a type whose hashing
may run user code is read as a value; reads of module-level names bound by ``def`` / ``class`` /
``import`` are global reads like any other (monkeypatching them is a write).

Evaluation order is kept: store hooks take the value first (Python evaluates the right-hand
side before the target), targets of multiple or unpacking assignments are assigned from
temporaries left to right, augmented assignments evaluate their target's sub-expressions once.
New nodes carry the original node's location, and code is compiled with the real filename, so
tracebacks point at the user's lines.

Not rewritten (on purpose): annotations (``from __future__ import annotations`` turns them into
strings), ``match`` patterns (they must stay dotted names), name accesses in class bodies and at
module level (they run at import time), comprehension targets.

Approximations, each coarser than the truth (never missing an access):
- whole-object accesses stand for keyed ones (a method call, a truth test, a comparison);
  unknown methods and uninstrumented callees write what they are handed;
- a deep read or write walks at most 3000 objects and 48 levels, then records the global
  barrier with its kind (a read of everything, or a write of everything);
- every argument of a call with ``*args`` / ``**kw`` is written, whatever the callee;
- iteration records at most once per step per loop (the engine keeps one access per resource
  and step anyway).

Known gaps (under-approximations; each listed so that it is not mistaken for coverage):
- an uninstrumented callee handed an instance of a class whose dunders are default or
  instrumented records the instance whole, not the objects reachable through its attributes
  (``lib.mutate(self)`` changing ``self.items`` in place); instrument that library
  (``--instrument``) to see them;
- objects an uninstrumented callee keeps and touches later (a library storing a list and
  mutating it from a callback) are recorded where they were handed over only;
- ``yield from x`` and ``await x`` on a user awaitable record nothing for x itself;
- a ``__dict__`` obtained by uninstrumented code is not an alias of its owner;
- sys.modules changed by uninstrumented code (importlib), and module code run by an
  ``import`` statement at run time, are not barriers.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import symtable
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from chaossloth import compat
from chaossloth.capture import sites

# symtable scope codes (CPython's _symtable constants)
_LOCAL, _GLOBAL_EXPLICIT, _GLOBAL_IMPLICIT, _FREE, _CELL = 1, 2, 3, 4, 5

READ, WRITE = 1, 2

#: keyed methods: (name -> kind) when called with a first positional argument
KEYED = {"get": READ, "pop": WRITE, "setdefault": WRITE}
#: builtins whose positional arguments are iterated (read, or write for iterators)
ITER_BUILTINS = frozenset(
    [
        "sorted",
        "list",
        "tuple",
        "set",
        "frozenset",
        "sum",
        "min",
        "max",
        "any",
        "all",
        "enumerate",
        "zip",
        "reversed",
        "iter",
        "next",
        "dict",
        "map",
        "filter",
    ]
)
#: builtins that read their argument as a whole
READ_BUILTINS = frozenset(["len", "repr", "str", "bool", "hash", "ascii", "format"])

#: operator codes of the bop / aug hooks (ext/hooks.c binary_op): binary operators 0-12,
#: comparisons 20 + Py_LT ... Py_GE
_BINOPS = {
    ast.Add: 0, ast.Sub: 1, ast.Mult: 2, ast.MatMult: 3, ast.Div: 4, ast.FloorDiv: 5,
    ast.Mod: 6, ast.Pow: 7, ast.LShift: 8, ast.RShift: 9, ast.BitOr: 10, ast.BitXor: 11,
    ast.BitAnd: 12,
}  # fmt: skip
_CMPOPS = {ast.Lt: 20, ast.LtE: 21, ast.Eq: 22, ast.NotEq: 23, ast.Gt: 24, ast.GtE: 25}

_HOOKS = ("ga", "sa", "da", "gi", "si", "di", "cm", "ck", "contains", "gr", "gw", "cr", "cw",
          "rd", "it", "new", "newcall", "call", "callm", "tt", "rv", "ra", "bop", "aug", "fi",
          "afi", "fw", "bar", "itv", "fx", "aw", "sw", "kw", "rev", "cx")  # fmt: skip

#: builtins whose behaviour depends on the calling frame, or that must stay recognisable to the
#: compiler: never routed through the call hook
FRAME_BUILTINS = frozenset(["super", "locals", "globals", "vars", "dir", "eval", "exec",
                            "compile", "__import__", "breakpoint"])  # fmt: skip
#: builtins that run arbitrary code or expose a namespace: calling one is the global barrier
BARRIER_BUILTINS = frozenset(["locals", "globals", "eval", "exec", "compile", "__import__",
                              "breakpoint"])  # fmt: skip
#: builtins returning a lazy iterator over their iterable arguments: those are wrapped so that
#: each next() records its access (the function argument of map / filter is wrapped so that
#: each call records what it does)
LAZY_BUILTINS = frozenset(["enumerate", "zip", "map", "filter", "iter"])
#: eager consumers that also compare or hash the elements
VALUE_ITER_BUILTINS = frozenset(["sorted", "min", "max", "sum", "set", "frozenset", "dict"])
#: builtins that only test their argument's truth or length
TRUTH_BUILTINS = frozenset(["len", "bool"])
#: calls whose result is only a bool: no truth test to record on it
_BOOL_CALLS = frozenset(["isinstance", "issubclass", "callable", "hasattr"])

#: builtins whose call always returns a new object (checked again at run time by newcall)
NEW_BUILTINS = frozenset(["list", "dict", "set", "bytearray"])
_DISPLAYS = (ast.List, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp)


def hook_namespace() -> dict[str, Any]:
    """The names instrumented code refers to, to be put in the module's globals."""
    from chaossloth import _core

    ns: dict[str, Any] = {f"_cs_{h}": getattr(_core, h) for h in _HOOKS}
    ns["_cs_slice"] = slice
    return ns


def mangle(name: str, class_name: str | None) -> str:
    """Private name mangling as the compiler does it inside ``class class_name``."""
    if not class_name or not name.startswith("__") or name.endswith("__") or "." in name:
        return name
    stripped = class_name.lstrip("_")
    return f"_{stripped}{name}" if stripped else name


class _Source:
    """Source text of nodes (col offsets are UTF-8 byte offsets)."""

    def __init__(self, source: str) -> None:
        self.lines = [ln.encode("utf-8") for ln in source.splitlines(keepends=True)]

    def segment(self, node: ast.AST) -> str:
        try:
            l0, c0 = node.lineno - 1, node.col_offset  # type: ignore[attr-defined]
            l1, c1 = node.end_lineno - 1, node.end_col_offset  # type: ignore[attr-defined]
            if l0 == l1:
                return self.lines[l0][c0:c1].decode("utf-8", "replace")
            parts = [self.lines[l0][c0:]] + self.lines[l0 + 1 : l1] + [self.lines[l1][:c1]]
            return b"".join(parts).decode("utf-8", "replace")
        except (AttributeError, IndexError, TypeError):
            try:
                return ast.unparse(node)
            except Exception:  # pragma: no cover - unparse handles every expression  # noqa: BLE001
                return "?"


class _Scope:
    def __init__(
        self, kind: str, table: symtable.SymbolTable | None, parent: _Scope | None,
        class_name: str | None,
    ) -> None:  # fmt: skip
        self.kind = kind  # module, class, def, lambda, comp
        self.table = table
        self.parent = parent
        self.class_name = class_name
        self.symbols: dict[str, int] = {}
        self.children: dict[tuple[str, str, int], list[symtable.SymbolTable]] = defaultdict(list)
        if table is not None:
            for s in table.get_symbols():
                self.symbols[s.get_name()] = s._Symbol__scope  # type: ignore[attr-defined]
            for ch in table.get_children():
                self.children[(ch.get_type(), ch.get_name(), ch.get_lineno())].append(ch)
        self.shared_cells: set[str] = set()

    @property
    def function_like(self) -> bool:
        return self.kind in ("def", "lambda", "comp")

    def child(self, typ: str, name: str, lineno: int) -> symtable.SymbolTable | None:
        lst = self.children.get((typ, name, lineno))
        return lst.pop(0) if lst else None


_COMP_NAMES = {ast.ListComp: "listcomp", ast.SetComp: "setcomp", ast.DictComp: "dictcomp",
               ast.GeneratorExp: "genexpr"}  # fmt: skip


def _escapes(table: symtable.SymbolTable, name: str) -> bool:
    """Is `name` free in a nested scope that can outlive the frame (a def, a lambda, a
    generator expression), so that another task could reach the cell?"""
    for ch in table.get_children():
        if ch.get_name() in ("listcomp", "setcomp", "dictcomp"):
            if _escapes(ch, name):
                return True
            continue
        try:
            sym = ch.lookup(name)
        except KeyError:
            sym = None
        if sym is not None and sym._Symbol__scope == _FREE:  # type: ignore[attr-defined]
            return True
        if _escapes(ch, name):
            return True
    return False


def _module_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(bound, static): names bound at module level or declared global anywhere; and among
    them those bound only by def/class/import and never declared global (not recorded)."""
    static: set[str] = set()
    dynamic: set[str] = set()

    def targets(t: ast.AST) -> Iterable[str]:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                yield n.id

    def walk_level(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                static.add(s.name)
                continue
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    static.add((a.asname or a.name).split(".")[0])
                continue
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    dynamic.add(n.id)
                elif (
                    isinstance(n, (ast.MatchAs, ast.MatchStar))
                    and n.name
                    or isinstance(n, ast.ExceptHandler)
                    and n.name
                ):
                    dynamic.add(n.name)
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(s, field, None)
                if isinstance(sub, list):
                    walk_level([x for x in sub if isinstance(x, ast.stmt)])
                    for h in sub:
                        if isinstance(h, ast.ExceptHandler):
                            walk_level(h.body)
            if isinstance(s, ast.Match):
                for case in s.cases:
                    walk_level(case.body)

    walk_level(tree.body)
    for n in ast.walk(tree):
        if isinstance(n, ast.Global):
            dynamic.update(n.names)
    bound = static | dynamic
    return bound, static - dynamic


class Instrumenter(ast.NodeTransformer):
    """One use per module: ``Instrumenter(source, filename).run(tree)``."""

    def __init__(self, source: str, filename: str) -> None:
        self.src = _Source(source)
        self.filename = filename
        self.scope: _Scope | None = None
        self.tmp = 0
        self.bound: set[str] = set()
        self.static: set[str] = set()
        self.classes: set[str] = set()

    # ----------------------------------------------------------------- helpers

    def run(self, tree: ast.Module, table: symtable.SymbolTable) -> ast.Module:
        self.bound, self.static = _module_names(tree)
        self.classes = {s.name for s in tree.body if isinstance(s, ast.ClassDef)} & self.static
        self.scope = _Scope("module", table, None, None)
        tree.body = self._stmts(tree.body)
        ast.fix_missing_locations(tree)
        return tree

    def _site(self, node: ast.AST, name: str, kind: str) -> ast.Constant:
        sid = sites.register(
            self.filename, getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
            self.src.segment(node), name, kind,
        )  # fmt: skip
        return ast.Constant(sid)

    @staticmethod
    def _loc(new: ast.AST, old: ast.AST) -> Any:
        for n in ast.walk(new):
            if "lineno" in n._attributes and not hasattr(n, "lineno"):
                ast.copy_location(n, old)
        return new

    def _call(self, hook: str, args: list[ast.expr], old: ast.AST) -> ast.Call:
        return self._loc(ast.Call(ast.Name(f"_cs_{hook}", ast.Load()), args, []), old)

    def _expr_stmt(self, call: ast.expr, old: ast.AST) -> ast.stmt:
        return self._loc(ast.Expr(call), old)

    def _temp(self) -> str:
        self.tmp += 1
        return f"_cs_t{self.tmp}"

    def _stmts(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in body:
            r = self.visit(s)
            if r is None:
                continue
            if isinstance(r, list):
                out.extend(r)
            else:
                out.append(r)
        return out

    def _in_scope(self, scope: _Scope, fn: Any) -> Any:
        saved = self.scope
        self.scope = scope
        try:
            return fn()
        finally:
            self.scope = saved

    def _child_scope(self, kind: str, typ: str, name: str, node: ast.AST) -> _Scope:
        parent = self.scope
        assert parent is not None
        table = parent.child(typ, name, node.lineno)  # type: ignore[attr-defined]
        cname = parent.class_name
        if kind == "class":
            cname = name
        return _Scope(kind, table, parent, cname)

    # ------------------------------------------------------------ name resolution

    def _classify(self, name: str) -> str | None:
        """'global', 'cell' or None (local, builtin, not recorded) for a name in the current
        scope."""
        s = self.scope
        if s is None or not s.function_like:
            return None
        if name.startswith("_cs_") or name in ("__class__", "__classdict__"):
            return None
        m = mangle(name, s.class_name)
        sc = s.symbols.get(m)
        if sc in (_GLOBAL_EXPLICIT, _GLOBAL_IMPLICIT):
            # names bound by def / class / import are globals too: another task (or module)
            # may rebind them (monkeypatching)
            if name not in self.bound and hasattr(builtins, name):
                return None
            return "global"
        if sc in (_FREE, _CELL):
            d: _Scope | None = s
            while d is not None and (d.kind == "class" or d.symbols.get(m) != _CELL):
                d = d.parent
            if d is None or d.kind != "def" or m not in d.shared_cells:
                return None
            return "cell"
        return None

    def _is_builtin(self, name: str) -> bool:
        s = self.scope
        if s is None or name in self.bound or not hasattr(builtins, name):
            return False
        sc = s.symbols.get(mangle(name, s.class_name))
        if s.function_like:
            return sc == _GLOBAL_IMPLICIT
        return sc is None or sc in (_GLOBAL_IMPLICIT,) or (s.kind == "module")

    def _cell_var(self, name: str) -> str:
        assert self.scope is not None
        return f"_cs_c_{mangle(name, self.scope.class_name)}"

    def _name_read(self, node: ast.Name) -> ast.expr:
        cls = self._classify(node.id)
        if cls == "global":
            site = self._site(node, f"global {node.id}", "global")
            return self._call("gr", [node, ast.Constant(node.id), site], node)
        if cls == "cell":
            site = self._site(node, f"nonlocal {node.id}", "cell")
            cell = ast.Name(self._cell_var(node.id), ast.Load())
            return self._call("cr", [node, cell, site], node)
        return node

    def _name_write_record(self, node: ast.Name) -> ast.stmt | None:
        cls = self._classify(node.id)
        if cls == "global":
            site = self._site(node, f"global {node.id}", "global")
            return self._expr_stmt(self._call("gw", [ast.Constant(node.id), site], node), node)
        if cls == "cell":
            site = self._site(node, f"nonlocal {node.id}", "cell")
            cell = ast.Name(self._cell_var(node.id), ast.Load())
            return self._expr_stmt(self._call("cw", [cell, site], node), node)
        return None

    # ----------------------------------------------------------------- scopes

    def _visit_args(self, args: ast.arguments) -> None:
        args.defaults = [self.visit(d) for d in args.defaults]
        args.kw_defaults = [self.visit(d) if d is not None else None for d in args.kw_defaults]

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        self._visit_args(node.args)
        scope = self._child_scope("def", "function", node.name, node)
        if scope.table is not None:
            for name, sc in scope.symbols.items():
                if (
                    sc == _CELL
                    and name not in ("__class__", "__classdict__")
                    and not compat.from_inlined_comprehension(scope.table.lookup(name))
                    and _escapes(scope.table, name)
                ):
                    scope.shared_cells.add(name)
        body = self._in_scope(scope, lambda: self._stmts(node.body))
        prologue: list[ast.stmt] = []
        for name in sorted(scope.shared_cells):
            # _cs_c_x = (lambda: x).__closure__[0]: the cell object, without loading x
            lam = ast.Lambda(
                ast.arguments([], [], None, [], [], None, []), ast.Name(name, ast.Load())
            )
            get = ast.Subscript(ast.Attribute(lam, "__closure__", ast.Load()), ast.Constant(0),
                                ast.Load())  # fmt: skip
            prologue.append(
                self._loc(ast.Assign([ast.Name(f"_cs_c_{name}", ast.Store())], get), node.body[0])
            )
        if prologue:
            first = 0
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                first = 1  # keep the docstring first
            body[first:first] = prologue
        node.body = body
        return node

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self._visit_args(node.args)
        scope = self._child_scope("lambda", "function", "lambda", node)
        node.body = self._in_scope(scope, lambda: self.visit(node.body))
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        scope = self._child_scope("class", "class", node.name, node)
        node.body = self._in_scope(scope, lambda: self._stmts(node.body))
        return node

    def _visit_comp(self, node: Any) -> ast.AST:
        gens: list[ast.comprehension] = node.generators
        gens[0].iter = self._wrap_iter(self._visit_consumed(gens[0].iter), gens[0])
        scope = self._child_scope("comp", "function", _COMP_NAMES[type(node)], node)
        if scope.table is None and compat.COMPREHENSIONS_INLINED:
            scope = self._inlined_comp_scope(node)

        def inner() -> None:
            for i, g in enumerate(gens):
                if i > 0:
                    g.iter = self._wrap_iter(self._visit_consumed(g.iter), g)
                g.ifs = [self._test(c) for c in g.ifs]
            if isinstance(node, ast.DictComp):
                node.key = self.visit(node.key)
                node.value = self.visit(node.value)
            else:
                node.elt = self.visit(node.elt)

        self._in_scope(scope, inner)
        return node

    def _inlined_comp_scope(self, node: Any) -> _Scope:
        """3.12+ (PEP 709): a list/set/dict comprehension without a table of its own.  Its
        names resolve as in a function nested in the enclosing scope (class and module names
        are globals there); its targets are its own; its lambdas are the parent's children."""
        parent = self.scope
        assert parent is not None
        scope = _Scope("comp", None, parent, parent.class_name)
        scope.children = parent.children
        for name, sc in parent.symbols.items():
            if parent.kind in ("module", "class") and sc not in (_FREE, _GLOBAL_EXPLICIT):
                sc = _GLOBAL_IMPLICIT
            scope.symbols[name] = _FREE if sc == _CELL else sc  # the parent's cell
        for g in node.generators:
            for n in ast.walk(g.target):
                if isinstance(n, ast.Name):
                    scope.symbols[mangle(n.id, parent.class_name)] = _CELL  # its own variable
        return scope

    def _visit_new_comp(self, node: Any) -> ast.AST:
        return self._new(self._visit_comp(node), node)

    visit_ListComp = _visit_new_comp
    visit_SetComp = _visit_new_comp
    visit_DictComp = _visit_new_comp
    visit_GeneratorExp = _visit_comp

    # ------------------------------------------------------------- allocations

    def _new(self, new: ast.expr, old: ast.expr) -> ast.expr:
        """`new` (the instrumented display or comprehension `old`) recorded as created by the
        current step."""
        site = self._site(old, self.src.segment(old), "new")
        return self._call("new", [new, site], old)

    def visit_List(self, node: ast.List) -> ast.AST:
        self.generic_visit(node)
        return self._new(node, node) if isinstance(node.ctx, ast.Load) else node

    def visit_Set(self, node: ast.Set) -> ast.AST:
        return self._new(self._set_parts(node), node)

    def _set_parts(self, node: ast.Set) -> ast.Set:
        # elements are hashed and compared: read as values
        node.elts = [self._wrap("rv", self.visit(e), "whole") for e in node.elts]
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        return self._new(self._dict_parts(node), node)

    def _dict_parts(self, node: ast.Dict) -> ast.Dict:
        # keys are hashed and compared: read as values
        node.keys = [self._wrap("rv", self.visit(k), "whole") if k is not None else None
                     for k in node.keys]  # fmt: skip
        # `**m` in a display is consumed by the display
        node.values = [self.visit(v) if k is not None
                       else self._wrap("rd", self._visit_consumed(v), "whole")
                       for k, v in zip(node.keys, node.values)]  # fmt: skip
        return node

    def _visit_consumed(self, node: ast.expr) -> ast.expr:
        """An expression whose value is consumed on the spot (iterated, searched with `in`,
        unpacked into arguments): a display there never escapes, so it is not recorded as
        created (it would cost an access and gain nothing)."""
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
            return self._visit_comp(node)  # type: ignore[no-any-return]
        if isinstance(node, ast.List):
            return self.generic_visit(node)  # type: ignore[return-value]
        if isinstance(node, ast.Set):
            return self._set_parts(node)
        if isinstance(node, ast.Dict):
            return self._dict_parts(node)
        return self.visit(node)  # type: ignore[no-any-return]

    def visit_Starred(self, node: ast.Starred) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            # `*x` iterates x on the spot (a read of a container, a write of an iterator)
            node.value = self._wrap("it", self._visit_consumed(node.value), "whole")
            return node
        return self.generic_visit(node)

    def _is_module_class(self, name: str) -> bool:
        """Does `name`, loaded in the current scope, refer to a class statement at the top
        level of this module (never rebound)?  Only a hint: newcall checks the callee."""
        s = self.scope
        if s is None or name not in self.classes:
            return False
        if s.kind == "module":
            return True
        return s.symbols.get(mangle(name, s.class_name)) in (_GLOBAL_IMPLICIT, _GLOBAL_EXPLICIT)

    def _newcall(self, node: ast.Call) -> ast.Call:
        """`node` (instrumented) as newcall(func, site, *args, **kw)."""
        site = self._site(node, self.src.segment(node), "new")
        call = ast.Call(ast.Name("_cs_newcall", ast.Load()), [node.func, site, *node.args],
                        node.keywords)  # fmt: skip
        return self._loc(call, node)  # type: ignore[no-any-return]

    # ------------------------------------------------------------ expressions

    def _wrap_iter(
        self, new: ast.expr, loop: ast.For | ast.AsyncFor | ast.comprehension
    ) -> ast.expr:
        """The iterable of a loop or comprehension (`new`, instrumented) as an iterator that
        records its access at every next() / __anext__, in whichever step that happens (a
        loop spanning awaits reads the container again after each await).  `for ... in
        range(...)` stays as is (nothing to record)."""
        old = loop.iter
        is_async = isinstance(loop, ast.AsyncFor) or (
            isinstance(loop, ast.comprehension) and bool(loop.is_async)
        )
        if (
            not is_async
            and isinstance(old, ast.Call)
            and isinstance(old.func, ast.Name)
            and old.func.id == "range"
            and self._is_builtin("range")
        ):
            return new
        site = self._site(old, self.src.segment(old), "iter")
        if is_async:
            return self._call("afi", [new, site], old)
        unpack = ast.Constant(1 if isinstance(loop.target, (ast.Tuple, ast.List)) else 0)
        return self._call("fi", [new, site, unpack], old)

    def _slice(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Slice):
            parts = [self.visit(p) if p is not None else ast.Constant(None)
                     for p in (node.lower, node.upper, node.step)]  # fmt: skip
            return self._loc(ast.Call(ast.Name("_cs_slice", ast.Load()), parts, []), node)
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
            return self._loc(ast.Tuple([self._slice(e) for e in node.elts], ast.Load()), node)
        return self.visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            return self._name_read(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if not isinstance(node.ctx, ast.Load):
            node.value = self.visit(node.value)
            return node
        attr = mangle(node.attr, self.scope.class_name if self.scope else None)
        site = self._site(node, self.src.segment(node), "attr")
        return self._call("ga", [self.visit(node.value), ast.Constant(attr), site], node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if not isinstance(node.ctx, ast.Load):
            node.value = self.visit(node.value)
            node.slice = self._slice(node.slice)
            return node
        site = self._site(node, self.src.segment(node.value), "item")
        return self._call("gi", [self.visit(node.value), self._slice(node.slice), site], node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            container = node.comparators[0]
            site = self._site(node, self.src.segment(container), "contains")
            call = self._call(
                "contains", [self.visit(node.left), self._visit_consumed(container), site], node
            )
            if isinstance(node.ops[0], ast.NotIn):
                return self._loc(ast.UnaryOp(ast.Not(), call), node)
            return call
        if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return self.generic_visit(node)
        if len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
            # a comparison calls the operands' dunders (a dataclass __eq__ reads every field,
            # list == list compares the elements): both read as values
            site = self._site(node, self.src.segment(node), "compare")
            code = ast.Constant(_CMPOPS[type(node.ops[0])])
            left, right = self.visit(node.left), self.visit(node.comparators[0])
            return self._call("bop", [left, right, code, site], node)
        # a chain: each operand read as a value where it is evaluated
        node.left = self._wrap("rv", self.visit(node.left), "compare")
        node.comparators = [self._wrap("rv", self._visit_consumed(c) if isinstance(op, (ast.In, ast.NotIn)) else self.visit(c), "compare")
                            for op, c in zip(node.ops, node.comparators)]  # fmt: skip
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant):
            node.left, node.right = left, right
            return node
        # an operator on containers or user objects reads both operands (list + list,
        # dict | dict, "%s" % obj, dataclass operators)
        site = self._site(node, self.src.segment(node), "operator")
        return self._call("bop", [left, right, ast.Constant(_BINOPS[type(node.op)]), site], node)

    # ------------------------------------------------------------ truth tests

    def _test(self, node: ast.expr) -> ast.expr:
        """`node` (not yet visited) in a position whose truth the interpreter tests: the test
        calls __bool__ / __len__, a read of the object (a container's length)."""
        if isinstance(node, ast.BoolOp):
            return self._boolop(node, tested=True)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node.operand = self._test(node.operand)
            return node
        new = self.visit(node)
        if self._bool_valued(node):
            return new
        site = self._site(node, self.src.segment(node), "truth")
        return self._call("tt", [new, site], node)

    @staticmethod
    def _bool_valued(node: ast.expr) -> bool:
        """Is node's value a bool (or a constant), whose truth test runs no user code?"""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Compare):
            # `in` and `is` give bools; a rich comparison may return anything, but its
            # operands were read as values
            return all(isinstance(op, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for op in node.ops)
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _BOOL_CALLS
        )

    def _boolop(self, node: ast.BoolOp, tested: bool) -> ast.expr:
        # every operand but the last is tested by the operator itself; the last one only when
        # the whole expression is
        last = len(node.values) - 1
        node.values = [self._test(v) if i < last or tested else self.visit(v)
                       for i, v in enumerate(node.values)]  # fmt: skip
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        return self._boolop(node, tested=False)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.op, ast.Not):
            node.operand = self._test(node.operand)
            return node
        return self.generic_visit(node)

    def visit_If(self, node: ast.If) -> ast.AST:
        node.test = self._test(node.test)
        node.body = self._stmts(node.body)
        node.orelse = self._stmts(node.orelse)
        return node

    def visit_While(self, node: ast.While) -> ast.AST:
        node.test = self._test(node.test)
        node.body = self._stmts(node.body)
        node.orelse = self._stmts(node.orelse)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        node.test = self._test(node.test)
        node.body = self.visit(node.body)
        node.orelse = self.visit(node.orelse)
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        node.test = self._test(node.test)
        if node.msg is not None:
            node.msg = self.visit(node.msg)
        return node

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        # formatting calls __format__ / __str__ / __repr__: a read of the value
        node.value = self._wrap("rv", self.visit(node.value), "format")
        if node.format_spec is not None:
            node.format_spec = self.visit(node.format_spec)
        return node

    def visit_Match(self, node: ast.Match) -> ast.AST:
        # patterns read the subject's attributes, items and length
        node.subject = self._wrap("ra", self.visit(node.subject), "whole")
        node.cases = [self.visit(c) for c in node.cases]
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.ctx, ast.Load):
            recv = func.value
            attr = mangle(func.attr, self.scope.class_name if self.scope else None)
            new_recv = self.visit(recv)
            args = [self.visit(a) for a in node.args]
            keywords = [self.visit(k) for k in node.keywords]
            recv_text = self.src.segment(recv)
            if (
                func.attr in KEYED
                and node.args
                and not isinstance(node.args[0], ast.Starred)
                and not node.keywords
            ):
                site = self._site(node, recv_text, "keyed")
                method = self._loc(ast.Attribute(new_recv, attr, ast.Load()), func)
                kind = ast.Constant(KEYED[func.attr])
                return self._call("ck", [method, kind, site, *args], node)
            site = self._site(node, recv_text, "method")
            attr_site = self._site(func, self.src.segment(func), "attr")
            getter = self._call("cm", [new_recv, ast.Constant(attr), site, attr_site], func)
            call = self._loc(ast.Call(getter, args, keywords), node)
            return self._arg_call(call, node, "callm")
        if isinstance(func, ast.Name) and self._is_builtin(func.id):
            return self._builtin_call(node, func.id)
        if isinstance(func, ast.Name) and self._is_module_class(func.id) and self._plain_args(node):
            return self._newcall(self.generic_visit(node))  # type: ignore[arg-type]
        return self._arg_call(self.generic_visit(node), node, "call", always=True)  # type: ignore[arg-type]

    def _wrap(self, hook: str, e: ast.expr, kind: str, *extra: ast.expr) -> ast.expr:
        """hook(e, site, *extra) unless e is a constant or starred (already handled)."""
        if isinstance(e, (ast.Starred, ast.Constant)):
            return e
        site = self._site(e, self.src.segment(e), kind)
        return self._call(hook, [e, site, *extra], e)

    def _builtin_call(self, node: ast.Call, name: str) -> ast.expr:
        """A call of a builtin by its name: what the builtin does with its arguments is known
        here (iterating them, lazily or not, testing their truth, formatting them)."""
        site_of = self._site
        if name in BARRIER_BUILTINS:
            # the name stays a plain load (frame-dependent builtins see the user's frame)
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            site = site_of(node, self.src.segment(node), "barrier")
            node.func = self._call("bar", [node.func, site], node.func)
            return node
        if name in LAZY_BUILTINS:
            args = [self._visit_consumed(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            first_fn = name in ("map", "filter") or (name == "iter" and len(args) == 2)
            wrapped: list[ast.expr] = []
            for i, a in enumerate(args):
                if i == 0 and first_fn:
                    wrapped.append(self._wrap("fw", a, "call"))
                elif name == "iter" and i > 0:
                    wrapped.append(a)
                else:
                    mode = 2 if name == "iter" else 0
                    wrapped.append(self._wrap("fi", a, "iter", ast.Constant(mode)))
            node.args = wrapped
            return self._arg_call(node, node, "call")
        if (
            name == "reversed"
            and len(node.args) == 1
            and self._plain_args(node)
            and not node.keywords
        ):
            # reversed() needs the sequence itself: the hook builds it and reads the sequence
            # at every next()
            arg = self._visit_consumed(node.args[0])
            site = site_of(node, self.src.segment(node), "iter")
            return self._call("rev", [arg, site], node)
        if name in VALUE_ITER_BUILTINS or name in ITER_BUILTINS:
            hook = "itv" if name in VALUE_ITER_BUILTINS else "it"
            node.args = [self._wrap(hook, self._visit_consumed(a), "whole") for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            if name in NEW_BUILTINS and self._plain_args(node):
                return self._newcall(node)
            return self._arg_call(node, node, "call")
        if name in TRUTH_BUILTINS or name in READ_BUILTINS:
            hook = "tt" if name in TRUTH_BUILTINS else "rv"
            node.args = [self._wrap(hook, self.visit(a), "whole") for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return self._arg_call(node, node, "call")
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        if name in NEW_BUILTINS and self._plain_args(node):
            return self._newcall(node)
        if name == "super":
            return node
        return self._arg_call(node, node, "call", always=name == "vars")

    def _arg_call(self, new: ast.Call, old: ast.Call, hook: str, always: bool = False) -> ast.expr:
        """`new` (instrumented) as hook(func, site, *args, **kw), so that what the call does to
        the callee's own state (a bound method's receiver, a partial's bound arguments) and to
        the arguments handed to code that does not record itself is recorded.  `callm` follows
        `cm`, which recorded the receiver and the callee already: a call of it with nothing but
        constants to hand over stays plain (so does a builtin's); any other call goes through
        `call` (`always`).

        Calls with `*args` / `**kw` stay the interpreter's calls (a malformed `*` / `**`
        argument raises the message naming the callee): the callee goes through fx (its own
        state), and every argument is recorded as written where it is evaluated (aw, sw, kw),
        since the callee's effect is not known there."""
        if not self._plain_args(new):
            return self._starred_call(new, old, hook)
        values = [*new.args, *(k.value for k in new.keywords)]
        if not always and all(isinstance(v, ast.Constant) for v in values):
            return new
        site = self._site(old, self.src.segment(old), "call")
        call = ast.Call(ast.Name(f"_cs_{hook}", ast.Load()), [new.func, site, *new.args],
                        new.keywords)  # fmt: skip
        return self._loc(call, old)  # type: ignore[no-any-return]

    def _starred_call(self, new: ast.Call, old: ast.Call, hook: str) -> ast.expr:
        site = self._site(old, self.src.segment(old), "call")
        if hook == "call":
            new.func = self._call("fx", [new.func, site], old)

        def unwrap(e: ast.expr, was: str) -> ast.expr:
            # visit_Starred / visit_keyword wrapped the value in it / rd: replaced here
            if (
                isinstance(e, ast.Call)
                and isinstance(e.func, ast.Name)
                and e.func.id == f"_cs_{was}"
            ):
                return e.args[0]
            return e

        args: list[ast.expr] = []
        for a in new.args:
            if isinstance(a, ast.Starred):
                a.value = self._call("sw", [unwrap(a.value, "it"), site], a.value)
                args.append(a)
            else:
                args.append(self._wrap("aw", a, "call"))
        new.args = args
        for k in new.keywords:
            if k.arg is None:
                k.value = self._call("kw", [unwrap(k.value, "rd"), site], k.value)
            else:
                k.value = self._wrap("aw", k.value, "call")
        return new

    @staticmethod
    def _plain_args(node: ast.Call) -> bool:
        """No `*args` / `**kw`: the call can be forwarded with identical error messages."""
        return not any(isinstance(a, ast.Starred) for a in node.args) and all(
            k.arg is not None for k in node.keywords
        )

    def visit_NamedExpr(self, node: ast.NamedExpr) -> ast.AST:
        node.value = self.visit(node.value)
        rec = self._name_write_record(node.target)
        if rec is None:
            return node
        # (x := v, record)[0]: the value of the walrus, then the record of the store
        assert isinstance(rec, ast.Expr)
        tup = ast.Tuple([node, rec.value], ast.Load())
        return self._loc(ast.Subscript(tup, ast.Constant(0), ast.Load()), node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        node.value = self.visit(node.value)
        if node.arg is None:
            # `**m` reads the whole mapping
            node.value = self._wrap("rd", node.value, "whole")
        return node

    def visit_match_case(self, node: ast.match_case) -> ast.AST:
        # patterns stay untouched: they must remain literals and dotted names
        if node.guard is not None:
            node.guard = self._test(node.guard)
        node.body = self._stmts(node.body)
        return node

    # ------------------------------------------------------------- statements

    def _needs(self, target: ast.expr) -> bool:
        if isinstance(target, ast.Name):
            return self._classify(target.id) is not None
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            return True
        if isinstance(target, (ast.Tuple, ast.List)):
            return any(self._needs(e) for e in target.elts)
        if isinstance(target, ast.Starred):
            return self._needs(target.value)
        return False

    def _assign(self, target: ast.expr, value: ast.expr, old: ast.AST) -> list[ast.stmt]:
        """Statements that store `value` (an already instrumented expression, evaluated
        once) into `target`, recording the writes."""
        if isinstance(target, ast.Name):
            stmts: list[ast.stmt] = [self._loc(ast.Assign([target], value), old)]
            rec = self._name_write_record(target)
            return stmts + ([rec] if rec is not None else [])
        if isinstance(target, ast.Attribute):
            attr = mangle(target.attr, self.scope.class_name if self.scope else None)
            site = self._site(target, self.src.segment(target), "attr")
            call = self._call("sa", [value, self.visit(target.value), ast.Constant(attr), site],
                              target)  # fmt: skip
            return [self._expr_stmt(call, old)]
        if isinstance(target, ast.Subscript):
            site = self._site(target, self.src.segment(target.value), "item")
            call = self._call(
                "si", [value, self.visit(target.value), self._slice(target.slice), site], target
            )
            return [self._expr_stmt(call, old)]
        if isinstance(target, (ast.Tuple, ast.List)):
            if not self._needs(target):
                return [self._loc(ast.Assign([target], value), old)]
            temps: list[str] = []
            shape: list[ast.expr] = []
            for e in target.elts:
                t = self._temp()
                temps.append(t)
                store = ast.Name(t, ast.Store())
                shape.append(ast.Starred(store, ast.Store()) if isinstance(e, ast.Starred)
                             else store)  # fmt: skip
            out: list[ast.stmt] = [self._loc(ast.Assign([ast.Tuple(shape, ast.Store())], value),
                                             old)]  # fmt: skip
            for e, t in zip(target.elts, temps):
                inner = e.value if isinstance(e, ast.Starred) else e
                out += self._assign(inner, ast.Name(t, ast.Load()), old)
            out.append(self._del_temps(temps, old))
            return out
        # anything else (a Starred at top level cannot occur): store natively
        return [self._loc(ast.Assign([target], value), old)]

    def _del_temps(self, temps: list[str], old: ast.AST) -> ast.stmt:
        return self._loc(ast.Delete([ast.Name(t, ast.Del()) for t in temps]), old)

    def visit_Assign(self, node: ast.Assign) -> Any:
        value = self.visit(node.value)
        if any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets) and not isinstance(
            node.value, (ast.Tuple, ast.List)
        ):
            # unpacking iterates the value (a read of a container, a write of an iterator)
            value = self._wrap("it", value, "whole")
        if not any(self._needs(t) for t in node.targets):
            node.targets = [self._visit_store_target(t) for t in node.targets]
            node.value = value
            return node
        if len(node.targets) == 1:
            return self._assign(node.targets[0], value, node)
        t = self._temp()
        out: list[ast.stmt] = [self._loc(ast.Assign([ast.Name(t, ast.Store())], value), node)]
        for target in node.targets:
            out += self._assign(target, ast.Name(t, ast.Load()), node)
        out.append(self._del_temps([t], node))
        return out

    def _visit_store_target(self, t: ast.expr) -> ast.expr:
        """A target with nothing to record: only its sub-expressions may be rewritten (none for
        names, tuples of names and starred names)."""
        return t

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        if node.value is None:
            return node
        node.value = self.visit(node.value)
        s = self.scope
        if isinstance(node.target, ast.Name):
            rec = self._name_write_record(node.target)
            return [node, rec] if rec is not None else node
        if s is not None and s.function_like:
            # annotations of non-name targets are not evaluated in functions: a plain store
            return self._assign(node.target, node.value, node)
        node.target.value = self.visit(node.target.value)  # type: ignore[attr-defined]
        return node

    def _simple(self, e: ast.expr) -> bool:
        """Can `e` be evaluated twice with no difference?  (constants, plain locals)"""
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            s = self.scope
            if s is None or not s.function_like:
                return False
            return s.symbols.get(mangle(e.id, s.class_name)) == _LOCAL
        return False

    def _aug(self, read: ast.expr, value: ast.expr, node: ast.AugAssign) -> ast.expr:
        """aug(read, value, op, site): the in-place operator, a write of a mutable left
        operand (`x += [...]`, `d |= {...}` mutate x, not only rebind it)."""
        site = self._site(node, self.src.segment(node), "inplace")
        code = ast.Constant(_BINOPS[type(node.op)])
        return self._call("aug", [read, value, code, site], node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        target = node.target
        if isinstance(target, ast.Name):
            value = self.visit(node.value)
            load = ast.Name(target.id, ast.Load())
            ast.copy_location(load, target)
            store = ast.Name(target.id, ast.Store())
            ast.copy_location(store, target)
            new = self._aug(self._name_read(load), value, node)
            out: list[ast.stmt] = [self._loc(ast.Assign([store], new), node)]
            rec = self._name_write_record(target)
            return out + ([rec] if rec is not None else [])
        temps: list[str] = []
        out = []

        def once(e: ast.expr) -> ast.expr:
            if self._simple(e):
                return e
            t = self._temp()
            temps.append(t)
            out.append(self._loc(ast.Assign([ast.Name(t, ast.Store())], e), node))
            return ast.Name(t, ast.Load())

        cname = self.scope.class_name if self.scope else None
        if isinstance(target, ast.Attribute):
            obj = once(self.visit(target.value))
            attr = ast.Constant(mangle(target.attr, cname))
            site = self._site(target, self.src.segment(target), "attr")
            read = self._call("ga", [obj, attr, site], target)
            new = self._aug(read, self.visit(node.value), node)
            out.append(self._expr_stmt(self._call("sa", [new, obj, attr, site], target), node))
        elif isinstance(target, ast.Subscript):
            obj = once(self.visit(target.value))
            key = once(self._slice(target.slice))
            site = self._site(target, self.src.segment(target.value), "item")
            read = self._call("gi", [obj, key, site], target)
            new = self._aug(read, self.visit(node.value), node)
            out.append(self._expr_stmt(self._call("si", [new, obj, key, site], target), node))
        else:  # pragma: no cover - the grammar allows nothing else
            return self.generic_visit(node)
        if temps:
            out.append(self._del_temps(temps, node))
        return out

    def _delete(self, target: ast.expr, old: ast.AST) -> list[ast.stmt]:
        cname = self.scope.class_name if self.scope else None
        if isinstance(target, ast.Attribute):
            site = self._site(target, self.src.segment(target), "attr")
            call = self._call(
                "da",
                [self.visit(target.value), ast.Constant(mangle(target.attr, cname)), site],
                target,
            )
            return [self._expr_stmt(call, old)]
        if isinstance(target, ast.Subscript):
            site = self._site(target, self.src.segment(target.value), "item")
            call = self._call(
                "di", [self.visit(target.value), self._slice(target.slice), site], target
            )
            return [self._expr_stmt(call, old)]
        if isinstance(target, ast.Name):
            out: list[ast.stmt] = [self._loc(ast.Delete([target]), old)]
            rec = self._name_write_record(target)
            return out + ([rec] if rec is not None else [])
        if isinstance(target, (ast.Tuple, ast.List)):
            res: list[ast.stmt] = []
            for e in target.elts:
                res += self._delete(e, old)
            return res
        return [self._loc(ast.Delete([target]), old)]  # pragma: no cover

    def visit_Delete(self, node: ast.Delete) -> Any:
        if not any(self._needs(t) for t in node.targets):
            return node
        out: list[ast.stmt] = []
        for t in node.targets:
            out += self._delete(t, node)
        return out

    def _loop_target(self, node: ast.For | ast.AsyncFor) -> list[ast.stmt]:
        if not self._needs(node.target):
            return []
        t = self._temp()
        target = node.target
        node.target = self._loc(ast.Name(t, ast.Store()), target)
        return self._assign(target, ast.Name(t, ast.Load()), target)

    def visit_For(self, node: ast.For) -> Any:
        node.iter = self._wrap_iter(self._visit_consumed(node.iter), node)
        pre = self._loop_target(node)
        node.body = pre + self._stmts(node.body)
        node.orelse = self._stmts(node.orelse)
        return node

    def visit_AsyncFor(self, node: ast.AsyncFor) -> Any:
        node.iter = self._wrap_iter(self.visit(node.iter), node)
        pre = self._loop_target(node)
        node.body = pre + self._stmts(node.body)
        node.orelse = self._stmts(node.orelse)
        return node

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> Any:
        protocol = ast.Constant(1 if isinstance(node, ast.AsyncWith) else 0)
        for item in node.items:
            # entering and leaving act on the context manager (cx: a write at each unless its
            # __enter__ / __exit__ are instrumented; the exit through the proxy cx returns)
            e = self.visit(item.context_expr)
            item.context_expr = self._wrap("cx", e, "with", self._loc(protocol, e))
        return self._visit_with_items_done(node)

    def _visit_with_items_done(self, node: ast.With | ast.AsyncWith) -> Any:
        idx = next(
            (i for i, it in enumerate(node.items)
             if it.optional_vars is not None and self._needs(it.optional_vars)),
            None,
        )  # fmt: skip
        if idx is None:
            node.body = self._stmts(node.body)
            return node
        # `with a as x.y, b:` is `with a as x.y: with b:` (the store into x.y happens before b
        # is entered): split there and assign from a temporary.
        rest = node.items[idx + 1 :]
        item = node.items[idx]
        target = item.optional_vars
        assert target is not None
        t = self._temp()
        item.optional_vars = self._loc(ast.Name(t, ast.Store()), target)
        store = self._assign(target, ast.Name(t, ast.Load()), target)
        if rest:
            inner = self._loc(type(node)(items=rest, body=node.body), node)
            node.body = store + [self._visit_with_items_done(inner)]
        else:
            node.body = store + self._stmts(node.body)
        node.items = node.items[: idx + 1]
        return node

    visit_With = _visit_with
    visit_AsyncWith = _visit_with

    # annotations are never rewritten
    def visit_arg(self, node: ast.arg) -> ast.AST:
        return node


def instrument_tree(source: str, filename: str) -> ast.Module:
    """Parses and instruments `source`; raises SyntaxError for invalid source."""
    tree = ast.parse(source, filename, "exec")
    table = symtable.symtable(source, filename, "exec")
    return Instrumenter(source, filename).run(tree, table)


#: instrumented code objects by (file name, digest of the source): a process instruments the
#: same files again for every program it loads (the pytest plugin: every explored test), and a
#: code object is immutable; site ids are process-wide (sites.register), so a cached code
#: object names the same sites as a fresh compile.  Bounded: the oldest entries go first.
_CODE_CACHE: dict[tuple[str, bytes], Any] = {}
CODE_CACHE_SIZE = 4096


def compile_instrumented(source: str | bytes, filename: str) -> Any:
    """The code object of the instrumented module (raises SyntaxError like compile())."""
    raw = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    key = (filename, hashlib.blake2b(raw, digest_size=16).digest())
    code = _CODE_CACHE.get(key)
    if code is None:
        code = _compile_instrumented(source, filename)
        if len(_CODE_CACHE) >= CODE_CACHE_SIZE:
            del _CODE_CACHE[next(iter(_CODE_CACHE))]
        _CODE_CACHE[key] = code
    return code


def _compile_instrumented(source: str | bytes, filename: str) -> Any:
    if isinstance(source, bytes):
        import io
        import tokenize

        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        source = source.decode(encoding)
    tree = instrument_tree(source, filename)
    return compile(tree, filename, "exec", dont_inherit=True)
