"""Workload arguments: parsing --args/--init-args, and synthesizing them from the signature when
the option is absent (`chaossloth.arguments`), through `scenario.load_workload` and the CLI.

This module has no ``from __future__ import annotations``: the rule table below is checked on
runtime annotations, and the string annotations are checked on files that import it."""

import enum
import inspect
import json
import textwrap
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, NewType, Optional, Union

import pytest
from conftest import ROOT, cli

from chaossloth import arguments, scenario
from chaossloth.errors import InputError

TRY_IT = str(ROOT / "tests" / "targets" / "test_multi_resource.py")


class Color(enum.Enum):
    RED = "r"
    GREEN = "g"


class Opaque:
    pass


UserId = NewType("UserId", str)
OPAQUE = Opaque()


def _synth(fn: Any, option: str = "--args") -> arguments.Arguments:
    params = list(inspect.signature(fn).parameters.values())
    return arguments.synthesize(params, fn, globals(), fn.__qualname__, option)


def _round_trip(got: arguments.Arguments) -> None:
    """The literal text gives back the values, with their types (what replay relies on)."""
    assert got.text is not None
    back = arguments.parse(got.text, "--args", globals())
    assert back == got.values
    assert [type(v) for v in back] == [type(v) for v in got.values]


# one function per rule: (function, the values synthesized for it); the typing spellings
# (Optional, Union, List) are the ones users write, so the lint rules against them are off here
async def f_str(client_id: str): ...
async def f_scalars(n: int, x: float, flag: bool, raw: bytes): ...
async def f_optional(a: Optional[int], b: int | None, c: Union[None, str]): ...  # noqa: UP007, UP045
async def f_none(a: None): ...
async def f_union_first_arm(a: Union[Opaque, int, str], b: "int | str"): ...  # noqa: UP007
async def f_enum(c: Color): ...
async def f_literal(mode: Literal["fast", "slow"], n: Literal[3, 4]): ...
async def f_literal_enum(c: Literal[Color.GREEN]): ...
async def f_containers(a: list, b: dict[str, int], c: set, d: tuple[int, ...]): ...
async def f_typing_containers(a: typing.List[int], b: typing.Dict[str, int]): ...  # noqa: UP006
async def f_annotated_newtype(a: Annotated[int, "meta"], u: UserId): ...
async def f_defaults(key: str, n: int = 5, obj: Opaque = OPAQUE, *rest: Opaque, **kw: Any): ...
async def f_optional_opaque(o: Optional[Opaque]): ...  # noqa: UP045


RULES = [
    (f_str, ("client_id",)),
    (f_scalars, (1, 1.0, True, b"x")),
    (f_optional, (None, None, None)),
    (f_none, (None,)),
    (f_union_first_arm, (1, 1)),
    (f_enum, (Color.RED,)),
    (f_literal, ("fast", 3)),
    (f_literal_enum, (Color.GREEN,)),
    (f_containers, ([], {}, set(), ())),
    (f_typing_containers, ([], {})),
    (f_annotated_newtype, (1, "u")),
    (f_defaults, ("key",)),
    (f_optional_opaque, (None,)),
]


@pytest.mark.parametrize(("fn", "expected"), RULES, ids=[fn.__name__ for fn, _ in RULES])
def test_each_rule_gives_its_value(fn: Any, expected: tuple[Any, ...]) -> None:
    got = _synth(fn)
    assert got.values == expected
    assert [type(v) for v in got.values] == [type(v) for v in expected]
    assert got.synthesized
    _round_trip(got)


def test_text_is_always_a_tuple_and_names_enum_members() -> None:
    assert _synth(f_str).text == "('client_id',)"
    # a lone empty tuple written alone would mean "no arguments"
    one_tuple = _synth(_one_tuple)
    assert one_tuple.text == "((),)" and one_tuple.values == ((),)
    assert _synth(f_enum).text == "(Color.RED,)"
    assert _synth(f_containers).text == "([], {}, set(), (),)"


async def _one_tuple(t: tuple): ...


async def e_no_annotation(self_like, key): ...
async def e_any(key: Any): ...
async def e_opaque(key: str, conn: Opaque): ...
async def e_keyword_only(key: str, *, conn: str): ...


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (e_no_annotation, r"parameter 'self_like' has no annotation and no default"),
        (e_any, r"parameter 'key' is annotated Any"),
        (e_opaque, r"parameter 'conn' is annotated .*Opaque"),
        (e_keyword_only, r"parameter 'conn' is keyword-only and has no default"),
    ],
)
def test_nothing_to_synthesize_from_is_an_input_error(fn: Any, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        _synth(fn)
    assert fn.__qualname__ in str(info.value)
    if "keyword-only" not in message:
        assert "give --args" in str(info.value)


def test_the_constructor_error_suggests_init_args() -> None:
    with pytest.raises(InputError, match=r"give --init-args"):
        _synth(e_opaque, "--init-args")


def test_an_enum_the_namespace_does_not_name_is_an_input_error() -> None:
    class Hidden(enum.Enum):
        A = 1

    async def f(h: Hidden): ...

    with pytest.raises(InputError, match=r"parameter 'h' is an Enum .*Hidden.* does not name"):
        _synth(f)


def test_parse_resolves_enum_members_and_nothing_else() -> None:
    ns = {"Color": Color, "Opaque": Opaque, "enum_mod": enum}
    assert arguments.parse("(Color.GREEN, 1)", "--args", ns) == (Color.GREEN, 1)
    assert arguments.parse("Color.RED", "--args", ns) == (Color.RED,)
    assert arguments.parse("[set(), {1: Color.RED}]", "--args", ns) == (set(), {1: Color.RED})
    for bad in ("Opaque", "Color.BLUE", "audit", "Color.RED.value", "print(1)", "enum_mod.Enum"):
        with pytest.raises(InputError, match="is not a Python literal"):
            arguments.parse(bad, "--args", ns)
    with pytest.raises(InputError, match="is not a Python literal"):
        arguments.check_syntax("(1,", "--args")
    assert arguments.parse("", "--args") == () and arguments.parse(None, "--args") == ()


def test_call_text_and_the_stage_line() -> None:
    assert arguments.call_text("handle", "('client_id',)") == "handle('client_id')"
    assert arguments.call_text("handle", "'a'") == "handle('a')"
    assert arguments.call_text("handle", "('a', 1)") == "handle('a', 1)"
    assert arguments.call_text("handle", None) == "handle()"
    assert (
        arguments.arguments_line("S", "handle", 2, "('client_id',)", None, True, False)
        == "arguments: handle('client_id') x2 (synthesized from the signature; --args to choose)"
    )
    assert (
        arguments.arguments_line("S", "handle", 3, "'a'", "(1,)", False, True)
        == "arguments: S(1), then handle('a') x3 (constructor arguments synthesized from its "
        "signature; --init-args to choose)"
    )
    assert arguments.arguments_line("S", "handle", 2, "'a'", None, False, False) == (
        "arguments: handle('a') x2"
    )


# ------------------------------------------------------------------ through load_workload


def _file(tmp_path: Path, name: str, src: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(src))
    return p


def _load(path: Path, cls: str, method: str, *args: Any) -> scenario.Program:
    program = scenario.load_workload(path, cls, method, *args)
    program.release()
    return program


FUTURE_SOURCE = """\
from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from somewhere import Missing


class Mode(enum.Enum):
    ON = 1
    OFF = 2


class Server:
    def __init__(self, name: str, size: int, mode: Mode, extra: Missing | None = None):
        self.name, self.size, self.mode = name, size, mode
        self.seen = {}

    async def handle(self, key: str, n: int, conn: Optional[Missing], alt: Missing | None, mode: Mode):
        self.seen[key] = self.seen.get(key, 0) + n

    async def needs_missing(self, key: str, conn: Missing):
        pass

    @staticmethod
    async def static(key: str):
        pass

    @classmethod
    async def klass(cls, n: int):
        pass

    async def no_params(self):
        pass
"""


def test_string_annotations_that_get_type_hints_cannot_resolve(tmp_path: Path) -> None:
    # `Missing` exists only for type checkers: get_type_hints fails on every function here,
    # and each annotation's text is read instead
    p = _file(tmp_path, "future_srv.py", FUTURE_SOURCE)
    program = _load(p, "Server", "handle")
    assert program.args == "('key', 1, None, None, Mode.ON,)" and program.args_synthesized
    assert program.init_args == "('name', 1, Mode.ON,)" and program.init_args_synthesized
    d = program.describe()
    assert d["args"] == program.args and d["init_args"] == program.init_args
    assert d["args_synthesized"] is True and d["init_args_synthesized"] is True
    with pytest.raises(InputError, match=r"Server.needs_missing: parameter 'conn' is annotated"):
        _load(p, "Server", "needs_missing")


def test_static_and_class_methods_take_no_instance(tmp_path: Path) -> None:
    p = _file(tmp_path, "future_srv.py", FUTURE_SOURCE)
    assert _load(p, "Server", "static", 2, None, "('n', 2, Mode.OFF)").args == "('key',)"
    assert _load(p, "Server", "klass", 2, None, "('n', 2, Mode.OFF)").args == "(1,)"
    # explicit arguments are checked against the same signatures
    assert _load(p, "Server", "static", 2, "'k'", "('n', 2, Mode.OFF)").args == "'k'"
    with pytest.raises(InputError, match="does not accept these --args"):
        _load(p, "Server", "static", 2, "('k', 1)", "('n', 2, Mode.OFF)")


def test_given_arguments_are_kept_as_written_and_not_synthesized(tmp_path: Path) -> None:
    p = _file(tmp_path, "future_srv.py", FUTURE_SOURCE)
    program = _load(
        p, "Server", "handle", 2, "('k', 3, None, None, Mode.OFF)", "('n', 2, Mode.OFF)"
    )
    assert program.args == "('k', 3, None, None, Mode.OFF)" and not program.args_synthesized
    assert "args_synthesized" not in program.describe()
    assert "init_args_synthesized" not in program.describe()
    # an explicit empty --args passes no arguments: nothing is synthesized
    with pytest.raises(InputError, match="does not accept these --args"):
        _load(p, "Server", "handle", 2, "", "('n', 2, Mode.OFF)")
    # a method without required parameters needs no synthesis: args stays absent
    program = _load(p, "Server", "no_params", 2, None, "('n', 2, Mode.OFF)")
    assert program.args is None and not program.args_synthesized


def test_synthesized_arguments_reach_the_workload(tmp_path: Path) -> None:
    p = _file(tmp_path, "future_srv.py", FUTURE_SOURCE)
    program = scenario.load_workload(p, "Server", "handle", 3)
    try:
        obj, results = scenario._run_plain(program.factory())
    finally:
        program.release()
    assert obj.name == "name" and obj.size == 1 and obj.mode.name == "ON"
    assert results == [None, None, None]
    assert obj.seen == {"key": 3}  # three calls with the same key, run in stock order


# ------------------------------------------------------------------ the CLI, end to end


def test_try_it_command_synthesizes_and_finds_the_lost_update(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = cli(
        TRY_IT,
        "--cls",
        "MultiResourceServer",
        "--method",
        "handle_request",
        "--no-telemetry",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        "arguments: handle_request('client_id') x2 (synthesized from the signature; "
        "--args to choose)" in r.stdout
    ), r.stdout
    rep = json.loads(out.read_text())
    assert rep["hazard"] == "lost-update"
    assert rep["program"]["args"] == "('client_id',)"
    assert rep["program"]["args_synthesized"] is True
    sched = Path(rep["schedule_file"])
    if not sched.is_absolute():
        sched = tmp_path / sched
    program = json.loads(sched.read_text())["program"]
    assert program["args"] == "('client_id',)" and program["args_synthesized"] is True
    again = cli("replay", str(sched), cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "the failure reproduces" in again.stdout
    assert "handle_request('client_id')" in again.stdout


def test_cli_names_the_parameter_it_cannot_synthesize(tmp_path: Path) -> None:
    p = _file(tmp_path, "srv.py", FUTURE_SOURCE)
    r = cli("check", str(p), "--cls", "Server", "--method", "needs_missing", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "parameter 'conn'" in r.stderr and "give --args" in r.stderr
    assert "Traceback" not in r.stderr


MUTATES_ITS_ARGUMENTS = """\
import asyncio


class Box:
    def __init__(self, seen: list):
        self.seen = seen
        self.n = 0

    async def add(self, items: list):
        items.append(1)
        self.seen.append(1)
        await asyncio.sleep(0)
        self.n = len(items)
"""


def test_each_call_and_each_object_gets_its_own_copy_of_the_arguments(tmp_path: Path) -> None:
    # `items` (synthesized []) is each call's own, as `add([])` written twice would be, and
    # `seen` each object's: one list shared by the calls, the executions or the serial runs
    # would carry mutations from one into the next and report a race on the arguments as one
    # of the class. Every order ends with n == 1 and two entries in seen: race-free.
    p = _file(tmp_path, "box.py", MUTATES_ITS_ARGUMENTS)
    program = scenario.load_workload(p, "Box", "add")
    try:
        for _ in range(2):  # a second execution must not see the first one's appends
            obj, results = scenario._run_plain(program.factory())
            assert (obj.n, obj.seen, results) == (1, [1, 1], [None, None])
            assert program.oracle is not None and program.oracle((obj, results)) is None
    finally:
        program.release()
    out = tmp_path / "r.json"
    r = cli(
        "check",
        str(p),
        "--cls",
        "Box",
        "--method",
        "add",
        "--no-telemetry",
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(out.read_text())["complete"] is True
