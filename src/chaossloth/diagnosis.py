"""Diagnosis (stage 5): what went wrong in a failing execution, in the user's words.

The engine finds the patterns (``_core.diagnose``: AVIO patterns and order violations over the
recorded trace, see ``engine/diagnose.c``; ``_core.wait_for_cycle`` for deadlocks); this module
names their tasks, resources and source lines, adds what the engine does not see (a deadlock's
wait-for cycle from the recorded lock operations, a cancellation the failure needed), picks the
hazard named to the user (:func:`classify`, precedence in :mod:`chaossloth.report`) and builds
the steps of the Mermaid diagram (:func:`diagram_steps`).

Every input has one type: a :class:`Detailed` execution, the engine's finding dicts (keys fixed
by ``ext/explorer.c:finding_dict``), trace events with ``accesses`` as ``(object, key, kind,
site)`` tuples.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import linecache
import os
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chaossloth import _core
from chaossloth import report as rp
from chaossloth.capture import sites as site_registry
from chaossloth.causes import READ, Access, Cause, accesses_of
from chaossloth.runner import ExecutionResult, Failure

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_ASYNCIO_DIR = os.path.dirname(asyncio.__file__)
#: access kinds of lock operations (include/chaossloth.h: CS_LOCK_ACQUIRE, CS_LOCK_RELEASE)
_LOCK_ACQUIRE = 3
_LOCK_RELEASE = 4


def _site(site_id: int) -> site_registry.Site | None:
    """The user's source site of an access, or None (ChaosSloth's own asyncio capture)."""
    if not site_id:
        return None
    s = site_registry.get(site_id)
    return s if s.line else None


def _site_of(site_id: int) -> rp.Site | None:
    s = _site(site_id)
    if s is None:
        return None
    return rp.Site(s.filename, s.line, _line_text(s.filename, s.line) or s.text)


def _line_text(file: str, line: int) -> str:
    """The source line as a person quotes it: stripped, without its trailing comment."""
    return code_text(linecache.getline(file, line))


def code_text(line: str) -> str:
    """`line` without surrounding blanks and without a trailing ``# comment`` (a ``#`` inside
    a string stays); a line that does not tokenize on its own (part of a multi-line string or
    bracket) loses only what follows the last ``#`` outside quotes it can see."""
    text = line.strip()
    if "#" not in text:
        return text
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return text[: tok.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return text


def _resource_label(site_id: int) -> str:
    s = _site(site_id)
    if s is None:
        return "asyncio internals"
    return s.name or s.text or f"line {s.line}"


def _finding_from(
    item: dict[str, Any],
    trace: list[Any],
    access_of: list[Any],
    await_sites: list[Any],
    names: dict[int, str],
) -> rp.Finding | None:
    pattern = rp.ENGINE_NAMES.get(item["pattern"], item["pattern"])

    def site_for(which: str) -> rp.Site | None:
        ai = item[f"{which}_access"]
        if isinstance(ai, int) and 0 <= ai < len(access_of):
            return _site_of(access_of[ai][1][3])
        ev = item[f"{which}_event"]
        if isinstance(ev, int) and 0 <= ev < len(trace):
            for acc in trace[ev].accesses:
                s = _site_of(acc[3])
                if s is not None:
                    return s
        return None

    local, remote, second = site_for("p"), site_for("r"), site_for("c")
    if local is None and remote is None and second is None:
        return None  # only asyncio's own objects: not something the user wrote
    p_event = item["p_event"]
    await_site = None
    if isinstance(p_event, int):
        await_site = _user_await(await_sites, p_event)
    resource = ""
    for which in ("r", "p", "c"):
        ai = item[f"{which}_access"]
        if isinstance(ai, int) and 0 <= ai < len(access_of):
            resource = _resource_label(access_of[ai][1][3])
            if resource != "asyncio internals":
                break
    la, ra = item["local_actor"], item["remote_actor"]
    f = rp.Finding(
        pattern=pattern,
        hazard=rp.hazard_of_pattern(pattern, local),
        task=names.get(la, f"actor {la}") if isinstance(la, int) else "",
        other_task=names.get(ra, f"actor {ra}") if isinstance(ra, int) else "",
        resource=resource,
        local=local,
        await_site=await_site,
        remote=remote,
        second=second,
    )
    f.lines = _lines(("first", local), ("other", remote), ("second", second))
    f.text = rp.word_finding(f)
    if f.pattern in rp.PATTERN_HAZARD and local is not None and remote is not None:
        c = second or local
        f.text += (
            f" The failing order runs {f.other_task}'s access at {remote.where()} between"
            f" {f.task}'s at {local.where()} and {c.where()}; an order that runs it before the"
            " first or after the second does not have this pattern."
        )
    return f


def _sync_op(site_id: int, kind: int) -> str | None:
    """'acquire' / 'release' for an access recorded on a lock-like primitive, else None."""
    if kind == _LOCK_ACQUIRE:
        return "acquire"
    if kind == _LOCK_RELEASE:
        return "release"
    st = site_registry.get(site_id)
    if st.kind != "sync":
        return None
    if st.text.endswith(".acquire()") or st.text.endswith(".__aenter__()"):
        return "acquire"
    if st.text.endswith(".release()") or st.text.endswith(".__aexit__()"):
        return "release"
    return None


def wait_for_edges(
    trace: list[Any], blocked_actors: set[int]
) -> tuple[list[tuple[int, int, int]], dict[int, tuple[int, int]], dict[int, int]]:
    """Who waits for which lock and who holds it, from the lock operations in the trace.

    The lock a blocked task waits for is the object of its last acquire; a task holds a lock
    when its last operation on it is an acquire and it is not waiting for that lock. Returns
    (edges (waiter, lock, holder), first acquisition event of each lock, the lock each blocked
    task waits for)."""
    last_op: dict[tuple[int, int], str] = {}
    last_acquire: dict[int, int] = {}
    first_taken: dict[int, tuple[int, int]] = {}
    for i, ev in enumerate(trace):
        for j, (obj, _key, kind, site) in enumerate(ev.accesses):
            op = _sync_op(site, kind)
            if op is None:
                continue
            last_op[(ev.actor, obj)] = op
            if op == "acquire":
                last_acquire[ev.actor] = obj
                first_taken.setdefault(obj, (i, j))
    waits = {a: last_acquire[a] for a in blocked_actors if a in last_acquire}
    edges = []
    for waiter, lock in sorted(waits.items()):
        for (holder, obj), op in sorted(last_op.items()):
            if obj == lock and op == "acquire" and holder != waiter and waits.get(holder) != obj:
                edges.append((waiter, lock, holder))
    return edges, first_taken, waits


def _deadlock_finding(
    detailed: Detailed, fail: Failure, names: dict[int, str], causes: Sequence[Cause] = ()
) -> rp.Finding:
    trace = detailed.result.trace or []
    last_event: dict[int, int] = {}
    for i, ev in enumerate(trace):
        last_event[ev.actor] = i
    # the tasks the loop found waiting when nothing could run, and the source name of what
    # each waits for ("Lock.acquire() on self.locks['a'] (locked)")
    blocked_info = [b for b in fail.details.get("blocked", ()) if isinstance(b.get("actor"), int)]
    blocked = {b["actor"] for b in blocked_info}
    waits_on = {b["actor"]: _waited_name(str(b.get("waits_for", ""))) for b in blocked_info}
    suspended = {
        b["actor"]: s for b in blocked_info if (s := _site_at(str(b.get("site") or ""))) is not None
    }
    if not blocked:  # a failure read back from an old file: every task that ran may wait
        blocked = {a for a in last_event if names.get(a, "").startswith("Task")}
    edges, first_taken, _ = wait_for_edges(trace, blocked)
    cycle = _core.wait_for_cycle(edges) if edges else None
    sites = detailed.result.await_sites or []
    lock_names: dict[int, str] = {}

    def lock_name(obj: int, waiter: int) -> str:
        if obj not in lock_names:
            label = waits_on.get(waiter) or (
                f"lock {chr(ord('A') + len(lock_names))}" if len(lock_names) < 26 else "lock"
            )
            taken = first_taken.get(obj)
            if taken is not None:
                where = _line_before(trace, *taken)
                if where is not None:
                    label += f" (taken at {where.where()} `{where.text}`)"
            lock_names[obj] = label
        return lock_names[obj]

    links: list[dict[str, str]] = []
    waits: list[tuple[str, rp.Site | None]] = []
    for e in cycle or []:
        waiter, lock, holder = e
        ev_w = last_event.get(waiter, -1)
        at = suspended.get(waiter) or _user_await(sites, ev_w) or _line_before(trace, ev_w, None)
        waits.append(("waits", at))
        links.append(
            {
                "task": names.get(waiter, f"actor {waiter}"),
                "resource": lock_name(lock, waiter),
                "held_by": names.get(holder, f"actor {holder}"),
                "at": at.where() if at else "",
            }
        )
    f = rp.Finding(pattern="deadlock", hazard="deadlock", cycle=links, lines=_lines(*waits))
    if links:
        f.task, f.other_task = links[0]["task"], links[0]["held_by"]
        f.resource = links[0]["resource"]
        f.text = rp.word_finding(f) + (
            " Acquire the locks in one global order." if len(links) > 1 else ""
        )
    else:
        signals = [b for b in blocked_info if _SIGNAL_WAIT.match(str(b.get("waits_for", "")))]
        if signals:
            return _lost_wakeup_finding(detailed, signals, names, causes)
        first, *rest = [ln.strip() for ln in fail.message.splitlines() if ln.strip()]
        f.text = first if first.startswith("deadlock") else "deadlock: " + first
        if rest:
            f.text += " " + "; ".join(rest)
        # the tasks stuck on a primitive; those waiting for other tasks only follow them
        stuck = [b for b in blocked_info if not _JOIN_WAIT.match(str(b.get("waits_for", "")))]
        f.lines = _lines(*(("waits", suspended.get(b["actor"])) for b in stuck))
    return f


#: what a task waits for when it waits for other tasks (deadlock.py's wording)
_JOIN_WAIT = re.compile(r"^(gather\(\)|its TaskGroup|asyncio\.wait\(\)|Task\b.* to finish$)")


def _site_at(where: str) -> rp.Site | None:
    """The Site of deadlock.py's "path:line" (relative to the current directory)."""
    file, _, line = where.rpartition(":")
    if not file or not line.isdigit():
        return None
    path = os.path.abspath(file)
    return rp.Site(path, int(line), _line_text(path, int(line)))


#: what a task waits for when only a signal can wake it (deadlock.py's wording)
_SIGNAL_WAIT = re.compile(r"^(Event\.wait\(\)|Condition\.wait(_for)?\(\)|a \w*Future\b)")


def _lost_wakeup_finding(
    detailed: Detailed,
    signals: list[dict[str, Any]],
    names: dict[int, str],
    causes: Sequence[Cause],
) -> rp.Finding:
    """Tasks that wait forever for an Event, a Condition or a future nobody completes: the
    signal came at the wrong moment (before the wait, cleared, consumed by another task) or
    not at all.  The signal's line is the other side of a cause that involves the waiter."""
    r = detailed.result
    trace = r.trace or []
    sites = r.await_sites or []
    waiter = signals[0]["actor"]
    last = max((i for i, ev in enumerate(trace) if ev.actor == waiter), default=-1)
    wait_at = _site_at(str(signals[0].get("site") or "")) or _user_await(sites, last)
    signal: rp.Site | None = None
    order = ""
    signal_causes = [c for c in causes if _is_signal(trace, c.before.obj, futures=True)]
    involved = [
        c
        for c in signal_causes
        if waiter in (trace[c.before.event].actor, trace[c.after.event].actor)
    ]
    for cause in reversed(involved or signal_causes):
        signal = _where(trace, _signal_access(trace, cause), sites)
        order = " " + order_sentence(trace, cause, names, sites)
        break
    else:  # the signal was lost on other state (a registry of waiters, a flag): the other
        # side of a swap that involves the waiter came too early
        for cause in reversed(list(causes)):
            sides = {trace[cause.before.event].actor: cause.after}
            sides[trace[cause.after.event].actor] = cause.before
            if waiter in sides and len(sides) == 2:
                other = sides[waiter]
                # a notify or set the other side sent on what the waiter waits on, before
                # the state it announces: that signal is the one lost
                sent = _signal_sent_before(trace, last, trace[other.event].actor, other.event)
                signal = _where(trace, sent or other, sites)
                order = " " + order_sentence(trace, cause, names, sites)
                break
    what = _waited_name(str(signals[0].get("waits_for", ""))) or "a signal"
    f = rp.Finding(
        pattern="lost-wakeup",
        hazard="lost-wakeup",
        task=names.get(waiter, f"actor {waiter}"),
        resource=what,
        await_site=wait_at,
        remote=signal,
    )
    f.lines = _lines(("waits", wait_at), ("signal", signal))
    f.text = (
        f"lost wake-up: {f.task} waits"
        + (f" at {wait_at.where()} `{wait_at.text}`" if wait_at else "")
        + f" for {signals[0].get('waits_for', 'a signal')}, which nothing will set or notify"
        + (
            f" any more: the signal at {signal.where()} `{signal.text}` came at the wrong moment."
            if signal
            else "."
        )
        + order
    )
    return f


_WAITED = re.compile(r"^\w+\.(?:acquire|wait)\(\) on (?P<name>.+?)(?: \([^()]*\))?$")


def _waited_name(waits_for: str) -> str | None:
    """The source name in the loop's "Lock.acquire() on self.locks['a'] (locked)", if any."""
    m = _WAITED.match(waits_for)
    if m is None or m["name"].startswith("an unnamed "):
        return None
    return m["name"]


def _user_await(sites: list[Any], event: int) -> rp.Site | None:
    if 0 <= event < len(sites) and sites[event]:
        file, line, text = sites[event]
        if _is_user_file(file):
            return rp.Site(file, line, _line_text(file, line) or text)
    return None


def _line_before(trace: list[Any], event: int, index: int | None) -> rp.Site | None:
    """The user's line of the last access of a step before access `index` (None: the end)."""
    if 0 <= event < len(trace):
        accs = trace[event].accesses
        for acc in reversed(accs[:index] if index is not None else accs):
            s = _site_of(acc[3])
            if s is not None:
                return s
    return None


def _is_user_file(file: str) -> bool:
    return not file.startswith((_PKG_DIR, _ASYNCIO_DIR, "<"))


_CANCEL_TYPES = {"CancelledError", "TimeoutError"}


def classify(failure: Failure | None, findings: list[rp.Finding]) -> str:
    """The hazard named to the user: the hazard of the most direct finding (see
    :func:`diagnose` for the order), a deadlock or a livelock by the failure itself; without
    a finding of a reordering that passes, the precedence of :mod:`chaossloth.report` over
    the engine's findings."""
    if failure is None:
        return "exception"
    if failure.kind == "deadlock":
        lost = any(f.hazard == "lost-wakeup" for f in findings)
        return "lost-wakeup" if lost else "deadlock"
    if failure.kind == "livelock":
        return "livelock"
    for f in findings:
        if f.causal:
            return f.hazard
    if failure.type_name in _CANCEL_TYPES or any(f.hazard == "cancellation" for f in findings):
        return "cancellation"
    for f in findings:
        if f.hazard in ("lost-update", "check-then-act", "dirty-read", "order-violation"):
            return f.hazard
    return "exception"


def _relevant_objects(trace: list[Any], deadlock: bool, raw_objects: set[int]) -> set[int]:
    """The objects a diagram shows: those of the findings; else (a deadlock, a plain exception)
    the locks and the objects written by one task and touched by another."""
    if raw_objects:
        return set(raw_objects)
    touched: dict[int, set[int]] = {}
    written: set[int] = set()
    locks: set[int] = set()
    for ev in trace:
        for obj, _key, kind, site in ev.accesses:
            if _sync_op(site, kind) is not None:
                locks.add(obj)
            if _site(site) is None:
                continue
            touched.setdefault(obj, set()).add(ev.actor)
            if kind != 1:
                written.add(obj)
    if deadlock and locks:
        return locks
    return {o for o, actors in touched.items() if len(actors) > 1 and o in written} | locks


def _object_name(s: site_registry.Site) -> str:
    """The source name of the object an access at site `s` touched (the receiver of an
    attribute, the container of a subscript)."""
    name = s.name or s.text
    if s.kind == "attr" and "." in name:
        return name.rsplit(".", 1)[0]
    return name


def diagram_steps(detailed: Detailed, raw_objects: set[int] | None = None) -> list[rp.DiagramStep]:
    r = detailed.result
    trace = r.trace or []
    names = {s.actor: s.name for s in r.steps}
    sites = r.await_sites or []
    deadlock = r.failure is not None and r.failure.kind == "deadlock"
    relevant = _relevant_objects(trace, deadlock, raw_objects or set())
    obj_names: dict[int, str] = {}
    n_locks = 0
    for ev in trace:
        for obj, _key, kind, site in ev.accesses:
            if obj not in relevant or obj in obj_names:
                continue
            s = _site(site)
            if s is not None:
                obj_names[obj] = _object_name(s)
            elif _sync_op(site, kind) is not None:
                n_locks += 1
                obj_names[obj] = f"lock {chr(ord('A') + n_locks - 1)}" if n_locks <= 26 else "lock"
    out: list[rp.DiagramStep] = []
    for i, ev in enumerate(trace):
        name = names.get(ev.actor, f"actor {ev.actor}")
        accs: list[tuple[str, str, str]] = []
        seen: set[tuple[str, str, str]] = set()
        for obj, _key, kind, site_id in ev.accesses:
            if obj not in relevant or obj not in obj_names:
                continue
            s = _site(site_id)
            op = _sync_op(site_id, kind)
            if s is not None:
                k = (obj_names[obj], "read" if kind == 1 else "write", f"{s.text} (line {s.line})")
            elif op is not None:
                k = (obj_names[obj], "write", op)
            else:
                continue
            if k not in seen:
                seen.add(k)
                accs.append(k)
        aw = _user_await(sites, i)
        out.append(
            rp.DiagramStep(
                name,
                accs,
                f"{aw.text} (line {aw.line})" if aw else "",
                name.startswith("Task"),
            )
        )
    return out


def preexisting_writes(trace: Sequence[Any], limit: int = 5) -> list[str]:
    """The resources an execution writes (from the user's lines) whose objects it did not
    create, as ``name (file:line)``: what it changes of the state it started from."""
    created = set()
    for ev in trace:
        for obj, _key, _kind, site_id in ev.accesses:
            s = _site(site_id)
            if s is not None and s.kind == "new":
                created.add(obj)
    out: list[str] = []
    for ev in trace:
        for obj, _key, kind, site_id in ev.accesses:
            s = _site(site_id)
            if kind == READ or obj in created or s is None or s.kind in _TIMELINE_SKIP_KINDS:
                continue
            if not _is_user_file(s.filename):
                continue
            name = f"{s.name or s.text} ({rp.relative_path(s.filename)}:{s.line})"
            if name not in out:
                out.append(name)
            if len(out) == limit:
                return out
    return out


#: site kinds a timeline leaves out: allocations and method lookups say nothing about the
#: state two tasks share
_TIMELINE_SKIP_KINDS = ("new", "method")


def timeline(
    detailed: Detailed, findings: Sequence[rp.Finding], causes: Sequence[Cause] = ()
) -> list[dict[str, Any]]:
    """The failing schedule step by step, JSON-ready (the report's ``timeline``): each step's
    task, its accesses that matter, and the await of the user's code where the task suspended.
    The accesses that matter are the user's lines touching the resources of the causes (else,
    as the diagram: the objects of the engine's findings, or those one task writes and another
    touches, and the locks); an access is highlighted when its line is one the top finding
    names."""
    r = detailed.result
    trace = r.trace or []
    names = {s.actor: s.name for s in r.steps}
    sites = r.await_sites or []
    # the causes' resources (object and key) when there are causes; else whole objects
    cause_keys = {(a.obj, a.key) for c in causes for a in (c.before, c.after)}
    deadlock = r.failure is not None and r.failure.kind == "deadlock"
    shared = _relevant_objects(trace, deadlock, set() if cause_keys else finding_objects(detailed))
    marked: set[tuple[str, int]] = set()
    if findings:
        top = findings[0]
        named = [top.local, top.remote, top.second, *(s for _role, s in top.lines)]
        marked = {(s.file, s.line) for s in named if s is not None}
    steps: list[dict[str, Any]] = []
    for i, ev in enumerate(trace):
        accesses: list[dict[str, Any]] = []
        seen: set[tuple[str, str, str, int]] = set()
        for obj, key, kind, site_id in ev.accesses:
            s = _site(site_id)
            if s is None or s.kind in _TIMELINE_SKIP_KINDS:
                continue
            if (obj, key) not in cause_keys if cause_keys else obj not in shared:
                continue
            if not _is_user_file(s.filename):
                continue
            resource = s.name or s.text
            what = _sync_op(site_id, kind) or ("read" if kind == READ else "write")
            k = (resource, what, s.filename, s.line)
            if k in seen:
                continue
            seen.add(k)
            accesses.append(
                {
                    "resource": resource,
                    "kind": what,
                    "file": s.filename,
                    "line": s.line,
                    "text": _line_text(s.filename, s.line) or s.text,
                    "highlight": (s.filename, s.line) in marked,
                }
            )
        aw = _user_await(sites, i)
        name = names.get(ev.actor, f"actor {ev.actor}")
        steps.append(
            {
                "step": i + 1,
                "task": name,
                "is_task": name.startswith("Task"),
                "accesses": accesses,
                "await": aw.to_json() if aw is not None else None,
            }
        )
    return steps


@dataclass
class Detailed:
    """A failing execution with its trace (``result``, from ``runner.run_once(detailed=True)``
    or the exploration's detailed re-run) and the engine explorer whose current execution it is
    (for ``_core.diagnose``)."""

    result: ExecutionResult
    explorer: Any


def _ignored_objects(detailed: Detailed) -> list[int]:
    """Objects only ChaosSloth's asyncio capture touched (no access from a line of the user's
    code): futures, tasks and primitives, whose intermediate states are meant to be seen."""
    user: set[int] = set()
    internal: set[int] = set()
    for ev in detailed.result.trace or []:
        for obj, _key, _kind, site in ev.accesses:
            (user if _site(site) is not None else internal).add(obj)
    return sorted(internal - user)


def diagnose(
    detailed: Detailed,
    failing: ExecutionResult,
    causes: Sequence[Cause] = (),
    scenario_code: tuple[str, int, int] | None = None,
) -> list[rp.Finding]:
    """Stage 5: the findings for the failing trace, with names and source lines, most direct
    first: a deadlock's wait-for cycle; then the findings of the `causes` (the races whose
    reversal passes, :mod:`chaossloth.causes`): a cancellation, then access patterns, then
    order violations; then the engine's other AVIO findings.  Within each group a finding whose
    lines all lie in the scenario function (`scenario_code`: file, first and last line) comes
    after the others: the scenario's own bookkeeping explains the least."""
    r = detailed.result
    trace = r.trace or []
    names = {s.actor: s.name for s in r.steps}
    fail = r.failure or failing.failure
    head: list[rp.Finding] = []
    if fail is not None and fail.kind == "deadlock":
        f = _deadlock_finding(detailed, fail, names, causes)
        # where a task or callback raised before it (runner: _note_errors_before): likely why
        # nothing completes what the tasks wait for
        raised = [_site_at(str(at)) for at in fail.details.get("raised_at", ())]
        f.lines = _lines(*f.lines, *(("raised", site) for site in raised))
        head.append(f)
    raw: list[Any] = list(_core.diagnose(detailed.explorer, ignore=_ignored_objects(detailed)))
    access_of = _access_table(trace)
    sites = r.await_sites or []
    engine: list[rp.Finding] = []
    # the engine's pattern findings by the (event, object) of their p and c accesses
    pattern_at: dict[tuple[int, int], rp.Finding] = {}
    for item in raw:
        f = _finding_from(item, trace, access_of, sites, names)
        if f is None:
            continue
        engine.append(f)
        for which in ("c", "p"):
            ai = item[f"{which}_access"]
            if f.pattern in rp.PATTERN_HAZARD and isinstance(ai, int) and ai < len(access_of):
                event, acc = access_of[ai]
                pattern_at.setdefault((event, acc[0]), f)
    causal = cause_findings(detailed, causes, fail, pattern_at)
    if head:  # the wait-for cycle explains a deadlock; swaps of lock internals add nothing
        causal = [f for f in causal if f.resource != "asyncio internals"]
    for f in causal:
        f.causal = True
    named = {_line_key(f) for f in causal}
    engine = [f for f in engine if _line_key(f) not in named]
    if not causal:
        cancel = _cancellation_finding(detailed, names, raw[0] if raw else None)
        if cancel is not None:
            engine.insert(0, cancel)

    def in_scenario(f: rp.Finding) -> bool:
        if scenario_code is None:
            return False
        file, first, last = scenario_code
        lines = [s for _role, s in f.lines] or [
            s for s in (f.local, f.remote, f.second) if s is not None
        ]
        return bool(lines) and all(
            os.path.basename(s.file) == os.path.basename(file) and first <= s.line <= last
            for s in lines
        )

    rank = {"cancellation": 0, "order": 2, "lost-wakeup": 2}
    causal.sort(key=lambda f: (in_scenario(f), rank.get(f.pattern, 1)))
    engine.sort(key=in_scenario)
    return head + causal + engine


def _line_key(f: rp.Finding) -> tuple[tuple[str, int], ...]:
    sites = [s for s in (f.local, f.remote, f.second) if s is not None]
    return tuple(sorted({(s.file, s.line) for s in sites}))


def _sync_text(site_id: int) -> str:
    st = site_registry.get(site_id)
    return st.text if st.kind == "sync" else ""


def _cancellation_finding(
    detailed: Detailed, names: dict[int, str], first_avio: dict[str, Any] | None
) -> rp.Finding | None:
    """A cancellation (a task.cancel(), a timeout) that the failure needed: issued before the
    scenario's task ended, and inside the window of the first access pattern if there is one."""
    trace = detailed.result.trace or []
    root = next((a for a in sorted(names) if detailed.explorer.actor_path(a) == (None, 0)), None)
    root_events = [i for i, ev in enumerate(trace) if ev.actor == root]
    end = root_events[-1] if root_events else len(trace)
    owner: dict[int, int] = {}  # task object -> its actor (a task records its own completion)
    for ev in trace:
        for obj, _key, _kind, site in ev.accesses:
            if _sync_text(site) == "Task.complete()":
                owner[obj] = ev.actor
    sites = detailed.result.await_sites or []
    for i, ev in enumerate(trace[: end + 1]):
        for k, (obj, _key, _kind, site) in enumerate(ev.accesses):
            if _sync_text(site) != "Task.cancel()":
                continue
            if first_avio is not None:
                p, c = first_avio["p_event"], first_avio["c_event"]
                if not p < i < c:
                    continue
            cancel = Access(i, k, obj, _key, _kind, site)
            return _cancellation(cancel, owner.get(obj), trace, names, sites, "")
    return None


def finding_objects(detailed: Detailed) -> set[int]:
    """The objects of the engine's findings (what a diagram of the failure shows)."""
    return {
        item["object"] for item in _core.diagnose(detailed.explorer, _ignored_objects(detailed))
    }


def _access_table(trace: list[Any]) -> list[tuple[int, tuple[int, int, int, int]]]:
    out: list[tuple[int, tuple[int, int, int, int]]] = []
    for i, ev in enumerate(trace):
        for acc in ev.accesses:
            out.append((i, acc))
    return out


# ------------------------------------------------------------------ causes


def _code(acc: Access) -> str:
    return "R" if acc.kind == READ else "W"


def _first_overlap(trace: list[Any], event: int, like: Access) -> Access | None:
    for k, acc in enumerate(trace[event].accesses):
        a = Access(event, k, *acc)
        if a.overlaps(like) and a.obj == like.obj:
            return a
    return None


_UNSERIALIZABLE = ("RWR", "RWW", "WRW", "WWR")


def _avio_of(
    trace: list[Any], cause: Cause, sites: list[Any]
) -> tuple[Access, Access, Access] | None:
    """The unserializable AVIO triple (p, r, c) the cause's two accesses are part of: the swap
    is (p, r) when the first task touches the resource again later (c), or (r, c) when the
    second task had touched it before (p).  A check (p is the test of an if/while/assert) is
    completed by the act: the task's first later write of the resource, when it has one,
    else its first later access.  Failing both, the triple may span two resources of one
    update: the first task's next write after r to anything r's step read (a reader that
    saw one half of a two-part update: a dirty read of the pair).  None when nothing forms
    an unserializable pattern."""
    b, a = cause.before, cause.after
    x, y = trace[b.event].actor, trace[a.event].actor
    later = [k for k in range(a.event + 1, len(trace)) if trace[k].actor == x]
    found: list[tuple[Access, Access, Access]] = []
    c = next((q for k in later if (q := _first_overlap(trace, k, b)) is not None), None)
    if c is not None:
        s_p = _where(trace, b, sites)
        if c.kind == READ and s_p is not None and rp.is_condition(s_p.text):
            act = next(
                (
                    Access(k, i, *acc)
                    for k in later
                    for i, acc in enumerate(trace[k].accesses)
                    if acc[2] != READ and Access(k, i, *acc).overlaps(b)
                ),
                None,
            )
            c = act or c
        found.append((b, a, c))
    for k in range(b.event - 1, -1, -1):  # (r, c) = (before, after); p: y's previous access
        if trace[k].actor == y:
            accs = [Access(k, i, *acc) for i, acc in enumerate(trace[k].accesses)]
            p = next((q for q in reversed(accs) if q.overlaps(a) and q.obj == a.obj), None)
            if p is not None:
                found.append((p, b, a))
                break
    for p, r, c in found:
        if _code(p) + _code(r) + _code(c) in _UNSERIALIZABLE:
            return p, r, c
    if b.writes and not a.writes:
        read_by_r = [Access(a.event, i, *acc) for i, acc in enumerate(trace[a.event].accesses)]
        for k in later:
            for i, acc in enumerate(trace[k].accesses):
                w = Access(k, i, *acc)
                if (
                    w.writes
                    and _site(w.site) is not None
                    and any(q.overlaps(w) and q.obj == w.obj for q in read_by_r)
                ):
                    return b, a, w
    return None


def _where(trace: list[Any], acc: Access, sites: list[Any]) -> rp.Site | None:
    """The user's line of an access: its own site, else the user line the step ran last
    before it, else the last user line of the task's earlier steps (the await it resumed
    from), else, for a task that never ran user code, the line that created it."""
    s = _site_of(acc.site)
    if s is not None:
        return s
    s = _line_before(trace, acc.event, acc.index)
    if s is not None:
        return s
    actor = trace[acc.event].actor
    prev = [k for k in range(acc.event) if trace[k].actor == actor]
    for k in reversed(prev):  # the user's line the task ran last
        s = _user_await(sites, k) or _line_before(trace, k, None)
        if s is not None:
            return s
    # a task made straight from a library coroutine (wait_for's inner task on 3.11, a
    # create_task(event.wait())): the user's line that created it
    first = prev[0] if prev else acc.event
    made_by = trace[first].scheduled_by
    return _line_before(trace, made_by, None) if 0 <= made_by < first else None


def _kind_word(acc: Access) -> str:
    return "read" if acc.kind == READ else "write"


def _cancel_in(trace: list[Any], event: int) -> Access | None:
    for k, acc in enumerate(trace[event].accesses):
        if _sync_text(acc[3]) == "Task.cancel()":
            return Access(event, k, *acc)
    return None


def order_sentence(trace: list[Any], cause: Cause, names: dict[int, str], sites: list[Any]) -> str:
    """ "In the passing order, B's write at Y happens before A's read at X; in the failing
    order, after it." for a cause."""
    b, a = cause.before, cause.after
    wb, wa = _where(trace, b, sites), _where(trace, a, sites)
    nb = names.get(trace[b.event].actor, "one task")
    na = names.get(trace[a.event].actor, "another task")
    at_b = f" at {wb.where()} `{wb.text}`" if wb else ""
    at_a = f" at {wa.where()} `{wa.text}`" if wa else ""
    return (
        f"In the passing order, {na}'s {_kind_word(a)}{at_a} happens before {nb}'s"
        f" {_kind_word(b)}{at_b}; in the failing order, after it."
    )


def _cause_finding(
    cause: Cause,
    trace: list[Any],
    names: dict[int, str],
    sites: list[Any],
    failure: Failure | None,
    owner: dict[int, int],
) -> rp.Finding:
    b, a = cause.before, cause.after
    order = order_sentence(trace, cause, names, sites)
    cancel = _cancel_in(trace, b.event) or _cancel_in(trace, a.event)
    if cancel is not None:
        return _cause_cancellation(cancel, cause, trace, names, sites, order, owner)
    if _is_signal(trace, b.obj):
        return _signal_finding(cause, trace, names, sites, order)
    triple = _avio_of(trace, cause, sites)
    if triple is not None:
        p, r, c = triple
        local, remote, second = (
            _where(trace, p, sites),
            _where(trace, r, sites),
            _where(trace, c, sites),
        )
        pattern = "-".join(_code(p) + _code(r) + _code(c))
        hazard = rp.hazard_of_pattern(pattern, local)
        if p.obj != c.obj:
            pattern, hazard = "W-R-W", "dirty-read"  # the two halves of one update
        if hazard == "lost-update" and _raised_at(failure, second):
            hazard = "check-then-act"  # the act failed on what the stale read assumed
        actor_p = trace[p.event].actor
        prev = [k for k in range(r.event) if trace[k].actor == actor_p and k >= p.event]
        f = rp.Finding(
            pattern=pattern,
            hazard=hazard,
            task=names.get(actor_p, f"actor {actor_p}"),
            other_task=names.get(trace[r.event].actor, "another task"),
            resource=_label_of(p, r, c),
            local=local,
            await_site=_user_await(sites, prev[-1]) if prev else None,
            remote=remote,
            second=second,
        )
        f.lines = _lines(("first", local), ("other", remote), ("second", second))
        f.text = rp.word_finding(f) + " " + order
        return f
    # no atomicity pattern: the two accesses ran in the wrong order (use before init, a read
    # of a value written too early, two writes in the wrong order)
    wb, wa = _where(trace, b, sites), _where(trace, a, sites)
    xb, ya = trace[b.event].actor, trace[a.event].actor
    f = rp.Finding(
        pattern="order",
        hazard="order-violation",
        task=names.get(xb, f"actor {xb}"),
        other_task=names.get(ya, f"actor {ya}"),
        resource=_label_of(b, a),
        local=wb,
        remote=wa,
    )
    f.lines = _lines(("early", wb), ("late", wa))
    what = (
        f"{f.task} uses {f.resource} before {f.other_task} initialises it"
        if b.kind == READ and a.kind != READ
        else f"{f.task} and {f.other_task} touch {f.resource} in the wrong order"
    )
    f.text = f"order violation on {f.resource}: {what}. {order}"
    return f


_SIGNAL_OP = re.compile(r"^(asyncio\.)?(Event|Condition)\.")
_FUTURE_OP = re.compile(
    r"^(asyncio\.)?(Event|Condition|Future)\.(set_result|set|notify|notify_all|clear|wait)\("
)


def _is_signal(trace: list[Any], obj: int, futures: bool = False) -> bool:
    """`obj` is an Event or a Condition (the asyncio capture recorded one of their operations
    on it); with `futures`, also a Future completed with set_result (a hand-made signal)."""
    op = _FUTURE_OP if futures else _SIGNAL_OP
    return any(a[0] == obj and op.match(_sync_text(a[3])) for ev in trace for a in ev.accesses)


def _signal_sent_before(
    trace: list[Any], wait_event: int, sender: int, until: int
) -> Access | None:
    """The last notify/set by `sender` up to event `until` on the primitive the waiter's
    event `wait_event` waits on (its last wait access), or None."""
    if not 0 <= wait_event < len(trace):
        return None
    waited = [
        a[0]
        for a in trace[wait_event].accesses
        if _sync_text(a[3]).endswith(("wait()", "wait_for()"))
    ]
    if not waited:
        return None
    found: Access | None = None
    for k in range(until + 1):
        if trace[k].actor != sender:
            continue
        for i, a in enumerate(trace[k].accesses):
            if a[0] in waited and re.search(r"\.(notify|notify_all|set)\(\)$", _sync_text(a[3])):
                found = Access(k, i, *a)
    return found


def _signal_access(trace: list[Any], cause: Cause) -> Access:
    """The side of a swap on a signal that lost it: the one that erased it (a clear), else the
    one that came too early (a set or notify before the wait)."""
    for acc in (cause.after, cause.before):
        if any(
            a[0] == acc.obj and _sync_text(a[3]).endswith(".clear()")
            for a in trace[acc.event].accesses
        ):
            return acc
    return cause.before


def _signal_finding(
    cause: Cause, trace: list[Any], names: dict[int, str], sites: list[Any], order: str
) -> rp.Finding:
    """A swap on an Event or Condition that makes a waiter miss its signal (the failure is
    then a timeout or a wrong result, not a deadlock): a lost wake-up."""
    obj = cause.before.obj
    wait: Access | None = None
    wait_at: rp.Site | None = None
    for k, ev in enumerate(trace):  # the last wait on it that has a line of the user's
        for i, a in enumerate(ev.accesses):
            if a[0] == obj and _sync_text(a[3]).endswith((".wait()", ".wait_for()")):
                at = _where(trace, Access(k, i, *a), sites)
                if at is not None:
                    wait, wait_at = Access(k, i, *a), at
    signal = _where(trace, _signal_access(trace, cause), sites)
    waiter = trace[wait.event].actor if wait is not None else trace[cause.after.event].actor
    f = rp.Finding(
        pattern="lost-wakeup",
        hazard="lost-wakeup",
        task=names.get(waiter, f"actor {waiter}"),
        resource=_label_of(cause.before, cause.after),
        await_site=wait_at,
        remote=signal,
    )
    f.lines = _lines(("waits", wait_at), ("signal", signal))
    f.text = (
        f"lost wake-up on {f.resource}: {f.task} waits"
        + (f" at {wait_at.where()} `{wait_at.text}`" if wait_at else "")
        + (
            f"; the signal at {signal.where()} `{signal.text}` comes at the wrong moment"
            if signal
            else ""
        )
        + f". {order}"
    )
    return f


def _cause_cancellation(
    cancel: Access,
    cause: Cause,
    trace: list[Any],
    names: dict[int, str],
    sites: list[Any],
    order: str,
    owner: dict[int, int],
) -> rp.Finding:
    victim = owner.get(cancel.obj)
    if victim is None:  # the cancelled task never completed: the other side of the swap
        other = cause.after if cause.before.event == cancel.event else cause.before
        victim = trace[other.event].actor
    return _cancellation(cancel, victim, trace, names, sites, order)


def _cancellation(
    cancel: Access,
    victim: int | None,
    trace: list[Any],
    names: dict[int, str],
    sites: list[Any],
    order: str,
) -> rp.Finding:
    """A cancellation that the failure needs: the victim, its last write before the await at
    which the cancellation reached it (the first part of its update), and who cancelled (the
    user's line of the cancelling step; for a timer's callback, the victim's
    wait_for/timeout line)."""
    canceller = trace[cancel.event].actor
    before_cancel = [k for k in range(cancel.event) if trace[k].actor == victim]
    at = _user_await(sites, before_cancel[-1]) if before_cancel else None
    first_part: rp.Site | None = None
    for k in reversed(before_cancel):
        for acc in reversed(trace[k].accesses):
            if acc[2] != READ and _site(acc[3]) is not None:
                first_part = _site_of(acc[3])
                break
        if first_part is not None:
            break
    by = _line_before(trace, cancel.event, cancel.index)
    if by is None:
        prev = [k for k in range(cancel.event) if trace[k].actor == canceller]
        by = _user_await(sites, prev[-1]) if prev else None
    if by is None and victim is not None:
        by = _timeout_site(trace, sites, victim, cancel.event)
    f = rp.Finding(
        pattern="cancellation",
        hazard="cancellation",
        task=names.get(victim, "a task") if victim is not None else "a task",
        other_task=names.get(canceller, f"actor {canceller}"),
        local=first_part,
        await_site=at,
        remote=by,
    )
    f.lines = _lines(("first-part", first_part), ("cancelled-at", at), ("cancel", by))
    f.text = (
        f"cancellation: {f.task} is cancelled"
        + (f" by {by.where()} `{by.text}`" if by else f" by {f.other_task}")
        + (f" while suspended at {at.where()} `{at.text}`" if at else "")
        + (
            f", after the first part of its update at {first_part.where()} `{first_part.text}`"
            if first_part
            else ""
        )
        + "; the rest never runs (use try/finally, or asyncio.shield for work that must"
        " complete)." + (" " + order if order else "")
    )
    return f


_TIMEOUT_CALL = re.compile(r"\b(wait_for|timeout|timeout_at)\s*\(")


def _timeout_site(trace: list[Any], sites: list[Any], victim: int, before: int) -> rp.Site | None:
    """The user's `wait_for(...)`/`asyncio.timeout(...)` line of a victim cancelled by a timer:
    the last line of the victim's steps before the cancellation (their accesses and the awaits
    they resumed from) that calls one."""
    best: rp.Site | None = None
    for k in range(before):
        if trace[k].actor != victim:
            continue
        cands = [_site_of(acc[3]) for acc in trace[k].accesses] + [_user_await(sites, k)]
        for s in cands:
            if s is not None and _TIMEOUT_CALL.search(s.text):
                best = s
    return best


def _raised_at(failure: Failure | None, site: rp.Site | None) -> bool:
    """The failure's exception was raised at `site` (its innermost user frame is there)."""
    if failure is None or site is None or not failure.traceback:
        return False
    frames = [(f, int(n)) for f, n in _FRAME_LINE.findall(failure.traceback)]
    user = [fl for fl in frames if _is_user_file(fl[0])]
    return (
        bool(user)
        and user[-1][1] == site.line
        and os.path.basename(user[-1][0]) == os.path.basename(site.file)
    )


_FRAME_LINE = re.compile(r'^\s*File "([^"]+)", line (\d+)', re.MULTILINE)


def _label_of(*accs: Access) -> str:
    for acc in accs:
        label = _resource_label(acc.site)
        if label != "asyncio internals":
            return label
    return "asyncio internals"


def _lines(*roles: tuple[str, rp.Site | None]) -> list[tuple[str, rp.Site]]:
    """The (role, site) pairs of a finding, one per distinct line."""
    out: list[tuple[str, rp.Site]] = []
    seen: set[tuple[str, int]] = set()
    for role, s in roles:
        if s is None or (s.file, s.line) in seen:
            continue
        seen.add((s.file, s.line))
        out.append((role, s))
    return out


def _pattern_of_swap(
    trace: Sequence[Any], cause: Cause, pattern_at: dict[tuple[int, int], rp.Finding]
) -> rp.Finding | None:
    """The engine pattern that explains a swap: one whose p or c access is in either swapped
    step, on the object of the cause's own pair first, then on any other object the two steps
    conflict on (the swap reorders every one of them; a refund's stale balance write and its
    history append move together, and the balance is what the assertion counts)."""
    for acc in (cause.before, cause.after):
        pat = pattern_at.get((acc.event, acc.obj))
        if pat is not None:
            return pat
    for a in accesses_of(trace, cause.before.event):
        for b in accesses_of(trace, cause.after.event):
            if a.obj == b.obj and (a.writes or b.writes) and a.overlaps(b):
                pat = pattern_at.get((a.event, a.obj)) or pattern_at.get((b.event, b.obj))
                if pat is not None:
                    return pat
    return None


def cause_findings(
    detailed: Detailed,
    causes: Sequence[Cause],
    failure: Failure | None,
    pattern_at: dict[tuple[int, int], rp.Finding] | None = None,
) -> list[rp.Finding]:
    """One finding per cause (duplicates, same lines and hazard, dropped).  A swap that forms
    no pattern of its own but whose access is the act (c) or the start (p) of an engine
    pattern in the failing trace (`pattern_at`, by event and object) is explained by that
    pattern: a consumer's pop that fails unless the producer's put comes first, after its
    emptiness check went stale, is the check-then-act, not an order violation."""
    r = detailed.result
    trace = r.trace or []
    names = {s.actor: s.name for s in r.steps}
    sites = r.await_sites or []
    owner: dict[int, int] = {}
    for ev in trace:
        for obj, _key, _kind, site in ev.accesses:
            if _sync_text(site) == "Task.complete()":
                owner[obj] = ev.actor
    out: list[rp.Finding] = []
    seen: set[tuple[str, tuple[tuple[str, int], ...]]] = set()
    for cause in causes:
        f = _cause_finding(cause, trace, names, sites, failure, owner)
        if f.pattern == "order" and pattern_at:
            pat = _pattern_of_swap(trace, cause, pattern_at)
            if pat is not None:
                order = order_sentence(trace, cause, names, sites)
                f = dataclasses.replace(pat, text=f"{pat.text} {order}")
        key = (f.hazard, tuple((s.file, s.line) for _role, s in f.lines))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
