"""The access-site registry: site id -> where in the user's source an access happens.

Instrumented code passes a small integer (the site id) to every access hook; the engine stores it
with the access, and reports turn it back into ``file:line`` and a readable resource name.
Site 0 means "unknown" (accesses recorded by ChaosSloth's own asyncio capture).

``SITES[i]`` is a :class:`Site` whose first three fields are ``(filename, line, text)``, the shape
the runner reads.
"""

from __future__ import annotations

from typing import NamedTuple


class Site(NamedTuple):
    filename: str
    line: int
    text: str  #: source text of the whole expression or statement
    col: int = 0
    #: readable name of the resource touched: ``self.counters`` (a subscript site adds the runtime
    #: key: ``self.counters['audit']``), ``global hits``, ``nonlocal count``
    name: str = ""
    #: attr, item, method, keyed, contains, global, cell, whole, iter, sync, new (an allocation:
    #: a display, a comprehension or a class call, recorded as created by the current step),
    #: library (a library coroutine resumed there: library_frame)
    kind: str = ""


SITES: list[Site] = [Site("<unknown>", 0, "", 0, "", "")]
_index: dict[Site, int] = {}

MAX_TEXT = 120


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def register(filename: str, line: int, col: int, text: str, name: str, kind: str) -> int:
    """Returns the id of this site, registering it once (re-instrumenting a file reuses ids)."""
    site = Site(filename, line, _clip(text), col, _clip(name), kind)
    sid = _index.get(site)
    if sid is None:
        sid = len(SITES)
        if sid >= 2**32 - 1:  # pragma: no cover - the engine stores site ids in 32 bits
            return 0
        SITES.append(site)
        _index[site] = sid
    return sid


def library_frame(filename: str, line: int, qualname: str, module: str | None) -> int:
    """The site of a frame of uninstrumented code resumed at filename:line in a task's step,
    whose writes stand for what it may change there (ext/hooks.c, "coroutines of code that does
    not record itself, resumed across steps")."""
    owner = f"{module}." if module else ""
    return register(filename, line, 0, "", f"what {owner}{qualname} reaches", "library")


def get(site_id: int) -> Site:
    """The site with that id (site 0, "unknown", for ids never registered)."""
    if 0 <= site_id < len(SITES):
        return SITES[site_id]
    return SITES[0]


def location(site_id: int) -> str:
    """``file:line`` of a site, or ``?``."""
    s = get(site_id)
    return f"{s.filename}:{s.line}" if s.line else "?"


def resource_name(site_id: int, key_repr: str | None = None) -> str:
    """A readable name of the resource an access at this site touched.  `key_repr` is the repr
    of the runtime key the hook logged (subscripts and keyed methods), if any."""
    s = get(site_id)
    base = s.name or s.text or "?"
    if key_repr is not None and s.kind in ("item", "keyed", "contains"):
        return f"{base}[{key_repr}]"
    return base
