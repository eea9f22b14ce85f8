"""Lock synthesis (stage 6): from diagnosed hazards to a minimal patch of the source text.

The input is the user's file and the resources the diagnosis found racing (a label such as
``self.counters`` with the lines of the accesses of its pattern).  The output is a
:class:`Patch`: the patched text, the locks, the intervals they enclose, and the unified diff.

How a patch is built
--------------------
1. **Resources.**  A label rooted at a method's first parameter (``self.counters[key]``) is the
   attribute ``counters`` of that class: one lock per instance, ``self._lock_counters``, created
   at the top of ``__init__`` (``asyncio.Lock`` binds its loop lazily, so creating it outside a
   running loop is fine).  A module global or a closure cell is a module-level resource; any
   other label (``cls.x``, another object's attribute) is protected by a module-level lock named
   after it (coarser: one lock for every instance, never weaker).  Module-level locks are one per
   event loop (an ``asyncio.Lock`` serves the loop it first waited on; a module outlives loops).
2. **Who touches a resource.**  Every function of the scope (the class's methods for an
   attribute, the module's functions for a global) that reads or writes it, directly or through a
   call to another function of the scope that does (``self.helper()``, ``helper()``): the call
   statement counts as an access of everything the callee touches (a fixpoint over the calls).
3. **Intervals.**  In each ``async def`` that touches a protected resource, the smallest run of
   statements of one block that covers its accesses (Amdahl-minimal: the statements before and
   after stay concurrent); a check is part of its ``if``/``while`` statement, so check-then-act is
   enclosed from the check to the act.  Intervals of one function that overlap are merged, so
   every interval is entered once with all its locks.  Synchronous functions cannot take an
   ``asyncio.Lock``; they run atomically and their async callers lock around the calls.
4. **Rank order.**  Every ``async with`` acquires its locks sorted by name, and no interval
   contains another acquisition of ours: a self-call inside an interval to a function that locks
   is redirected to an unlocked copy of it (``_<name>_holding_locks``), whose locks the caller
   holds already (asyncio.Lock is not reentrant).  So no wait-for cycle among our locks can form.
5. **Text edits.**  The file is edited by line ranges: lines inside the interval are indented one
   level (continuation lines of multi-line strings are left alone: their text is data), one
   header line is inserted; the user's formatting and comments elsewhere are untouched.

A pattern whose accesses are not in an ``async def`` of the file (or a resource the scan cannot
find) raises :class:`Unfixable` with the reason.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

_FuncDef = ast.FunctionDef | ast.AsyncFunctionDef


class Unfixable(Exception):
    """No lock synthesized from the source fixes this hazard; the message says why."""


@dataclass(frozen=True)
class Hazard:
    """One diagnosed pattern in one file: its resource label and the lines of its accesses."""

    resource: str
    lines: tuple[int, ...]
    kind: str = "lost-update"


@dataclass(frozen=True)
class Resource:
    """A protected resource.  ``scope`` is "instance" (an attribute of ``owner``'s instances)
    or "module" (a global, a closure cell, or anything else: one lock per event loop)."""

    scope: str
    name: str  #: attribute or global name; for other labels, the label
    owner: str | None = None  #: the class (qualified name) of an instance resource

    @property
    def lock_name(self) -> str:
        return "_lock_" + (re.sub(r"\W+", "_", self.name).strip("_") or "state")


@dataclass
class Lock:
    name: str
    scope: str  #: "instance" or "module"
    owner: str | None
    resources: list[str]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "scope": self.scope,
            "owner": self.owner,
            "resources": self.resources,
        }


@dataclass
class Interval:
    function: str  #: qualified name of the function
    first_line: int
    last_line: int
    locks: list[str]  #: lock names, in acquisition (rank) order

    def to_json(self) -> dict[str, object]:
        return {
            "function": self.function,
            "lines": [self.first_line, self.last_line],
            "locks": self.locks,
        }


@dataclass
class Patch:
    """The patched text of one file and what it adds."""

    path: str
    original: str
    patched: str
    locks: list[Lock]
    intervals: list[Interval]
    copies: list[str] = field(default_factory=list)  #: unlocked copies added (function names)
    notes: list[str] = field(default_factory=list)
    #: origin[k]: the original row (1-based) of patched row k+1, None for added lines
    origin: list[int | None] = field(default_factory=list)

    def original_line(self, patched_line: int) -> int | None:
        """The row of the original file a row of the patched one comes from (None: added)."""
        if 1 <= patched_line <= len(self.origin):
            return self.origin[patched_line - 1]
        return None

    def diff(self, display_path: str) -> str:
        """Unified diff that ``git apply``/``patch -p1`` apply from the directory `display_path`
        is relative to."""
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(keepends=True),
                self.patched.splitlines(keepends=True),
                fromfile=f"a/{display_path}",
                tofile=f"b/{display_path}",
            )
        )


# ------------------------------------------------------------------ the module's shape


@dataclass
class _Func:
    node: _FuncDef
    qualname: str
    cls: ast.ClassDef | None  #: the class it is a method of (directly), or None
    self_name: str | None  #: the first parameter of a method (not static/class methods)
    is_async: bool


def _funcs(tree: ast.Module) -> list[_Func]:
    out: list[_Func] = []

    def walk(body: list[ast.stmt], prefix: str, cls: ast.ClassDef | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.", node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self_name = None
                decorators = {_dotted(d) for d in node.decorator_list}
                if cls is not None and not decorators & {"staticmethod", "classmethod"}:
                    params = node.args.posonlyargs + node.args.args
                    self_name = params[0].arg if params else None
                out.append(
                    _Func(
                        node,
                        prefix + node.name,
                        cls,
                        self_name,
                        isinstance(node, ast.AsyncFunctionDef),
                    )
                )
                walk(node.body, f"{prefix}{node.name}.<locals>.", None)
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        walk([child], prefix, cls)

    walk(tree.body, "", None)
    return out


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _own_nodes(fn: _FuncDef) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # only the decorators of a nested definition run in this function
                stack.extend(child.decorator_list)
            else:
                stack.append(child)


def _parents(fn: _FuncDef) -> dict[ast.AST, ast.AST]:
    out: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


def _func_at(funcs: list[_Func], line: int) -> _Func | None:
    """The innermost function whose body holds `line`."""
    best: _Func | None = None
    for f in funcs:
        body = f.node.body
        inside = body[0].lineno <= line <= (body[-1].end_lineno or body[-1].lineno)
        if inside and (best is None or f.node.lineno >= best.node.lineno):
            best = f
    return best


# ------------------------------------------------------------------ resources and accesses


def _module_globals(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        for sub in (
            ast.walk(node)
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            else ()
        ):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).partition(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names.update(node.names)
    return names


def _resolve(label: str, fn: _Func | None, module_names: set[str]) -> Resource:
    """The resource a diagnosis label names, seen from the function of its accesses
    (``self.x[k]``, ``global total``, ``nonlocal count``, ``config.value``)."""
    scope_word, _, name = label.strip().partition(" ")
    if scope_word in ("global", "nonlocal") and name.isidentifier():
        return Resource("module", name)
    m = re.match(r"^([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?", label.strip())
    if m is not None and fn is not None:
        root, attr = m.group(1), m.group(2)
        if fn.self_name is not None and root == fn.self_name and attr and fn.cls is not None:
            owner = fn.qualname.rsplit(".", 1)[0]
            return Resource("instance", attr, owner)
        declared = _declares(fn.node, root)
        if (root not in _locals_of(fn.node) or declared) and (root in module_names or declared):
            if not attr:
                return Resource("module", root)
            return Resource("module", f"{root}.{attr}" if root[0].islower() else root)
        if root in _free_names(fn.node):
            return Resource("module", root)
    return Resource("module", label.strip() or "state")


def _locals_of(fn: _FuncDef) -> set[str]:
    names = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    if fn.args.vararg:
        names.add(fn.args.vararg.arg)
    if fn.args.kwarg:
        names.add(fn.args.kwarg.arg)
    for node in _own_nodes(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _declares(fn: _FuncDef, name: str) -> bool:
    return any(
        isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in _own_nodes(fn)
    )


def _free_names(fn: _FuncDef) -> set[str]:
    return {n.id for n in _own_nodes(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _accesses(f: _Func, res: Resource) -> set[int]:
    """Lines of `f`'s body that read or write `res` directly.  Every async function that
    touches a protected resource takes its lock, a lone read included: a read between another
    task's writes would see a state no serial order has."""
    if res.scope == "instance":
        if f.self_name is None or f.cls is None or f.qualname.rsplit(".", 1)[0] != res.owner:
            return set()
        return {
            node.lineno
            for node in _own_nodes(f.node)
            if isinstance(node, ast.Attribute)
            and node.attr == res.name
            and isinstance(node.value, ast.Name)
            and node.value.id == f.self_name
        }
    root = res.name.split(".")[0]
    if root in _locals_of(f.node) and not _declares(f.node, root):
        return set()
    return {n.lineno for n in _own_nodes(f.node) if isinstance(n, ast.Name) and n.id == root}


def _calls(f: _Func, by_name: dict[str, _Func]) -> list[tuple[_Func, int]]:
    """The calls in `f` that run a function of the scope in f's own task: ``self.m(...)`` to
    methods of f's class, ``g(...)`` to module-level functions, synchronous ones, or async ones
    awaited right there; (callee, line).  A coroutine passed on (to ``gather``,
    ``create_task``) runs in a task of its own: it takes its locks itself."""
    out: list[tuple[_Func, int]] = []
    prefix = f.qualname.rsplit(".", 1)[0] + "." if f.cls is not None else ""
    parents = _parents(f.node)
    for node in _own_nodes(f.node):
        if not isinstance(node, ast.Call):
            continue
        target: _Func | None = None
        fn = node.func
        if (
            isinstance(fn, ast.Attribute)
            and isinstance(fn.value, ast.Name)
            and f.self_name is not None
            and fn.value.id == f.self_name
        ):
            target = by_name.get(prefix + fn.attr)
        elif isinstance(fn, ast.Name) and fn.id not in _locals_of(f.node):
            target = by_name.get(fn.id)
        if target is not None and (not target.is_async or isinstance(parents.get(node), ast.Await)):
            out.append((target, node.lineno))
    return out


#: calls that start other tasks or wait for them: holding a lock across one would make the
#: tasks that need it wait for the holder, which waits for them
_JOINS = frozenset(
    {
        "gather",
        "wait",
        "wait_for",
        "create_task",
        "ensure_future",
        "as_completed",
        "shield",
        "TaskGroup",
        "run_coroutine_threadsafe",
        "join",
    }
)


def _join_lines(f: _FuncDef) -> set[int]:
    """Lines of `f` that start or wait for other tasks: a call of :data:`_JOINS`, or an await
    of something that is not a call (a task, a future)."""
    out: set[int] = set()
    for node in _own_nodes(f):
        if (
            isinstance(node, ast.Call)
            and _dotted(node.func).rsplit(".", 1)[-1] in _JOINS
            or isinstance(node, ast.Await)
            and not isinstance(node.value, ast.Call)
        ):
            out.add(node.lineno)
    return out


def _split_at_joins(f: _FuncDef, lines: set[int]) -> list[set[int]]:
    """The access lines of one function in groups that no join line separates (a join strictly
    between two consecutive access lines starts a new group): an interval never holds its locks
    across starting or waiting for other tasks."""
    joins = _join_lines(f)
    groups: list[set[int]] = []
    for ln in sorted(lines):
        if groups and not any(max(groups[-1]) < j < ln for j in joins):
            groups[-1].add(ln)
        else:
            groups.append({ln})
    return groups


# ------------------------------------------------------------------ intervals


def _sub_blocks(s: ast.stmt) -> list[list[ast.stmt]]:
    blocks: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        b = getattr(s, name, None)
        if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
            blocks.append(b)
    for h in getattr(s, "handlers", []) or []:
        blocks.append(h.body)
    for c in getattr(s, "cases", []) or []:
        blocks.append(c.body)
    return blocks


def _end(s: ast.stmt) -> int:
    return s.end_lineno or s.lineno


def _smallest_block(body: list[ast.stmt], lines: set[int]) -> tuple[list[ast.stmt], int, int]:
    """The block (a statement list) and the index range [i, j] of its statements that is the
    smallest run of statements of one block covering every line (lines outside `body` are
    ignored; with none inside, the whole body).  A sub-block is entered only when it starts on
    a line of its own (``if x: y`` stays whole: there is no line to put a lock on)."""
    inside = {ln for ln in lines if body[0].lineno <= ln <= _end(body[-1])}
    block = body
    if not inside:
        return block, 0, len(block) - 1
    while True:
        idx = [k for k, s in enumerate(block) if any(s.lineno <= ln <= _end(s) for ln in inside)]
        i, j = min(idx), max(idx)
        if i == j:
            s = block[i]
            sub = next(
                (
                    b
                    for b in _sub_blocks(s)
                    if b[0].lineno > s.lineno
                    and all(b[0].lineno <= ln <= _end(b[-1]) for ln in inside)
                ),
                None,
            )
            if sub is not None:
                block = sub
                continue
        # statements sharing a line (``a = 1; b = 2``) go together
        while i > 0 and _end(block[i - 1]) >= block[i].lineno:
            i -= 1
        while j + 1 < len(block) and block[j + 1].lineno <= _end(block[j]):
            j += 1
        return block, i, j


@dataclass
class _Span:
    func: _Func
    lines: set[int]
    locks: set[str]
    block: list[ast.stmt] = field(default_factory=list)
    i: int = 0
    j: int = 0

    @property
    def first(self) -> int:
        return self.block[self.i].lineno

    @property
    def last(self) -> int:
        return _end(self.block[self.j])


def _merge(spans: list[_Span]) -> list[_Span]:
    """Intervals of one function whose line ranges meet become one interval with the union of
    their locks, recomputed from the union of their lines, until none meet."""
    for s in spans:
        s.block, s.i, s.j = _smallest_block(s.func.node.body, s.lines)
    merged = True
    while merged:
        merged = False
        for a in range(len(spans)):
            for b in range(a + 1, len(spans)):
                x, y = spans[a], spans[b]
                if x.func is y.func and x.first <= y.last and y.first <= x.last:
                    x.lines |= y.lines
                    x.locks |= y.locks
                    x.block, x.i, x.j = _smallest_block(x.func.node.body, x.lines)
                    del spans[b]
                    merged = True
                    break
            if merged:
                break
    return sorted(spans, key=lambda s: s.first)


# ------------------------------------------------------------------ text


def _string_rows(text: str) -> set[int]:
    """Rows (1-based) that begin inside a multi-line string literal: their leading whitespace
    is part of the string's value, so they are never re-indented."""
    rows: set[int] = set()
    fstring_start: list[int] = []
    fs_start = getattr(tokenize, "FSTRING_START", -1)
    fs_end = getattr(tokenize, "FSTRING_END", -1)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == fs_start:
                fstring_start.append(tok.start[0])
            elif tok.type == fs_end and fstring_start:
                rows.update(range(fstring_start.pop() + 1, tok.end[0] + 1))
            elif tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                rows.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    return rows


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_unit(lines: list[str], f: _FuncDef) -> str:
    body_indent = _indent_of(lines[f.body[0].lineno - 1])
    def_indent = _indent_of(lines[f.lineno - 1])
    unit = body_indent[len(def_indent) :] if body_indent.startswith(def_indent) else ""
    return unit or "    "


def _has_docstring(body: list[ast.stmt]) -> bool:
    return (
        bool(body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )


@dataclass
class _Edit:
    """Replace rows [start, end) (0-based) with `lines`; an insertion has start == end.
    `origins`: the original row (1-based) each new line stands for, None for added text
    (default: none of them)."""

    start: int
    end: int
    lines: list[str]
    origins: list[int | None] | None = None


def _apply(lines: list[str], edits: list[_Edit]) -> tuple[list[str], list[int | None]]:
    """The edited lines and, for each, the original row it comes from (None: added).
    Edits never overlap; insertions at one row keep the order they were given in."""
    out = list(lines)
    origin: list[int | None] = list(range(1, len(lines) + 1))
    order = sorted(range(len(edits)), key=lambda k: (edits[k].start, edits[k].end, k))
    for k in reversed(order):
        e = edits[k]
        out[e.start : e.end] = e.lines
        origin[e.start : e.end] = e.origins or [None] * len(e.lines)
    return out, origin


# ------------------------------------------------------------------ the plan


def _parse(path: str, source: str) -> tuple[ast.Module, list[str], str]:
    """The file's tree, its lines (with their ends) and its line ending."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise Unfixable(f"{path}: cannot parse the file ({exc.msg} at line {exc.lineno})") from None
    lines = source.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    return tree, lines, newline


def _finish(
    path: str,
    source: str,
    lines: list[str],
    edits: list[_Edit],
    *,
    locks: list[Lock],
    intervals: list[Interval],
    notes: list[str],
    copies: list[str] | None = None,
) -> Patch:
    """The patch the edits make, re-parsed first: a patch that does not compile is a bug of
    ours, never handed out."""
    new_lines, origin = _apply(lines, edits)
    patched = "".join(new_lines)
    try:
        ast.parse(patched, filename=path)
    except SyntaxError as exc:
        raise Unfixable(
            f"the patch does not compile ({exc.msg} at line {exc.lineno}); please report it"
        ) from None
    return Patch(
        path=path,
        original=source,
        patched=patched,
        locks=locks,
        intervals=intervals,
        copies=copies or [],
        notes=notes,
        origin=origin,
    )


#: widening levels of :func:`synthesize`, from the minimal patch to the coarsest
WIDEN_LEVELS = ("minimal", "one interval per function", "whole function bodies")


def synthesize(path: str, source: str, hazards: Iterable[Hazard], widen: int = 0) -> Patch:
    """The patch of `source` (the text of the file at `path`) that protects every resource of
    `hazards` with ordered locks.  `widen` (an index of :data:`WIDEN_LEVELS`): 0 the smallest
    intervals; 1 one interval per function covering all its protected accesses (every lock);
    2 the whole body of every function that touches a protected resource.  Raises
    :class:`Unfixable` when no interval can be found."""
    tree, lines, newline = _parse(path, source)
    funcs = _funcs(tree)
    if not funcs:
        raise Unfixable(f"{path}: the racing accesses are in no function of the file")
    module_names = _module_globals(tree)

    resources: dict[Resource, list[Hazard]] = {}
    for hz in hazards:
        homes = [f for f in (_func_at(funcs, ln) for ln in hz.lines) if f is not None]
        if not homes:
            raise Unfixable(
                f"the accesses to {hz.resource} (lines {', '.join(map(str, hz.lines))}) are "
                f"not inside a function of {path}"
            )
        resources.setdefault(_resolve(hz.resource, homes[0], module_names), []).append(hz)

    by_name = {f.qualname: f for f in funcs}
    # touched[f, r]: lines of f that access r directly or by a call; fixpoint over calls
    touched: dict[tuple[str, Resource], set[int]] = {}
    for f in funcs:
        for res, res_hazards in resources.items():
            if res.scope == "module" and res.name not in module_names:
                # a label the scan cannot name: the lines of its patterns only
                acc = {ln for hz in res_hazards for ln in hz.lines if _func_at(funcs, ln) is f}
            else:
                acc = _accesses(f, res)
            touched[(f.qualname, res)] = acc
    calls = {f.qualname: _calls(f, by_name) for f in funcs}
    changed = True
    while changed:
        changed = False
        for f in funcs:
            for callee, line in calls[f.qualname]:
                for res in resources:
                    mine = touched[(f.qualname, res)]
                    if touched[(callee.qualname, res)] and line not in mine:
                        mine.add(line)
                        changed = True

    spans: list[_Span] = []
    unlockable: list[str] = []
    for f in funcs:
        for res in resources:
            acc = touched[(f.qualname, res)]
            if not acc:
                continue
            if not f.is_async:
                continue  # atomic between awaits; its async callers lock around the calls
            if widen >= 2:
                acc = {n.lineno for n in _own_nodes(f.node) if isinstance(n, ast.stmt)}
                acc.add(_end(f.node.body[-1]))
            for group in _split_at_joins(f.node, set(acc)):
                spans.append(_Span(f, group, {res.lock_name}))
    for res, hzs in resources.items():
        for hz in hzs:
            for ln in hz.lines:
                f = _func_at(funcs, ln)
                if (
                    f is not None
                    and not f.is_async
                    and not any(touched[(g.qualname, res)] for g in funcs if g.is_async)
                ):
                    unlockable.append(f.qualname)
    if not spans:
        names = ", ".join(sorted(set(unlockable))) or "no async function"
        raise Unfixable(
            f"the racing accesses are in synchronous code ({names}): an asyncio.Lock is taken "
            "with `async with`, inside an `async def`"
        )
    by_func: dict[str, list[_Span]] = {}
    for s in spans:
        by_func.setdefault(s.func.qualname, []).append(s)
    if widen >= 1:  # one interval per function, but never across a join
        for q, group in by_func.items():
            node = group[0].func.node
            every = set().union(*(s.lines for s in group))
            locks = set().union(*(s.locks for s in group))
            by_func[q] = [_Span(group[0].func, g, set(locks)) for g in _split_at_joins(node, every)]
    spans = [m for group in by_func.values() for m in _merge(group)]

    lock_of = {res.lock_name: res for res in resources}
    edits: list[_Edit] = []
    intervals: list[Interval] = []
    string_rows = _string_rows(source)
    copies: dict[str, str] = {}  # function qualname -> name of its unlocked copy
    locking = {s.func.qualname for s in spans}

    def lock_expr(f: _Func, name: str) -> str:
        res = lock_of[name]
        if res.scope == "instance":
            return f"{f.self_name}.{name}"
        return f"_chaossloth_lock({name!r})"

    def redirect_calls(f: _Func, first: int, last: int, new_lines: dict[int, str]) -> None:
        """Self-calls inside [first, last] to functions that take locks go to their unlocked
        copies (the caller holds every lock they would take: the call line is an access of
        everything the callee touches)."""
        for callee, line in calls[f.qualname]:
            if not first <= line <= last or callee.qualname not in locking:
                continue
            copy = copies.setdefault(callee.qualname, f"_{callee.node.name}_holding_locks")
            text = new_lines.get(line, lines[line - 1])
            pat = (
                rf"\b{re.escape(f.self_name)}\.{re.escape(callee.node.name)}\s*\("
                if callee.cls is not None and f.self_name
                else rf"(?<![\w.]){re.escape(callee.node.name)}\s*\("
            )
            repl = (
                f"{f.self_name}.{copy}(" if callee.cls is not None and f.self_name else f"{copy}("
            )
            new_lines[line] = re.sub(pat, repl, text)

    for s in spans:
        f = s.func
        unit = _indent_unit(lines, f.node)
        first, last = s.first, s.last
        indent = _indent_of(lines[first - 1])
        order = sorted(s.locks)
        header = f"{indent}async with {', '.join(lock_expr(f, n) for n in order)}:{newline}"
        changed_lines: dict[int, str] = {}
        redirect_calls(f, first, last, changed_lines)
        body: list[str] = []
        for row in range(first, last + 1):
            text = changed_lines.get(row, lines[row - 1])
            if row in string_rows or not text.strip():
                body.append(text)
            else:
                body.append(unit + text)
        edits.append(_Edit(first - 1, last, [header, *body], [None, *range(first, last + 1)]))
        intervals.append(Interval(f.qualname, first, last, order))

    # unlocked copies: the original text of the function, renamed, its own self-calls to
    # locking functions redirected to copies too (their locks are held as well)
    pending = list(copies)
    done: set[str] = set()
    copy_edits: list[tuple[_Func, list[str], list[int | None]]] = []
    while pending:
        q = pending.pop()
        if q in done:
            continue
        done.add(q)
        g = by_name[q]
        start = min([g.node.lineno] + [d.lineno for d in g.node.decorator_list])
        end = _end(g.node)
        changed_lines = {}
        before = set(copies)
        redirect_calls(g, g.node.body[0].lineno, end, changed_lines)
        pending.extend(set(copies) - before)
        text = [changed_lines.get(r, lines[r - 1]) for r in range(start, end + 1)]
        def_row = g.node.lineno - start
        text[def_row] = re.sub(
            rf"\bdef\s+{re.escape(g.node.name)}\b", f"def {copies[q]}", text[def_row], count=1
        )
        indent = _indent_of(lines[start - 1])
        doc = (
            f"{indent}{_indent_unit(lines, g.node)}# chaossloth: {g.node.name} for callers "
            f"that hold its locks already (asyncio.Lock is not reentrant){newline}"
        )
        rows: list[int | None] = list(range(start, end + 1))
        if not _has_docstring(g.node.body):
            text.insert(def_row + 1, doc)
            rows.insert(def_row + 1, None)
        copy_edits.append((g, [newline, *text], [None, *rows]))
    for g, text, rows in copy_edits:
        end = _end(g.node)
        edits.append(_Edit(end, end, text, rows))

    locks: list[Lock] = []
    for name in sorted(lock_of):
        res = lock_of[name]
        if not any(name in s.locks for s in spans):
            continue
        locks.append(Lock(name, res.scope, res.owner, [h.resource for h in resources[res]]))

    notes: list[str] = []
    edits += _lock_creation(tree, lines, funcs, locks, newline, notes)
    edits += _imports(tree, lines, locks, newline)
    return _finish(
        path,
        source,
        lines,
        edits,
        locks=locks,
        intervals=sorted(intervals, key=lambda iv: iv.first_line),
        copies=sorted(copies.values()),
        notes=notes,
    )


def _lock_creation(
    tree: ast.Module,
    lines: list[str],
    funcs: list[_Func],
    locks: list[Lock],
    newline: str,
    notes: list[str],
) -> list[_Edit]:
    """Edits that create the instance locks at the top of ``__init__`` (or ``__post_init__`` of
    a dataclass; a new ``__init__`` that calls the base's otherwise), and the module-level
    per-loop lock table."""
    edits: list[_Edit] = []
    by_owner: dict[str, list[Lock]] = {}
    for lk in locks:
        if lk.scope == "instance" and lk.owner is not None:
            by_owner.setdefault(lk.owner, []).append(lk)
    classes = {f.qualname.rsplit(".", 1)[0]: f.cls for f in funcs if f.cls is not None}
    for owner, owned in by_owner.items():
        cls = classes[owner]
        assert cls is not None
        is_dataclass = any(_dotted(d).split(".")[-1] == "dataclass" for d in cls.decorator_list)
        init_name = "__post_init__" if is_dataclass else "__init__"
        init = next(
            (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == init_name),
            None,
        )
        if init is not None and init.body[0].lineno > init.lineno:
            params = init.args.posonlyargs + init.args.args
            me = params[0].arg if params else "self"
            at = init.body[1] if _has_docstring(init.body) and len(init.body) > 1 else init.body[0]
            row = at.lineno - 1
            if _has_docstring(init.body) and len(init.body) == 1:
                row = _end(init.body[0])
            indent = _indent_of(lines[init.body[0].lineno - 1])
            new = [f"{indent}{me}.{lk.name} = asyncio.Lock(){newline}" for lk in owned]
            edits.append(_Edit(row, row, new))
        elif init is not None:
            # a one-line ``def __init__(self): self.n = 0``: its body moves to lines of its own,
            # after the locks (a second __init__ before it would be overridden by it)
            params = init.args.posonlyargs + init.args.args
            me = params[0].arg if params else "self"
            row = init.body[0].lineno - 1
            text = lines[row]
            col = init.body[0].col_offset
            outer = _indent_of(lines[init.lineno - 1])
            unit = outer[len(_indent_of(lines[cls.lineno - 1])) :] or "    "
            indent = outer + unit
            body = text[col:].rstrip("\r\n")
            new = [
                text[:col].rstrip() + newline,
                *(f"{indent}{me}.{lk.name} = asyncio.Lock(){newline}" for lk in owned),
                f"{indent}{body}{newline}",
            ]
            edits.append(_Edit(row, row + 1, new, [row + 1] + [None] * len(owned) + [row + 1]))
        else:
            first = cls.body[1] if _has_docstring(cls.body) and len(cls.body) > 1 else cls.body[0]
            decorators = getattr(first, "decorator_list", None)
            row = (decorators[0] if decorators else first).lineno - 1
            indent = _indent_of(lines[cls.body[0].lineno - 1])
            unit = indent[len(_indent_of(lines[cls.lineno - 1])) :] or "    "
            if is_dataclass:
                head = [f"{indent}def __post_init__(self):{newline}"]
            else:
                head = [
                    f"{indent}def __init__(self, *args, **kwargs):{newline}",
                    f"{indent}{unit}super().__init__(*args, **kwargs){newline}",
                ]
            new = head + [f"{indent}{unit}self.{lk.name} = asyncio.Lock(){newline}" for lk in owned]
            edits.append(_Edit(row, row, [*new, newline]))
        for node in cls.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                indent = _indent_of(lines[node.lineno - 1])
                names = ", ".join(repr(lk.name) for lk in owned)
                single = isinstance(node.value, ast.Constant)
                value = f"(__slots__, {names})" if single else f"(*__slots__, {names})"
                edits.append(
                    _Edit(_end(node), _end(node), [f"{indent}__slots__ = {value}{newline}"])
                )
                notes.append(f"{owner}: the lock slots are added to __slots__")
    return edits


def _imports(tree: ast.Module, lines: list[str], locks: list[Lock], newline: str) -> list[_Edit]:
    """``import asyncio`` (and the per-loop table of module-level locks) after the module's
    leading imports, when missing."""
    body = tree.body
    k = 1 if _has_docstring(body) else 0
    last_import = None
    for node in body[k:]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last_import = node
        else:
            break
    has_asyncio = any(
        isinstance(n, ast.Import) and any(a.name == "asyncio" and a.asname is None for a in n.names)
        for n in body
    )
    has_weakref = any(
        isinstance(n, ast.Import) and any(a.name == "weakref" and a.asname is None for a in n.names)
        for n in body
    )
    module_locks = any(lk.scope == "module" for lk in locks)
    new: list[str] = []
    if not has_asyncio:
        new.append(f"import asyncio{newline}")
    if module_locks and not has_weakref:
        new.append(f"import weakref{newline}")
    table: list[str] = []
    if module_locks:
        table = [
            newline,
            f"# chaossloth: module-level locks, one per event loop (an asyncio.Lock serves the{newline}",
            f"# loop it first waits on; a module outlives its loops){newline}",
            f"_chaossloth_locks = weakref.WeakKeyDictionary(){newline}",
            newline,
            newline,
            f"def _chaossloth_lock(name):{newline}",
            f"    per_loop = _chaossloth_locks.setdefault(asyncio.get_running_loop(), {{}}){newline}",
            f"    return per_loop.setdefault(name, asyncio.Lock()){newline}",
        ]
    if not new and not table:
        return []
    if last_import is not None:
        row = _end(last_import)
        return [_Edit(row, row, new + table)]
    row = _end(body[0]) if k else 0
    if not body:
        row = 0
    # after a docstring and `from __future__` imports
    for node in body[k:]:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            row = _end(node)
        else:
            break
    return [_Edit(row, row, new + table + ([newline] if table else []))]


# ------------------------------------------------------------------ lock-order deadlocks


def _family(expr: ast.expr) -> str:
    """The text of a lock expression with its subscripts' indices blanked: locks of one
    family (``self.locks[src]``, ``self.locks[dst]``) are told apart only at run time."""

    class Blank(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            return ast.Subscript(
                value=self.visit(node.value), slice=ast.Name(id="_", ctx=ast.Load()), ctx=node.ctx
            )

    return ast.unparse(Blank().visit(ast.parse(ast.unparse(expr), mode="eval")))


def _assigned_names(stmts: Iterable[ast.AST]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.add(n.id)
    return out


def order_acquisitions(path: str, source: str, wait_lines: Iterable[int]) -> Patch:
    """The patch of a lock-order deadlock: each nested acquisition ``async with X: ... async
    with Y:`` whose inner statement is where a task of the wait-for cycle waits (`wait_lines`)
    takes both locks at the outer statement, in one rank order: by name when both are fixed
    expressions (``self.a`` before ``self.b``), by ``id()`` at run time when they are one
    family told apart by an index (``self.locks[src]``, ``self.locks[dst]``).  The inner
    statement goes (its body dedented).  Raises :class:`Unfixable` when the inner lock cannot
    be named at the outer statement (a name it uses is assigned in between) or no nested
    ``async with`` is at a waiting line."""
    tree, lines, newline = _parse(path, source)
    waits = set(wait_lines)
    string_rows = _string_rows(source)
    edits: list[_Edit] = []
    intervals: list[Interval] = []
    locks: dict[str, Lock] = {}
    reasons: list[str] = []
    taken: set[int] = set()
    for f in _funcs(tree):
        if not f.is_async:
            continue
        for outer in _own_nodes(f.node):
            if not isinstance(outer, ast.AsyncWith) or len(outer.items) != 1:
                continue
            if outer.items[0].optional_vars is not None or outer.lineno in taken:
                continue
            inner = _inner_acquisition(outer, waits)
            if inner is None:
                continue
            x, y = outer.items[0].context_expr, inner.items[0].context_expr
            between = [s for s in _statements_before(outer.body, inner)]
            used = {n.id for n in ast.walk(y) if isinstance(n, ast.Name)}
            clash = used & _assigned_names(between)
            if clash:
                reasons.append(
                    f"{f.qualname} line {inner.lineno}: the lock `{ast.unparse(y)}` depends on "
                    f"{', '.join(sorted(clash))}, assigned after the first lock is taken"
                )
                continue
            tx, ty = ast.unparse(x), ast.unparse(y)
            indent = _indent_of(lines[outer.lineno - 1])
            if tx != ty and _family(x) == _family(y):
                new_header = [
                    f"{indent}_first_lock, _second_lock = sorted(({tx}, {ty}), key=id){newline}",
                    f"{indent}async with _first_lock, _second_lock:{newline}",
                ]
                order = [f"sorted(({tx}, {ty}), key=id)"]
            elif tx != ty:
                a, b = sorted((tx, ty))
                new_header = [f"{indent}async with {a}, {b}:{newline}"]
                order = [a, b]
            else:
                continue
            taken.add(outer.lineno)
            if outer.body[0].lineno == outer.lineno or inner.body[0].lineno == inner.lineno:
                reasons.append(f"{f.qualname} line {outer.lineno}: a one-line `async with`")
                continue
            header_end = outer.body[0].lineno - 1  # rows of the outer header: lineno..header_end
            edits.append(_Edit(outer.lineno - 1, header_end, new_header, [None] * len(new_header)))
            inner_unit = _indent_of(lines[inner.body[0].lineno - 1])[
                len(_indent_of(lines[inner.lineno - 1])) :
            ]
            body_rows = range(inner.body[0].lineno, _end(inner) + 1)
            dedented = [
                lines[r - 1]
                if r in string_rows or not lines[r - 1].startswith(inner_unit)
                else lines[r - 1][len(inner_unit) :]
                for r in body_rows
            ]
            edits.append(_Edit(inner.lineno - 1, _end(inner), dedented, list(body_rows)))
            intervals.append(Interval(f.qualname, outer.lineno, _end(outer), order))
            for name in order:
                locks.setdefault(name, Lock(name, "user", None, [tx, ty]))
    if not edits:
        raise Unfixable(
            "the locks of the wait-for cycle are not taken by nested `async with` statements "
            "that can be reordered"
            + (f" ({'; '.join(reasons)})" if reasons else "")
            + ". Take them in one global order everywhere (sort them by a stable key)."
        )
    return _finish(
        path,
        source,
        lines,
        edits,
        locks=list(locks.values()),
        intervals=intervals,
        notes=["the nested acquisitions now take both locks at once, in one rank order"],
    )


def _inner_acquisition(outer: ast.AsyncWith, waits: set[int]) -> ast.AsyncWith | None:
    """The single-item ``async with`` inside `outer` (same function) at a waiting line."""
    stack: list[ast.AST] = list(outer.body)
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.AsyncWith)
            and len(node.items) == 1
            and node.items[0].optional_vars is None
            and node.lineno in waits
        ):
            return node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append(child)
    return None


def _statements_before(body: list[ast.stmt], target: ast.stmt) -> Iterator[ast.stmt]:
    """The statements that run in `body` before `target` (at any depth) is reached."""
    for s in body:
        if s is target:
            return
        if any(n is target for n in ast.walk(s)):
            for blk in _sub_blocks(s):
                if any(n is target for st in blk for n in ast.walk(st)):
                    yield from _statements_before(blk, target)
                    return
            return
        yield s
