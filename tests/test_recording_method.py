"""capture/sync.py's recording Future and Task methods are _core.RecordingMethod objects
(ext/recording.c): each records an access of its instance, then calls the C method it stands
for with the same arguments.  Without an explorer they are the C methods, call for call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chaossloth import _core
from chaossloth.capture import sync


class Base:
    def echo(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return (self, args, kwargs)

    def fail(self) -> None:
        raise KeyError("from the base")


class Recorded(Base):
    echo = _core.RecordingMethod(Base.echo, sync.R, 0)
    fail = _core.RecordingMethod(Base.fail, sync.W, 0)


def test_a_recording_method_calls_its_base_with_the_same_arguments() -> None:
    r = Recorded()
    assert r.echo(1, 2, k=3) == (r, (1, 2), {"k": 3})
    assert Recorded.echo(r, 4) == (r, (4,), {})
    bound = r.echo
    assert bound(5) == (r, (5,), {}) and bound.__self__ is r
    assert isinstance(Recorded.__dict__["echo"], _core.RecordingMethod)
    assert Recorded.echo.__name__ == "echo" and Recorded.echo.__wrapped__ is Base.echo
    with pytest.raises(KeyError, match="from the base"):
        r.fail()


def test_bad_uses_are_type_errors() -> None:
    with pytest.raises(TypeError, match="instance"):
        Recorded.echo()
    with pytest.raises(TypeError):
        _core.RecordingMethod(42, sync.R, 0)
    with pytest.raises(TypeError):
        _core.RecordingMethod(Base.echo, sync.R, "site")
    with pytest.raises(TypeError):
        _core.RecordingMethod(Base.echo, sync.R, 0, 99)


def test_a_recording_task_joins_the_tracker_and_behaves_as_a_c_task() -> None:
    async def child() -> int:
        await asyncio.sleep(0)
        return 7

    kept: list[Any] = []

    async def main() -> tuple[int, bool]:
        t = sync.RecordingTask(child())
        kept.append(t)
        fut = sync.RecordingFuture()
        asyncio.get_running_loop().call_soon(fut.set_result, "x")
        got = await fut
        return await t, got == "x" and fut.done() and not fut.cancelled()

    tracked: list[Any] = []
    sync.tracker = tracked
    try:
        assert asyncio.run(main()) == (7, True)
    finally:
        sync.tracker = None
    # the tracker holds it weakly: alive while the program holds it, freed once it does not
    assert len(tracked) == 1 and tracked[0]() is kept[0] and isinstance(kept[0], asyncio.Task)
    assert kept[0].result() == 7
    kept.clear()
    assert tracked[0]() is None
