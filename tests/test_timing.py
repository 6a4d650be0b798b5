"""Timing helpers: caps stop sweeps, hard timeouts kill and report."""
import time

import pytest

from trgad import InputError
from trgad.runtime import timing


def test_time_call_counts_repeats():
    calls = []
    t = timing.time_call(lambda: calls.append(1) or len(calls), warmup=2, repeats=3)
    assert len(calls) == 5 and len(t.times) == 3 and t.value == 5
    assert t.min <= t.median


def test_capped_sweep_stops_after_first_measurement_over_cap():
    seen = []

    def measure(n):
        seen.append(n)
        return {"n": n, "seconds": 0.01 * 2 ** n}

    sweep = timing.capped_sweep(measure, range(1, 30), cap_seconds=0.1)
    assert seen == [1, 2, 3, 4]           # 0.16 s at n = 4 passes the cap
    assert sweep.stopped_at == 4 and not sweep.completed
    full = timing.capped_sweep(measure, range(1, 3), cap_seconds=10)
    assert full.completed and len(full.rows) == 2


def test_run_with_timeout_returns_value():
    res = timing.run_with_timeout("trgad.physics.exact:torus_exact", {"beta": 0.3, "steps": 1}, timeout=60)
    assert res.returned and res.value["sites"] == 2
    assert "returned" in res.message


def test_run_with_timeout_kills_and_reports():
    t0 = time.perf_counter()
    res = timing.run_with_timeout("time:sleep", args=[30], timeout=2)
    elapsed = time.perf_counter() - t0
    assert not res.returned and res.value is None
    assert elapsed < 10
    assert res.message == "did not return within 2 s (killed)"


def test_run_with_timeout_reports_failure():
    res = timing.run_with_timeout("math:sqrt", args=[-1.0], timeout=60)
    assert not res.returned and res.error == "ValueError: math domain error"
    assert res.input_error is None and res.message == "failed: ValueError: math domain error"


def test_bad_caps():
    with pytest.raises(InputError, match="cap_seconds"):
        timing.capped_sweep(lambda n: {"seconds": 0}, [1], cap_seconds=0)
    with pytest.raises(InputError, match="repeats"):
        timing.time_call(lambda: 1, repeats=0)


def test_run_with_timeout_passes_input_errors_back():
    # an InputError in the child is bad input, not a crash: its one-line message comes back
    res = timing.run_with_timeout("trgad.keyed.chain:run", {"depth": 0, "fanout": 2}, timeout=60)
    assert not res.returned and res.error is None
    assert res.input_error == "depth=0 is out of range: depth must be an integer in [1, 100000]"
    assert res.message.startswith("bad input: depth=0")


def test_run_with_timeout_refuses_non_finite_results():
    # JSON has no NaN: the child fails rather than pass one on
    res = timing.run_with_timeout("builtins:float", args=["nan"], timeout=60)
    assert not res.returned and "not JSON compliant" in res.error
    assert timing.run_with_timeout("builtins:float", args=["2.5"], timeout=60).value == 2.5


@pytest.mark.parametrize("mode", ["reverse", "forward_mode", "forward"])   # "forward": deprecated alias
def test_time_grad_transform_traces_afresh_at_every_repeat(mode):
    # JAX caches the jaxpr of a function it has traced: timing make_jaxpr of one function
    # object three times measured the cache twice.  Every repeat must run the user's code.
    calls = []

    def f(x):
        calls.append(1)
        return x * x

    timing.time_grad_transform(f, 2.0, repeats=3, mode=mode)
    assert len(calls) == 3


def test_time_grad_transform_returns_the_jaxpr_of_the_gradient():
    import jax

    seconds, jaxpr = timing.time_grad_transform(lambda x: x * x * x, 2.0, repeats=2,
                                                clock=time.process_time)
    assert seconds >= 0
    assert jax.core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, 2.0)[0] == 12.0   # d x**3 = 3 x**2
    assert timing.count_eqns(jaxpr) == len(jaxpr.jaxpr.eqns)                 # nothing nested
    with pytest.raises(InputError, match="repeats"):
        timing.time_grad_transform(lambda x: x, 1.0, repeats=0)


def _hand_built(x):
    import jax
    import jax.numpy as jnp
    from jax import lax

    y = jax.jit(lambda v: v * 2.0 + 1.0)(x)                   # jit: 1 here, mul + add inside
    z = lax.cond(x > 0, lambda a: a * 3.0, lambda a: a - 1.0, y)  # gt, convert, cond: 1 + 1 per branch
    c, _ = lax.scan(lambda carry, _: (carry * 1.5, None), z, None, length=3)  # scan: mul inside
    return jnp.sin(c)


def test_count_eqns_counts_nested_jaxprs():
    import jax

    closed = jax.make_jaxpr(_hand_built)(0.5)
    # top level: jit, gt, convert_element_type, cond, scan, sin
    assert timing.count_eqns(closed, nested=False) == 6 == len(closed.jaxpr.eqns)
    # nested: jit body 2 (mul, add), cond branches 1 + 1, scan body 1
    assert timing.count_eqns(closed) == 6 + 2 + 2 + 1
    assert timing.count_eqns(closed.jaxpr) == timing.count_eqns(closed)


def test_count_eqns_without_nesting_is_the_top_level_length():
    import jax
    import jax.numpy as jnp

    closed = jax.make_jaxpr(lambda x: jnp.exp(x) * x + 1.0)(0.3)
    assert timing.count_eqns(closed) == timing.count_eqns(closed, nested=False) == 3


def test_ties_and_leads_follow_one_rule():
    from trgad.runtime.timing import TIE_RTOL, faster, tie
    assert tie(1.0, 1.0 + TIE_RTOL) and tie(1.0 + TIE_RTOL, 1.0)
    assert not tie(1.0, 1.0 + 2 * TIE_RTOL) and faster(1.0, 1.0 + 2 * TIE_RTOL)
    assert not faster(1.0, 1.01) and not faster(1.2, 1.0)
    assert faster(1.0, 2.0) != faster(2.0, 1.0)
    with pytest.raises(InputError):
        tie(0.0, 1.0)
