"""Every mode of differentiation (trgad.physics.modes): u against the staged gradient, c between the
methods, against exact enumeration of the 16-site torus and against Onsager; the
checkpointed scan; bad input."""
import math

import jax
import pytest

from trgad import InputError
from trgad.runtime import compiled
from trgad.physics import modes, staged, trg
from trgad.topics import nesting
from trgad.physics import exact

BETA = 0.3


@pytest.fixture(scope="module")
def staged_u20(staged20):
    return -staged20[1]


@pytest.fixture(scope="module")
def second20(schedule20):
    """Order 2 (lnZ/N, u and c) by every method at 20 steps, chi = 16."""
    return {m: modes.value_and_derivatives(BETA, schedule20, m, order=2) for m in modes.METHODS}


@pytest.mark.slow
@pytest.mark.parametrize("method", modes.METHODS)
def test_u_of_every_method_equals_staged_at_20_steps(method, second20, staged_u20):
    r = second20[method]
    assert r["method"] == method and r["order"] == 2 and r["c_method"] == "exact"
    assert abs(r["u"] - staged_u20) < 1e-11


@pytest.mark.slow
def test_c_of_the_methods_agree_and_sit_near_onsager(second20):
    cs = {m: r["c"] for m, r in second20.items()}
    ref = cs["staged"]
    for m, c in cs.items():
        assert abs(c - ref) <= 1e-9 * abs(ref), (m, c, ref)
    # chi = 16 truncation: u is 6e-6 off Onsager at beta = 0.3, c about 1e-4
    assert abs(ref - exact.onsager(BETA)["c"]) < 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("method", ["checkpoint", "forward_mode"])
def test_first_order_u_equals_staged_at_20_steps(method, schedule20, staged_u20):
    # checkpoint: the norm saved by the checkpoint policy keeps the recomputed SVD's basis
    # (without it u was 8e-7 off here)
    r = modes.value_and_derivatives(BETA, schedule20, method, order=1)
    assert r["c"] is None and r["c_method"] is None
    assert abs(r["u"] - staged_u20) < 1e-11


# the quick tier keeps the staged method (the other methods: slow tier)
@pytest.mark.parametrize("method", [m if m == "staged" else pytest.param(m, marks=pytest.mark.slow)
                                    for m in modes.METHODS])
def test_c_against_exact_enumeration_at_4_steps(method):
    ex = exact.torus_exact(BETA, 4)
    r = modes.value_and_derivatives(BETA, trg.truncation_schedule(16, 4, BETA), method, order=2)
    assert abs(r["c"] - BETA**2 * ex["d2lnz"]) < 1e-12
    assert abs(r["u"] + ex["dlnz"]) < 1e-12
    assert abs(r["lnz_per_site"] - ex["lnz_per_site"]) < 1e-12


def test_staged_fd_is_still_available():
    sched = trg.truncation_schedule(16, 3, BETA)
    fd = modes.value_and_derivatives(BETA, sched, "staged", order=2, c_method="fd")
    exact_c = modes.value_and_derivatives(BETA, sched, "staged", order=2)
    assert fd["c_method"] == "fd" and exact_c["c_method"] == "exact"
    c_ex = BETA**2 * exact.torus_exact(BETA, 3)["d2lnz"]
    assert abs(exact_c["c"] - c_ex) < 1e-12
    assert abs(fd["c"] - c_ex) < 1e-6 and fd["c"] != exact_c["c"]


def test_compile_seconds_only_on_the_first_call(fresh_programs):
    sched = (2, 4)
    first = modes.value_and_derivatives(BETA, sched, "forward_mode")
    again = modes.value_and_derivatives(BETA, sched, "forward_mode")
    assert first["compile_seconds"] > 0 and again["compile_seconds"] == 0.0
    assert modes.value_and_derivatives(BETA, sched, "staged")["compile_seconds"] is None


@pytest.mark.parametrize("schedule,start", [
    ([2, 4, 4, 16, 16, 16], 4),    # chi = 16: the fifth step is the first D = k = 16
    ([2, 4, 4, 16], 4),            # no repeated step: nothing to scan
    ([2, 2, 2], 0),                # chi = 2: every step has D = k = 2
    ([2, 4, 4, 8, 8], 4),
    ([2, 4, 4, 8, 8, 5], 6),       # the last k differs from its input D
])
def test_scan_start(schedule, start):
    assert modes.scan_start(schedule) == start


# the quick tier: the checkpointed scan at chi = 4 (repeated (4, 4) steps); the slow tier
# every variant at chi = 4 and chi = 16 (repeated (16, 16) steps)
@pytest.mark.parametrize("chi", [4, pytest.param(16, marks=pytest.mark.slow)])
@pytest.mark.parametrize("checkpoint,ops", [
    pytest.param(True, trg.JAX, id="checkpoint-jax"),
    pytest.param(False, trg.JAX, id="plain-jax", marks=pytest.mark.slow),
    pytest.param(True, trg.JAX_REVERSE, id="checkpoint-jax-reverse", marks=pytest.mark.slow),
    pytest.param(False, trg.JAX_REVERSE, id="plain-jax-reverse", marks=pytest.mark.slow),
])
def test_scan_has_the_unrolled_value_and_gradient(checkpoint, ops, chi):
    sched = trg.truncation_schedule(chi, 7, BETA)
    assert modes.scan_start(sched) < len(sched) - 1          # at least two steps scanned
    f = lambda b: trg.lnz_per_site(b, sched)                             # noqa: E731
    g = lambda b: modes.lnz_scanned(b, sched, ops, checkpoint=checkpoint)  # noqa: E731
    assert abs(float(g(BETA)) - float(f(BETA))) < 1e-14
    assert abs(float(jax.grad(g)(BETA)) - float(jax.grad(f)(BETA))) < 1e-12


def test_taylor_mode_does_not_work_through_the_custom_jvp_rules():
    works, why = nesting.taylor_mode_works()
    assert works is False and why


def test_jet_has_no_svd_rule():
    # the library behaviour the module docstring states (JAX 0.10.x): KeyError on 'svd'
    works, why = nesting.jet_has_svd_rule()
    assert works is False and why.startswith("KeyError") and "svd" in why


@pytest.mark.slow      # quick twin: test_cli.test_trg_beta_at_the_ends_of_the_range[350]
def test_largest_beta_gives_c_zero_not_nan():
    r = modes.value_and_derivatives(350.0, [2, 4, 4], "forward_mode", order=2)
    assert abs(r["c"]) < 1e-300 and r["u"] == -2.0


@pytest.mark.parametrize("kwargs,needle", [
    ({"method": "reverse"}, "method='reverse'"),
    ({"order": 3}, "order=3"),
    ({"c_method": "spline"}, "c_method='spline'"),
])
def test_bad_input(kwargs, needle):
    with pytest.raises(InputError, match=needle):
        modes.value_and_derivatives(BETA, [2], **kwargs)
    with pytest.raises(InputError):
        modes.value_and_derivatives(1e-310, [2])    # subnormal: JAX would see 0
    with pytest.raises(InputError):
        modes.program("staged", 1, [2])


def test_program_gives_memory_figures():
    exe, _ = modes.program("checkpoint", 1, (2, 2, 2))
    assert exe.memory_analysis().temp_size_in_bytes >= 0
    lnz, dlnz, d2 = exe(BETA)
    assert d2 is None and math.isfinite(float(dlnz))


def test_forward_is_a_deprecated_alias_of_forward_mode():
    r = modes.value_and_derivatives(BETA, [2, 4], "forward")
    assert r["method"] == "forward_mode"
    assert modes.check_method("forward") == "forward_mode" and "forward" not in modes.METHODS


def test_named_norm_ops_tag_the_norm_and_keep_the_values():
    import jax.numpy as jnp
    import numpy as np

    ops = modes.named_norm_ops()
    T = jnp.asarray(np.random.default_rng(0).normal(size=(2, 2, 2, 2)))
    assert float(ops.norm(T)) == float(trg.JAX.norm(T)) and ops.norm is not trg.JAX.norm
    assert trg.JAX.norm is jnp.linalg.norm                  # the shared back end is untouched
    jaxpr = jax.make_jaxpr(ops.norm)(T)
    names = [e.params.get("name") for e in jaxpr.jaxpr.eqns if e.primitive.name == "name"]
    assert names == [modes.NORM_NAME]


def test_clear_forgets_every_compiled_program(fresh_programs):
    # from empty caches (fresh_programs), so what is put back is what this test compiled
    modes.value_and_derivatives(BETA, (2, 4), "whole")
    staged.value_and_grad_jax(BETA, (2, 4))
    assert compiled.sizes()["modes"] > 0 and compiled.sizes()["staged"] > 0
    saved = compiled.snapshot()
    compiled.clear()
    assert set(compiled.sizes().values()) == {0} and staged.compiled_shapes() == []
    assert modes.value_and_derivatives(BETA, (2, 4), "whole")["compile_seconds"] > 0
    compiled.restore(saved)
    assert staged.compiled_shapes() == [(2, 2), (2, 4)]
