"""The one mechanism that checks input where it enters: :func:`trgad.runtime.validate.checked`.

A public function is written once; ``f(...)`` checks the arguments its mark names, defaults
included, then runs the body; ``f.trusted(...)`` runs the body alone, for trgad's own callers.
"""
import functools
import importlib
import pkgutil

import pytest

import trgad
from trgad.runtime import validate
from trgad.runtime.validate import InputError, check_beta, check_chi, check_int, checked


def _pair(beta, chi):
    """A check of two arguments together: refuses chi > 8 at a large beta, converts beta."""
    if beta > 1.0 and chi > 8:
        raise InputError(f"chi={chi} with beta={beta} is out of range: chi must be <= 8 above beta = 1")
    return {"beta": round(beta, 3)}


@checked(_pair, beta=check_beta, chi=check_chi, steps=functools.partial(check_int, "steps", low=1))
def body(beta, chi=4, *, steps=2):
    return beta, chi, steps


def test_the_public_call_checks_converts_and_runs_the_body():
    assert body("0.30001", "16") == (0.3, 16, 2)
    assert body(2.0, 8, steps="3") == (2.0, 8, 3)


@pytest.mark.parametrize("args, kwargs, message", [
    ((400.0,), {}, "beta=400.0 is out of range: beta must be in [1e-10, 350]"),
    ((0.3, 64), {}, "chi=64 is out of range: chi must be an integer in [2, 32]"),
    ((0.3,), {"steps": 0}, "steps=0 is out of range: steps must be an integer >= 1"),
    ((2.0, 16), {}, "chi=16 with beta=2.0 is out of range"),
])
def test_bad_input_is_one_line_naming_the_value_and_its_range(args, kwargs, message):
    with pytest.raises(InputError) as e:
        body(*args, **kwargs)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_defaults_are_checked_as_given_values_are():
    @checked(chi=check_chi)
    def f(chi=1):
        return chi

    with pytest.raises(InputError, match="chi=1 is out of range"):
        f()
    assert f.trusted() == 1


def test_trusted_is_the_body_unchecked_and_what_the_public_call_runs(monkeypatch):
    assert body.trusted(400.0, 64, steps=0) == (400.0, 64, 0)
    assert body.__wrapped__ is body.trusted and body.__name__ == "body"
    monkeypatch.setattr(body, "trusted", lambda *a, **k: ("patched", a, k))
    assert body(0.3) == ("patched", (0.3, 4), {"steps": 2})


def test_a_mark_naming_no_argument_is_refused_at_import():
    with pytest.raises(TypeError, match="no argument chi"):
        checked(chi=check_chi)(lambda beta: beta)


def _marked():
    for m in pkgutil.walk_packages(trgad.__path__, "trgad."):
        if not m.name.endswith("__main__"):
            module = importlib.import_module(m.name)
            for name, value in vars(module).items():
                if hasattr(value, "trusted") and value.__module__ == m.name:
                    yield f"{m.name}.{name}", value


def test_every_check_a_mark_holds_is_one_the_check_once_test_counts():
    """tests/test_check_once.py counts a check of validate held by a mark (or bound by
    functools.partial), and every check a function of another trgad module calls through its
    module; a check of validate wrapped some other way would go uncounted."""
    checks = {n: f for n, f in vars(validate).items() if n.startswith("check_") and callable(f)}
    marked = dict(_marked())
    assert len(marked) >= 40, sorted(marked)
    uncounted = []
    for name, f in marked.items():
        for arg, check in f.checks.items():
            inner = check.func if isinstance(check, functools.partial) else check
            if inner in checks.values() or (getattr(inner, "__module__", "").startswith("trgad.")
                                            and inner.__module__ != validate.__name__):
                continue
            uncounted.append(f"{name}: {arg}")
    assert not uncounted, uncounted
