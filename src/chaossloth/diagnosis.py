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
import linecache
import os
import re
from dataclasses import dataclass
from typing import Any

from chaossloth import _core
from chaossloth import report as rp
from chaossloth.capture import sites as site_registry
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
    return linecache.getline(file, line).strip()


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
    f.text = rp.word_finding(f)
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


def _deadlock_finding(detailed: Detailed, fail: Failure, names: dict[int, str]) -> rp.Finding:
    trace = detailed.result.trace or []
    last_event: dict[int, int] = {}
    for i, ev in enumerate(trace):
        last_event[ev.actor] = i
    # the tasks the loop found waiting when nothing could run, and the source name of what
    # each waits for ("Lock.acquire() on self.locks['a'] (locked)")
    blocked_info = [b for b in fail.details.get("blocked", ()) if isinstance(b.get("actor"), int)]
    blocked = {b["actor"] for b in blocked_info}
    waits_on = {b["actor"]: _waited_name(str(b.get("waits_for", ""))) for b in blocked_info}
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
    for e in cycle or []:
        waiter, lock, holder = e
        ev_w = last_event.get(waiter, -1)
        at = _user_await(sites, ev_w) or _line_before(trace, ev_w, None)
        links.append(
            {
                "task": names.get(waiter, f"actor {waiter}"),
                "resource": lock_name(lock, waiter),
                "held_by": names.get(holder, f"actor {holder}"),
                "at": at.where() if at else "",
            }
        )
    f = rp.Finding(pattern="deadlock", hazard="deadlock", cycle=links)
    if links:
        f.task, f.other_task = links[0]["task"], links[0]["held_by"]
        f.resource = links[0]["resource"]
        f.text = rp.word_finding(f) + (
            " Acquire the locks in one global order." if len(links) > 1 else ""
        )
    else:
        f.text = "deadlock: " + fail.message.splitlines()[0]
        rest = [ln.strip() for ln in fail.message.splitlines()[1:] if ln.strip()]
        if rest:
            f.text += " " + "; ".join(rest)
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
    """The hazard named to the user (precedence: see chaossloth.report)."""
    if failure is None:
        return "exception"
    if failure.kind == "deadlock":
        return "deadlock"
    if failure.kind == "livelock":
        return "livelock"
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


def diagnose(detailed: Detailed, failing: ExecutionResult) -> list[rp.Finding]:
    """Stage 5: the engine's findings for the failing trace, with names and source lines."""
    r = detailed.result
    trace = r.trace or []
    names = {s.actor: s.name for s in r.steps}
    findings: list[rp.Finding] = []
    fail = r.failure or failing.failure
    if fail is not None and fail.kind == "deadlock":
        findings.append(_deadlock_finding(detailed, fail, names))
    raw: list[Any] = list(_core.diagnose(detailed.explorer, ignore=_ignored_objects(detailed)))
    access_of = _access_table(trace)
    sites = r.await_sites or []
    for item in raw:
        f = _finding_from(item, trace, access_of, sites, names)
        if f is not None:
            findings.append(f)
    cancel = _cancellation_finding(detailed, names, raw[0] if raw else None)
    if cancel is not None:
        findings.insert(0, cancel)
    return findings


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
    for i, ev in enumerate(trace[: end + 1]):
        for obj, _key, _kind, site in ev.accesses:
            if _sync_text(site) != "Task.cancel()":
                continue
            if first_avio is not None:
                p, c = first_avio["p_event"], first_avio["c_event"]
                if not p < i < c:
                    continue
            target = owner.get(obj)
            victim = names.get(target, "a task") if target is not None else "a task"
            sites = detailed.result.await_sites or []
            prev = [k for k in range(i) if trace[k].actor == ev.actor]
            by = _user_await(sites, prev[-1]) if prev else None
            victim_prev = [k for k in range(i) if target is not None and trace[k].actor == target]
            at = _user_await(sites, victim_prev[-1]) if victim_prev else None
            f = rp.Finding(
                pattern="cancellation",
                hazard="cancellation",
                task=victim,
                other_task=names.get(ev.actor, f"actor {ev.actor}"),
                await_site=at,
                remote=by,
            )
            f.text = (
                f"cancellation: {f.other_task} cancels {victim}"
                + (f" (timeout or cancel at {by.where()} `{by.text}`)" if by else "")
                + (f" while it is suspended at {at.where()} `{at.text}`" if at else "")
                + "; the work it had started is left half-done (use try/finally, or "
                "asyncio.shield for work that must complete)."
            )
            return f
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
