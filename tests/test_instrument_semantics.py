"""Instrumented code must behave exactly like the original.

Each case is a module source defining ``run()`` (sync or async).  It runs three ways: compiled
plainly, instrumented with no explorer attached, and instrumented with an explorer attached and
a step open (every hook records).  Results (value or exception type, message and the line of
the user's frame where it was raised) must be identical.
"""

from __future__ import annotations

import asyncio
import textwrap
import traceback
from typing import Any

import pytest
from conftest import exec_source, run_in_step


def _exec(source: str, filename: str, instrumented: bool) -> dict[str, Any]:
    return exec_source(source, filename, instrumented, "case_mod")


def _outcome(ns: dict[str, Any], filename: str) -> tuple[Any, ...]:
    try:
        r = ns["run"]()
        if asyncio.iscoroutine(r):
            r = asyncio.run(r)
        return ("ok", repr(r))
    except Exception as exc:  # noqa: BLE001
        lines = [
            f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename
        ]
        cols = [
            (f.colno, f.end_colno)
            for f in traceback.extract_tb(exc.__traceback__)
            if f.filename == filename
        ]
        return ("raised", type(exc).__name__, str(exc), lines, cols)


def _recording(fn: Any) -> Any:
    return run_in_step(fn)[0]


def check(source: str, name: str) -> tuple[Any, ...]:
    source = textwrap.dedent(source)
    filename = f"<case {name}>"
    want = _outcome(_exec(source, filename, False), filename)
    got = _outcome(_exec(source, filename, True), filename)
    assert got == want, f"no explorer: {got} != {want}"
    got_rec = _recording(lambda: _outcome(_exec(source, filename, True), filename))
    assert got_rec == want, f"recording: {got_rec} != {want}"
    return want


CASES: dict[str, str] = {
    "property_and_descriptor": """
        class D:
            def __get__(self, obj, typ=None):
                return ('desc', obj is not None)
            def __set__(self, obj, v):
                obj.log.append(('set', v))
        class C:
            d = D()
            def __init__(self):
                self.log = []
                self._p = 1
            @property
            def p(self):
                self.log.append('get p')
                return self._p
            @p.setter
            def p(self, v):
                self.log.append(('set p', v))
                self._p = v
        def run():
            c = C()
            c.p += 5
            c.d = 3
            return c.p, c.d, C.d, c.log
    """,
    "getattr_setattr_getattribute": """
        class Proxy:
            def __init__(self):
                object.__setattr__(self, 'store', {})
                object.__setattr__(self, 'trace', [])
            def __getattr__(self, n):
                self.trace.append(('miss', n))
                if n.startswith('x'):
                    return self.store.get(n, 0)
                raise AttributeError(n)
            def __setattr__(self, n, v):
                self.trace.append(('set', n))
                self.store[n] = v
            def __delattr__(self, n):
                self.trace.append(('del', n))
                del self.store[n]
        class Counting:
            def __init__(self):
                self.n = 0
            def __getattribute__(self, n):
                if n != 'n':
                    object.__setattr__(self, 'n', object.__getattribute__(self, 'n') + 1)
                return object.__getattribute__(self, n)
            def m(self):
                return 1
        def run():
            p = Proxy()
            p.x1 = 4
            p.x1 += 1
            p.x2 += 3
            del p.x1
            c = Counting()
            c.m(); c.m()
            try:
                p.y
            except AttributeError as e:
                err = str(e)
            return p.store, p.trace, c.n, err
    """,
    "slots": """
        class S:
            __slots__ = ('a', 'b')
        def run():
            s = S()
            s.a = 1
            try:
                s.c = 2
            except AttributeError as e:
                m = type(e).__name__
            try:
                s.b
            except AttributeError as e:
                m2 = str(e)
            return s.a, m, m2
    """,
    "chained_targets": """
        class O: pass
        def run():
            a = O(); a.b = {'c': O()}
            a.b['c'].d = 5
            a.b['c'].d *= 3
            a.b['e'] = [0, 1, 2]
            a.b['e'][1:2] = [7, 8]
            del a.b['e'][0]
            x = y = a.b['c'].z = 9
            (a.p, [a.q, *a.r]), a.s = (1, [2, 3, 4]), 5
            return a.b['c'].d, a.b['e'], x, y, a.b['c'].z, a.p, a.q, a.r, a.s
    """,
    "augassign_evaluates_once": """
        log = []
        class D(dict):
            def __getitem__(self, k):
                log.append(('get', k)); return super().__getitem__(k)
            def __setitem__(self, k, v):
                log.append(('set', k, v)); super().__setitem__(k, v)
        d = D(k=1)
        def getd():
            log.append('d'); return d
        def key():
            log.append('k'); return 'k'
        def val():
            log.append('v'); return 10
        class H:
            def __init__(self): self.v = [1]
        def geth(h):
            log.append('h'); return h
        def run():
            getd()[key()] += val()
            h = H()
            geth(h).v += [2]
            lst = [1, 2]
            alias = lst
            lst += [3]
            return dict(d), log, h.v, alias is lst, alias
    """,
    "evaluation_order_of_stores": """
        log = []
        class O:
            def __setattr__(self, n, v):
                log.append(('set', n, v)); object.__setattr__(self, n, v)
        def o():
            log.append('target'); return obj
        def v():
            log.append('value'); return 1
        obj = O()
        def run():
            o().a = v()
            o().b, o().c = v(), 2
            return log
    """,
    "walrus_and_comprehensions": """
        data = {'a': 1, 'b': 2}
        def run():
            total = 0
            out = [y for x in data if (y := data[x] * 2) > 2]
            sq = {k: v * v for k, v in data.items()}
            g = list(v for v in data.values())
            s = {x for x in data}
            if (n := len(data)) > 1:
                total += n
            return out, sq, g, sorted(s), total, y
    """,
    "closures_nonlocal_lambdas": """
        def make():
            count = 0
            items = []
            def inc(k=1):
                nonlocal count
                count += k
                items.append(count)
                return count
            get = lambda: count
            return inc, get, items
        def run():
            inc, get, items = make()
            inc(); inc(5)
            fs = [lambda: i for i in range(3)]
            return get(), items, [f() for f in fs]
    """,
    "unbound_cell_error": """
        def run():
            def inner():
                return x
            try:
                inner()
            except NameError as e:
                msg = str(e)
            x = 1
            return msg, inner()
    """,
    "globals": """
        counter = 0
        table = {}
        def bump():
            global counter
            counter += 1
            counter = counter * 2
            table[counter] = True
            return counter
        def run():
            global late
            bump(); bump()
            late = 5
            del late
            try:
                late
            except NameError as e:
                m = str(e)
            return counter, table, m
    """,
    "generators_nested_async": """
        import asyncio
        def gen(n):
            for i in range(n):
                yield i
            return 'done'
        def outer():
            r = yield from gen(3)
            yield r
        async def agen(n):
            for i in range(n):
                await asyncio.sleep(0)
                yield i
        class CM:
            def __init__(self): self.log = []
            async def __aenter__(self):
                self.log.append('in'); return self
            async def __aexit__(self, *a):
                self.log.append('out'); return False
        async def run():
            cm = CM()
            async with cm as c:
                c.log.append('body')
            out = [x async for x in agen(3)]
            async for x in agen(2):
                out.append(x * 10)
            return list(outer()), out, cm.log
    """,
    "try_finally_and_exceptions": """
        class O: pass
        def f(o):
            try:
                o.state = 'try'
                return o.missing
            except AttributeError:
                o.state += '+except'
                raise
            finally:
                o.state += '+finally'
        def run():
            o = O()
            try:
                f(o)
            except AttributeError as e:
                return o.state, str(e)
    """,
    "traceback_lines": """
        class O:
            pass
        def run():
            o = O()
            o.a = {}
            x = 1
            return o.a['missing'] + x
    """,
    "traceback_attr": """
        def run():
            d = None
            return d.attr
    """,
    "star_args_and_targets": """
        class O:
            def __init__(self): self.xs = [1, 2, 3]; self.kw = {'sep': '-'}
            def f(self, *a, **k): return a, k
        def run():
            o = O()
            first, *o.rest = o.xs
            a, *b = o.xs
            return o.f(*o.xs, **o.kw), first, o.rest, b, [*o.xs, *b], {**o.kw}
    """,
    "decorators_and_class_scope": """
        import functools
        REG = []
        def register(cls):
            REG.append(cls.__name__); return cls
        def deco(f):
            @functools.wraps(f)
            def w(*a): return ('wrapped', f(*a))
            return w
        @register
        class K:
            base = 10
            doubled = base * 2
            names = [n for n in ('a', 'b')]
            table = {'x': base}
            @deco
            def m(self): return self.doubled + self.table['x']
            @staticmethod
            def s(): return K.base
            @classmethod
            def c(cls): return cls.base + 1
        def run():
            return K().m(), K.s(), K.c(), REG, K.names, K.m.__name__
    """,
    "zero_arg_super": """
        class A:
            def hello(self): return 'A'
            def __init__(self): self.items = []
        class B(A):
            def __init__(self):
                super().__init__()
                self.items.append('B')
            def hello(self):
                return 'B' + super().hello() + str(__class__.__name__)
            def nested(self):
                return [super().hello() for _ in range(2)]
        class DD(dict):
            def __setitem__(self, k, v):
                super().__setitem__(k, v * 2)
        def run():
            b = B()
            d = DD(); d['a'] = 2
            return b.hello(), b.items, b.nested(), d
    """,
    "fstrings_and_format": """
        class O:
            def __init__(self): self.v = {'k': 3.14159}; self.w = 7
        def run():
            o = O()
            return f"{o.v['k']:.2f}|{o.w!r:>4}|{o.v}|{'x' in o.v}|{len(o.v)}"
    """,
    "match_statement": """
        import enum
        class Color(enum.Enum):
            RED = 1
            BLUE = 2
        class P:
            __match_args__ = ('x', 'y')
            def __init__(self, x, y): self.x = x; self.y = y
        def classify(v):
            match v:
                case Color.RED:
                    return 'red'
                case P(x=0, y=yy) if yy > v.x:
                    return f'on y {yy}'
                case {'k': [a, *rest]}:
                    return ('map', a, rest)
                case [1, *others]:
                    return ('seq', others)
                case _:
                    return 'other'
        def run():
            return [classify(x) for x in (Color.RED, P(0, 5), {'k': [1, 2, 3]}, [1, 9], 3)]
    """,
    "private_name_mangling": """
        class A:
            def __init__(self):
                self.__secret = 1
                self.__dict__['_A__other'] = 2
            def get(self):
                __local = self.__secret + self.__other
                def inner():
                    return __local + self.__secret
                return inner()
        def run():
            a = A()
            return a.get(), a._A__secret, sorted(vars(a))
    """,
    "dict_methods_and_contains": """
        class M(dict):
            def __missing__(self, k): return 'missing:' + k
        def run():
            d = {'a': 1}
            v = d.get('a'), d.get('b', 2), d.setdefault('c', 3), d.pop('a'), d.pop('z', None)
            m = M()
            s = {1, 2}
            t = 'a' in d, 'c' in d, 'q' not in d, 1 in s, 3 not in s, 'b' in 'abc'
            lst = [3, 1]
            lst.sort(); lst.append(2); lst.reverse()
            return v, d, m['x'], t, lst, len(lst), sorted(d), list(d.items())
    """,
    "iterators_consumed": """
        def run():
            it = iter([1, 2, 3])
            first = next(it)
            rest = list(it)
            gen = (x * 2 for x in range(3))
            total = sum(gen)
            again = sum(gen)
            z = list(zip([1, 2], 'ab'))
            return first, rest, total, again, z, list(enumerate('xy')), max([3, 9]), min(4, 2)
    """,
    "with_targets": """
        import contextlib
        class O: pass
        @contextlib.contextmanager
        def cm(v, log):
            log.append(('enter', v)); yield v; log.append(('exit', v))
        def run():
            o = O(); log = []
            with cm(1, log) as o.a, cm(o.a + 1, log) as o.b:
                log.append(('body', o.a, o.b))
            for o.i in range(2):
                log.append(o.i)
            return log
    """,
    "del_forms": """
        class O: pass
        g = 1
        def run():
            global g
            o = O(); o.a = 1; o.b = 2
            d = {'x': 1, 'y': 2, 'z': 3}
            lst = list(range(6))
            del o.a, d['x'], lst[1:3]
            del g
            return vars(o), d, lst, 'g' in globals()
    """,
    "annotations_untouched": """
        from __future__ import annotations
        import typing
        class O:
            x: typing.Optional[int] = None
            def f(self, a: typing.List[int]) -> typing.Dict[str, int]:
                self.y: int = 3
                return {}
        def run():
            o = O(); o.f([])
            return O.f.__annotations__, O.__annotations__, o.y
    """,
    "slicing_and_tuples": """
        def run():
            lst = list(range(10))
            m = {(1, 2): 'a'}
            lst[::3] = ['x'] * 4
            lst[1:3] += ['y']
            return lst[2:8:2], lst[-1], m[1, 2], m[(1, 2)]
    """,
    "async_tasks_and_queue": """
        import asyncio
        class Server:
            def __init__(self):
                self.sessions = {}
                self.q = asyncio.Queue()
                self.lock = asyncio.Lock()
            async def handle(self, cid):
                async with self.lock:
                    cur = self.sessions.get(cid, 0)
                    await asyncio.sleep(0)
                    self.sessions[cid] = cur + 1
                await self.q.put(cid)
        async def run():
            s = Server()
            await asyncio.gather(*(s.handle('a') for _ in range(3)))
            got = [s.q.get_nowait() for _ in range(s.q.qsize())]
            return s.sessions, got
    """,
    "class_in_function_free_var": """
        def make(n):
            total = [0]
            class C:
                k = n
                def add(self, v):
                    nonlocal n
                    n += v
                    total[0] += n
                    return n, total, self.k
            return C
        def run():
            C = make(3)
            c = C()
            return c.add(2), c.add(5)
    """,
    "module_getattr_and_walrus_cell": """
        import types
        m = types.ModuleType('mm')
        m.__getattr__ = lambda name: 'dyn:' + name
        def run():
            x = 0
            def g():
                nonlocal x
                if (x := x + 5) > 3:
                    return x
            return m.anything, g(), x
    """,
    "generator_closure_escapes": """
        def counter():
            n = 0
            def step():
                nonlocal n
                n += 1
                return n
            gen = (n + i for i in range(3))
            step()
            return list(gen), step()
        def run():
            return counter()
    """,
    "dataclass_fields": """
        import dataclasses
        @dataclasses.dataclass
        class P:
            x: int = 0
            tags: list = dataclasses.field(default_factory=list)
            def bump(self):
                self.x += 1
                self.tags.append(self.x)
                return self
        def run():
            p = P().bump().bump()
            return p, dataclasses.asdict(p), P.__dataclass_fields__['x'].default
    """,
    # calls routed through the call hook (arguments handed to other code) and the
    # frame-dependent builtins that must stay plain
    "frame_dependent_calls": """
        import sys
        class A:
            def m(self, x):
                return ('A', x)
        class B(A):
            def m(self, x):
                return ('B',) + super().m(x + 1)
        def run():
            z = 20
            src = 'z * 2'
            ev = eval  # an alias is routed through the hook: it must still see this frame
            ns = {}
            exec('w = z + 1', globals(), ns)
            depth = 0
            return (B().m(z), eval(src), ev(src), sorted(locals()), 'src' in vars(),
                    'run' in globals(), sorted(dir())[:3], ns,
                    __import__('math').floor(z / 3), sys._getframe(depth).f_code.co_name,
                    eval(compile(src, '<c>', 'eval')))
    """,
    # ---- issue 9: constructs whose implicit accesses are now recorded
    "loops_through_iteration_proxies": """
        def gen():
            got = yield 1
            yield ('sent', got)
            yield 3
        def run():
            out = []
            xs = [1, 2, 3]
            for x in xs:
                if x == 1:
                    xs.append(4)
                out.append(x)
            for i, (a, b) in enumerate(zip('ab', [[1], [2]])):
                out.append((i, a, b))
            for k, v in {'a': 1}.items():
                out.append((k, v))
            g = iter(gen())
            out.append(next(g))
            out.append(g.send('hi'))
            out.append(iter(g) is g)
            for x in g:
                out.append(x)
            it = iter([1, 2, 3])
            for x in it:
                break
            out.append(list(it))
            out.append([c for c in 'abc' if c != 'b'])
            out.append(list(map(str, range(3))), )
            out.append(list(filter(None, [0, 1, 2])))
            out.append(list(iter([5, 6].pop, 5)))
            out.append(list(reversed(xs)))
            out.append(sum(x for x in xs if x))
            out.append(type(iter(xs)).__name__ != '')
            out.append(enumerate(xs).__length_hint__() if hasattr(enumerate(xs), '__length_hint__') else None)
            out.append([x * y for x in range(3) for y in xs])
            out.append({k: v for k, v in zip('ab', xs)})
            try:
                d = {1: 1}
                for k in d.keys():
                    d[k + 1] = 0
            except RuntimeError as e:
                out.append(str(e))
            try:
                for x in 5:
                    pass
            except TypeError as e:
                out.append(str(e))
            return out
    """,
    "async_for_proxies": """
        import asyncio
        async def agen(n):
            for i in range(n):
                await asyncio.sleep(0)
                yield i
        class AIt:
            def __init__(self):
                self.i = 0
            def __aiter__(self):
                return self
            async def __anext__(self):
                self.i += 1
                if self.i > 2:
                    raise StopAsyncIteration
                return self.i
        class NoANext:
            def __aiter__(self):
                return 1
        async def run():
            out = []
            async for x in agen(3):
                out.append(x)
            out.append([x async for x in agen(2)])
            async for x in AIt():
                out.append(x)
            g = agen(3)
            async for x in g:
                break
            out.append(await g.__anext__())
            try:
                async for x in 5:
                    pass
            except TypeError as e:
                out.append(str(e))
            try:
                async for x in NoANext():
                    pass
            except TypeError as e:
                out.append(str(e))
            return out
    """,
    "truth_tests_and_operators": """
        import dataclasses
        class B:
            def __init__(self, v):
                self.v = v
            def __bool__(self):
                return self.v
        class BadLen:
            def __len__(self):
                return -1
        class Weird:
            def __eq__(self, o):
                return 'eq!'
            def __lt__(self, o):
                return NotImplemented
            def __add__(self, o):
                return ('add', o)
            def __radd__(self, o):
                return ('radd', o)
            def __iadd__(self, o):
                return ('iadd', o)
        @dataclasses.dataclass(order=True)
        class P:
            x: int
            tags: list = dataclasses.field(default_factory=list)
        def run():
            out = []
            out.append([1 if B(True) else 0, not B(False), B(True) and 5, B(False) or 6])
            try:
                if BadLen():
                    pass
            except ValueError as e:
                out.append(str(e))
            w = Weird()
            out.append((w == 1, w != 1, 1 + w, w + 1, [1] + [2], {1} | {2}, {'a': 1} | {'b': 2}))
            try:
                w < 1
            except TypeError as e:
                out.append(str(e))
            w += 3
            out.append(w)
            t = (1,)
            t += (2,)
            lst = [1]
            alias = lst
            lst += [2]
            s = {1, 2}
            s -= {1}
            d = {'a': 1}
            d |= {'b': 2}
            n = 5
            n //= 2
            out.append((t, alias, s, d, n, alias is lst))
            out.append((P(1) == P(1), P(1) < P(2), 1 < 2 < 3, 3 > 2 > 5, [] < [1] < [2], P(1) in [P(1)]))
            out.append(('%s-%d' % ('a', 3), '%(k)s' % {'k': 1}, f'{P(2)!r:>30}', f'{3.14159:.2f}', str(P(3)), repr([P(4)])))
            try:
                '%d' % 'x'
            except TypeError as e:
                out.append(str(e))
            try:
                [] + ()
            except TypeError as e:
                out.append(str(e))
            try:
                assert [], 'empty'
            except AssertionError as e:
                out.append(str(e))
            i = 0
            while [0] * (2 - i):
                i += 1
            out.append(i)
            out.append(2 ** 10 + 3 * 4 - 7 // 2 % 3 @ 1 if False else 2 ** 10)
            return out
    """,
    "unpacking_and_displays": """
        def f(*a, **k):
            return a, k
        def run():
            out = []
            xs = [1, 2, 3]
            a, *b = xs
            (c, d), e = [[4, 5], 6]
            out.append((a, b, c, d, e, f(*xs, **{'k': 1}), [*xs, *'ab'], {*xs}, {**{'a': 1}, 'b': 2}))
            out.append({(1, 2): 'x', 'y': [1]})
            try:
                p, q = 1
            except TypeError as e:
                out.append(str(e))
            try:
                p, q = [1, 2, 3]
            except ValueError as e:
                out.append(str(e))
            for bad in (lambda: f(*5), lambda: f(**[1]), lambda: f(a=1, **{'a': 2}),
                        lambda: f(1, *xs, 2, *(x for x in xs), k=xs, **{'j': xs})):
                try:
                    out.append(bad())
                except TypeError as e:
                    out.append(str(e))
            try:
                {[1]: 2}
            except TypeError as e:
                out.append(str(e))
            try:
                {[1]}
            except TypeError as e:
                out.append(str(e))
            return out
    """,
    "callees_and_dynamic_attributes": """
        import functools, heapq, operator
        class Base:
            kind = 'base'
            def hello(self):
                return 'base hello'
        class Other(Base):
            kind = 'other'
        class C(Base):
            used = 0
            def __init__(self):
                self.items = []
                self.on_job = self.items.append
            def hello(self):
                return 'c ' + super().hello()
        def run():
            out = []
            c = C()
            mark = c.items.append
            mark(1)
            c.on_job(2)
            push = functools.partial(heapq.heappush, c.items)
            push(0)
            getattr(c.items, 'append')(*[3])
            operator.methodcaller('append', 4)(c.items)
            list(map(c.items.append, [5, 6]))
            out.append(list(c.items))
            C.used += 1
            out.append((c.used, C.used))
            setattr(c, 'x', 1)
            vars(c)['y'] = 2
            c.__dict__['z'] = 3
            out.append((c.x, c.y, c.z, hasattr(c, 'w'), c.hello()))
            c.__class__ = Other
            out.append((c.kind, c.hello()))
            delattr(c, 'x')
            out.append(sorted(k for k in vars(c) if len(k) == 1))
            out.append(eval('1 + 1'))
            ns = {}
            exec('q = 5', ns)
            out.append(ns['q'])
            g = globals()
            out.append('run' in g)
            out.append(sorted(locals())[:2])
            return out
    """,
    "match_subject": """
        import dataclasses
        @dataclasses.dataclass
        class Pt:
            x: int
            y: int
        def run():
            out = []
            for subj in [Pt(0, 1), [1, 2], {'k': 3}, 5, 'z']:
                match subj:
                    case Pt(x=0, y=y) if y:
                        out.append(('pt', y))
                    case [a, b]:
                        out.append(('seq', a, b))
                    case {'k': v}:
                        out.append(('map', v))
                    case int() as n if not n % 5:
                        out.append(('int', n))
                    case _:
                        out.append('other')
            return out
    """,
    "calls_of_uninstrumented_code": """
        import bisect, copy, functools, heapq, json, math, operator, random
        class S:
            def __init__(self):
                self.items = [3, 1, 2]
                self.q = []
                self.d = {'b': 1}
                self.names = ['x', 'y']
        def helper(lst, k=1):
            return [v * k for v in lst]
        def run():
            s = S()
            heapq.heappush(s.q, len(s.items))
            heapq.heappush(s.q, s.items[1])
            bisect.insort(s.items, 5)
            operator.setitem(s.d, 'a', s.items[0])
            rng = random.Random(4)
            lst = list(range(6))
            rng.shuffle(lst)
            c = copy.copy(s.d)
            return (s.q, s.items, json.dumps(s.d, sort_keys=True), ', '.join(s.names), lst, c,
                    math.fsum(s.items), functools.reduce(operator.add, s.items),
                    helper(s.items, k=s.q[0]), max(*s.items), dict(s.d, z=s.q[-1]),
                    sorted(s.items, key=lambda v: -v, reverse=True), print(end=''),
                    isinstance(s.items, list), getattr(s, 'missing', s.q))
    """,
    "call_errors_keep_their_message": """
        import math
        def run():
            x = 5
            try:
                x(x)
            except TypeError as e:
                first = str(e)
            try:
                math.sqrt(x, x)
            except TypeError as e:
                second = str(e)
            f = lambda a: a['k']
            return first, second, f({x: 1})
    """,
    "recursion_depth_unchanged": """
        def down(n, acc):
            if n == 0:
                return len(acc)
            acc.append(n)
            return down(n - 1, acc)
        def run():
            return down(400, [])
    """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_instrumented_matches_original(name: str) -> None:
    check(CASES[name], name)


def test_traceback_points_at_original_line() -> None:
    outcome = check(CASES["traceback_lines"], "traceback_lines")
    assert outcome[0] == "raised" and outcome[1] == "KeyError"
    # line 8 of the case (its source starts with a newline): `return o.a["missing"] + x`
    assert outcome[3][-1] == 8
