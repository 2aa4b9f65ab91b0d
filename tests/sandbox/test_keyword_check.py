"""The session's keyword check decides exactly what `inspect.signature(fn).bind(**kwargs)` decides.

Tool calls are keyword-only (JSON objects), and the session refuses arguments a function cannot
take (bad_args) before calling it. It decides that from the function's code object for plain
functions, instead of inspect's Signature.bind; every combination of parameter kinds and of
passed names below must get the same verdict both ways.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import random

from astra_foundation.sandbox.inside.session import KeywordCheck, Runtime


def signatures():
    """Parameter lists of many shapes: positional-only, defaults, *, *args, keyword-only, **kw.
    Combinations Python rejects (a bare * without keyword-only parameters ...) are skipped."""
    rng = random.Random(0)
    seen = set()
    for _ in range(600):
        pos = rng.sample(["p", "q=0", "r", "s=0"], rng.randint(0, 3))
        pos.sort(key=lambda x: "=" in x)  # no default before a non-default
        slash = rng.randint(1, len(pos)) if pos and rng.random() < 0.4 else 0
        parts = pos[:slash] + ["/"] + pos[slash:] if slash else list(pos)
        star = rng.choice([None, "*", "*args"])
        if star:
            parts += [star, *rng.sample(["k", "m=0", "n"], rng.randint(0, 2))]
        if rng.random() < 0.3:
            parts.append("**kw")
        text = ", ".join(parts)
        if text in seen:
            continue
        seen.add(text)
        try:
            compile(f"def f({text}):\n    pass\n", "<sig>", "exec")
        except SyntaxError:
            continue
        yield text


def test_the_check_agrees_with_signature_bind_everywhere():
    names = ["p", "q", "r", "s", "k", "m", "n", "args", "kw", "other"]
    rt = Runtime(sock=None, codes={}, compile_errors={}, max_output=100)
    compared = deferred = 0
    for params in signatures():
        ns: dict = {}
        exec(f"def f({params}):\n    pass\n", ns)  # noqa: S102 - fixed test signatures
        fn = ns["f"]
        check = KeywordCheck.of(fn)
        assert check is not None
        sig = inspect.signature(fn)
        for n in range(3):
            for passed in itertools.combinations(names, n):
                kwargs = dict.fromkeys(passed, 1)
                try:
                    sig.bind(**kwargs)
                    expected = True
                except TypeError:
                    expected = False
                # accepts() may defer (False) where bind accepts; never the reverse. The
                # runtime's verdict, which asks bind when accepts() says no, must equal bind's.
                assert not check.accepts(kwargs) or expected, (params, kwargs)
                deferred += expected and not check.accepts(kwargs)
                assert (rt.bad_args(fn, "f", kwargs) is None) is expected, (params, kwargs)
                compared += 1
    assert compared > 5_000
    assert deferred < compared // 20  # the fast path decides nearly every call itself


def test_wrapped_and_non_function_callables_use_inspect():
    def inner(x, y=1):
        return x

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        return inner(*args, **kwargs)

    assert KeywordCheck.of(wrapper) is None  # inspect follows __wrapped__: so must the check
    assert KeywordCheck.of(functools.partial(inner, 1)) is None
    assert KeywordCheck.of(len) is None

    class Tool:
        def __call__(self, x):
            return x

    assert KeywordCheck.of(Tool()) is None
    rt = Runtime(sock=None, codes={}, compile_errors={}, max_output=100)
    assert rt.bad_args(wrapper, "wrapper", {"x": 1}) is None
    refused = rt.bad_args(wrapper, "wrapper", {"z": 1})
    assert refused["kind"] == "bad_args" and "unexpected argument(s) 'z'" in refused["msg"]
    refused = rt.bad_args(inner, "inner", {"y": 2})
    assert refused["kind"] == "bad_args" and "missing required argument(s) 'x'" in refused["msg"]
