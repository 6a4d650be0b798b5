"""The keyed graph engine: gradients and tangents against independent oracles (analytic
derivatives, JAX), key-visit counts of the forward mode.  Key counts of the reverse mode and
the keys themselves: test_keys.py.

No timed assertions: the exponential shape is checked on the deterministic key-visit count.
"""
import functools

import numpy as np
import pytest

import trgad  # noqa: F401  (float64 for JAX)
from trgad.keyed import chain, keyed_trg, keys, rules
from trgad.physics import svd, trg, whole, svdrules
from trgad.keyed import engine as keyed
from trgad.runtime.validate import InputError


# --- gradients ---------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", keys.STRATEGIES)
@pytest.mark.parametrize("fanout,x0", [(1, 1.1), (2, 2.0), (2, 1.9), (3, 3 ** 0.5), (3, -1.6), (2, 1.1)])
def test_chain_gradient_equals_analytic(strategy, fanout, x0):
    depth = 7
    x = keyed.leaf(x0, strategy)
    g = keyed.grad(chain.build(x, depth, fanout), x).run()
    # independent oracle: product over layers of dy_{d+1}/dy_d = y_d**(K-1), in plain floats
    y, expected = x0, 1.0
    for _ in range(depth):
        expected *= y ** (fanout - 1)
        y = y ** fanout / fanout
    assert g.shape == ()
    assert float(g) == pytest.approx(expected, rel=1e-12)
    assert float(g) == pytest.approx(chain.analytic_grad(depth, fanout, x0), rel=1e-10)


def test_programs_are_identical_across_key_strategies():
    for fanout in (2, 3):
        progs = []
        for strategy in keys.STRATEGIES:
            x = keyed.leaf(1.3, strategy)
            progs.append(keyed.grad(chain.build(x, 8, fanout), x).program)
        assert progs[0] == progs[1] == progs[2]
    for steps in (1, 2):
        schedule = trg.truncation_schedule(16, steps, 0.3)
        progs = []
        for strategy in ("structural", "interned"):
            b = keyed.leaf(0.3, strategy)
            progs.append(keyed.grad(trg.lnz_per_site(b, schedule, ops=keyed_trg.KeyedOps(strategy)), b).program)
        assert progs[0] == progs[1]
        assert len(progs[0]) > 50


@functools.lru_cache(maxsize=None)
def jax_reference(steps):
    """(schedule, lnZ/N, d lnZ/N / d beta) from ``jax.value_and_grad`` of the whole graph."""
    schedule = trg.truncation_schedule(16, steps, 0.3)
    return (schedule, *whole.value_and_grad(0.3, schedule))


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_trg_gradient_equals_jax(steps):
    schedule, lnz, dlnz = jax_reference(steps)
    # structural keys at 3 steps take seconds (that is the point); 1-2 steps suffice here
    for strategy in ("interned", "structural") if steps < 3 else ("interned",):
        r = keyed_trg.trg_whole(0.3, schedule, keys=strategy)
        assert r["lnz_per_site"] == pytest.approx(lnz, rel=1e-13)
        assert r["u"] == pytest.approx(-dlnz, rel=1e-12)
        assert r["derivative_ops"] > 0 and r["key_visits"] > 0 and r["run_seconds"] >= 0


def test_structural_trg_costs_more_than_interned_and_grows_fast():
    per_step = []
    for steps in (1, 2):
        schedule = trg.truncation_schedule(16, steps, 0.3)
        s = keyed_trg.trg_whole(0.3, schedule, keys="structural")["key_visits"]
        i = keyed_trg.trg_whole(0.3, schedule, keys="interned")["key_visits"]
        per_step.append(s)
        assert s > 5 * i
    assert per_step[1] / per_step[0] > 8      # base of one TRG step is far above 2


def test_svd_rule_is_the_shared_formula():
    assert rules.svd_pullback is svdrules.svd_pullback


def _jax_grad(f, x):
    import jax

    return np.asarray(jax.grad(f)(x))


EINSUM_SPECS = ["ij,jk->ik", "abab->", "ij->i", "si,sj,sk,sl->ijkl", "pqD,qrC,Brs,Asp->ABCD"]


def einsum_case(spec):
    """Arrays for ``spec`` and ``operands(x, const)``: x first (or x four times for the
    Ising spec "si,sj,sk,sl", the same value used four times), the rest constants."""
    rng = np.random.default_rng(0)
    lhs, out = spec.split("->")
    specs = lhs.split(",")
    same = spec.startswith("si,sj")
    dims = {c: 2 + (0 if same else i % 2) for i, c in enumerate(sorted(set(lhs) - {","}))}
    arrays = [rng.standard_normal([dims[c] for c in s]) for s in specs]

    def operands(x, const):
        return [x] * 4 if same else [x] + [const(a) for a in arrays[1:]]

    return arrays, operands, rng.standard_normal([dims[c] for c in out])


@pytest.mark.parametrize("spec", EINSUM_SPECS)
def test_einsum_gradient_equals_jax(spec):
    import jax.numpy as jnp

    arrays, operands, w = einsum_case(spec)               # loss = <w, einsum(...)>
    out = spec.split("->")[1]
    x = keyed.leaf(arrays[0])
    y = keyed.einsum(out + "," + out + "->", keyed.einsum(spec, *operands(x, keyed.constant)), keyed.constant(w))
    g = keyed.grad(y, x).run()
    expected = _jax_grad(lambda v: jnp.sum(jnp.einsum(spec, *operands(v, jnp.asarray)) * w), arrays[0])
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-13)


def arithmetic(x, exp, log, sqrt, norm, summ, expm1=None):
    """Every arithmetic primitive, NumPy broadcasting (2, 1) x (3,) in both operand orders."""
    c = np.array([1.0, 2.0, 3.0])
    a = (2.0 - x) / (x * c) + c / x - (-x) * 3.0
    b = exp(a * 0.1) + log(x + 1.0) * sqrt(x) - 1.5 / norm(a)
    if expm1 is not None:
        b = b + expm1(b * -0.01) * 7.0
    return summ(b)


def keyed_arithmetic(x, summ=lambda v: keyed.einsum("ij->", v)):
    return arithmetic(x, keyed.exp, keyed.log, keyed.sqrt, keyed.norm, summ, keyed.expm1)


def jax_arithmetic(x, summ=None):
    import jax.numpy as jnp

    return arithmetic(x, jnp.exp, jnp.log, jnp.sqrt, jnp.linalg.norm, summ or jnp.sum, jnp.expm1)


def test_arithmetic_broadcasting_both_orders_equals_jax():
    x0 = np.array([[0.7], [1.3]])             # (2, 1), broadcast against (3,)
    x = keyed.leaf(x0)
    g = keyed.grad(keyed_arithmetic(x), x).run()
    assert g.shape == (2, 1)
    np.testing.assert_allclose(g, _jax_grad(jax_arithmetic, x0), rtol=1e-12)


def test_vjp_with_several_outputs_and_cotangents():
    x = keyed.leaf(np.array([1.0, 2.0]))
    y1, y2 = x * x, keyed.reshape(keyed.transpose(keyed.reshape(x, (1, 2)), (1, 0)), (2,)) * 3.0
    d = keyed.vjp([y1, y2], x, [np.array([1.0, -1.0]), 2.0])
    np.testing.assert_allclose(d.run(), [2 * 1 + 6, -2 * 2 + 6])
    np.testing.assert_allclose(keyed.vjp([y1, y2], [x], [np.array([1.0, -1.0]), 2.0]).run(), d.run())
    assert d.free() >= 0 and d.free_seconds is not None
    with pytest.raises(InputError):
        d.run()


def test_gradient_of_an_unrelated_output_is_zero():
    x, z = keyed.leaf(1.0), keyed.leaf(np.ones(3))
    np.testing.assert_array_equal(keyed.grad(keyed.einsum("i->", z * 2.0), x).run(), 0.0)
    assert keyed.grad(x, x).run() == 1.0


def test_bad_input_raises_one_line_input_errors():
    x = keyed.leaf(1.0)
    cases = [
        lambda: keyed.leaf("abc"),
        lambda: keyed.leaf(1.0, keys="pointer"),
        lambda: keyed.vjp([x * 2.0], x, []),
        lambda: keyed.vjp([x * 2.0], x * 2.0, [1.0]),
        lambda: keyed.grad(x * 2.0, 1.0),
        lambda: keyed.vjp([x * 2.0], [x, x], [1.0]),
        lambda: x + keyed.leaf(1.0, "interned"),
        lambda: keyed.svd(keyed.leaf(np.eye(3)), 4),
        lambda: keyed.jvp([], x, 1.0),
        lambda: keyed.jvp([x * 2.0], x * 2.0, 1.0),
        lambda: keyed.jvp_eager([x * 2.0], [x, x], 1.0),
        lambda: keyed.jvp_eager([keyed.leaf(1.0, "memo")], x, 1.0),
        lambda: keyed.jvp([x * 2.0], keyed.leaf(np.ones(2)), np.ones((3, 3))),
        lambda: keyed.jvp_eager([x * 2.0], x, "abc"),
        lambda: keyed.vjp([keyed.leaf(np.ones(2)) * x], x, [np.ones((2, 3))]),
        lambda: keyed_trg.trg_whole(0.3, [], keys="structural"),
        lambda: keyed_trg.trg_whole(0.0, [2], keys="structural"),
    ]
    for case in cases:
        with pytest.raises(InputError) as info:
            case()
        assert "\n" not in str(info.value)


def test_keyed_ops_runs_the_same_trg_code():
    ops = keyed_trg.KeyedOps("interned")
    assert ops.name == "keyed-interned"
    T = trgad.physics.ising.initial_tensor(keyed.leaf(0.3, "interned"), ops)
    assert isinstance(T, keyed.Value) and T.shape == (2, 2, 2, 2)
    expected = trgad.physics.ising.initial_tensor(0.3, trg.NUMPY)
    np.testing.assert_allclose(T.data, expected, rtol=1e-14)


# --- expm1 -------------------------------------------------------------------------------

def test_expm1_is_accurate_near_zero_and_in_keyed_ops():
    x0 = np.array([1e-12, -1e-9, 0.5])
    y = keyed.expm1(keyed.leaf(x0))
    np.testing.assert_array_equal(y.data, np.expm1(x0))       # exp(x) - 1 would lose all digits
    assert y.data[0] != np.exp(1e-12) - 1.0
    assert keyed_trg.KeyedOps("structural").expm1 is keyed.expm1
    x = keyed.leaf(x0)                        # d expm1 / dx = exp(x), both modes
    y = keyed.expm1(x * 2.0)
    np.testing.assert_allclose(keyed.vjp([y], x, [np.ones(3)]).run(), 2 * np.exp(2 * x0), rtol=1e-15)
    np.testing.assert_allclose(keyed.jvp([y], x, np.ones(3)).run()[0], 2 * np.exp(2 * x0), rtol=1e-15)


# --- forward mode: jvp (graph to graph, keyed) and jvp_eager (by identity) ----------------

FORMS = {"jvp": keyed.jvp, "eager": keyed.jvp_eager}


def _jax_jvp(f, x, t):
    import jax

    return np.asarray(jax.jvp(f, (x,), (t,))[1])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("strategy", keys.STRATEGIES)
@pytest.mark.parametrize("fanout,x0", [(1, 1.1), (2, 1.9), (3, 3 ** 0.5), (3, -1.6)])
def test_chain_tangent_equals_analytic(form, strategy, fanout, x0):
    depth = 7
    x = keyed.leaf(x0, strategy)
    [t] = FORMS[form]([chain.build(x, depth, fanout)], x, 1.0).run()
    assert t.shape == ()
    assert float(t) == pytest.approx(chain.analytic_grad(depth, fanout, x0), rel=1e-10)
    assert float(t) == pytest.approx(float(keyed.grad(chain.build(x, depth, fanout), x).run()), rel=1e-13)


@pytest.mark.parametrize("form", FORMS)
def test_arithmetic_tangent_equals_jax(form):
    x0 = np.array([[0.7], [1.3]])
    direction = np.array([[0.3], [-1.1]])
    x = keyed.leaf(x0)
    [t] = FORMS[form]([keyed_arithmetic(x, summ=lambda v: v)], x, direction).run()
    assert t.shape == (2, 3)
    np.testing.assert_allclose(t, _jax_jvp(lambda v: jax_arithmetic(v, summ=lambda b: b), x0, direction), rtol=1e-12)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("spec", EINSUM_SPECS)
def test_einsum_tangent_equals_jax(form, spec):
    import jax.numpy as jnp

    arrays, operands, _ = einsum_case(spec)
    direction = np.random.default_rng(1).standard_normal(arrays[0].shape)
    x = keyed.leaf(arrays[0])
    [t] = FORMS[form]([keyed.einsum(spec, *operands(x, keyed.constant))], x, direction).run()
    expected = _jax_jvp(lambda v: jnp.einsum(spec, *operands(v, jnp.asarray)), arrays[0], direction)
    assert t.shape == expected.shape
    np.testing.assert_allclose(t, expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("form", FORMS)
def test_tangents_of_several_outputs_reshape_transpose_and_constants(form):
    import jax.numpy as jnp

    x0, direction = np.array([1.0, 2.0, 4.0, 0.5]), np.array([0.5, -1.0, 2.0, 3.0])

    def f(x, reshape, transpose, norm, sqrt):
        m = transpose(reshape(x, (2, 2)), (1, 0))
        return reshape(m, (4,)) * norm(x) / sqrt(x)

    x, c = keyed.leaf(x0), keyed.constant(np.ones(3))
    y = f(x, keyed.reshape, keyed.transpose, keyed.norm, keyed.sqrt)
    t_y, t_c, t_x = FORMS[form]([y, c * 2.0, x], [x], direction).run()
    expected = _jax_jvp(lambda v: f(v, jnp.reshape, jnp.transpose, jnp.linalg.norm, jnp.sqrt), x0, direction)
    np.testing.assert_allclose(t_y, expected, rtol=1e-13)
    np.testing.assert_array_equal(t_c, np.zeros(3))          # does not depend on x
    np.testing.assert_array_equal(t_x, direction)            # d x / d x . t = t


def test_jvp_programs_are_identical_across_key_strategies_and_linear():
    for fanout in (2, 3):
        sizes = []
        for depth in (6, 7, 8):
            progs = []
            for strategy in keys.STRATEGIES:
                x = keyed.leaf(1.3, strategy)
                progs.append(keyed.jvp([chain.build(x, depth, fanout)], x, 1.0).program)
            assert progs[0] == progs[1] == progs[2]
            sizes.append(len(progs[0]))
        assert sizes[2] - sizes[1] == sizes[1] - sizes[0] > 0


def forward_visits(form, depth, fanout, strategy):
    x = keyed.leaf(1.1, strategy)
    return FORMS[form]([chain.build(x, depth, fanout)], x, 1.0).key_visits


def reverse_visits(depth, fanout, strategy):
    x = keyed.leaf(1.1, strategy)
    return keyed.grad(chain.build(x, depth, fanout), x).key_visits


def diffs(seq):
    return [b - a for a, b in zip(seq, seq[1:])]


@pytest.mark.parametrize("fanout", [2, 3])
def test_keyed_jvp_is_exponential_like_vjp_and_eager_visits_no_key(fanout):
    depths = range(1, 10)
    jvp = [forward_visits("jvp", D, fanout, "structural") for D in depths]
    vjp = [reverse_visits(D, fanout, "structural") for D in depths]
    d = diffs(jvp)
    assert len({d[i + 1] - fanout * d[i] for i in range(len(d) - 1)}) == 1   # A K**D + B D + C
    assert abs(jvp[-1] / jvp[-2] - fanout) < 0.05 * fanout
    # the same exponential term as vjp: the difference is linear in the depth
    assert len(set(diffs([r - f for r, f in zip(vjp, jvp)]))) == 1
    interned = [forward_visits("jvp", D, fanout, "interned") for D in depths]
    assert len(set(diffs(interned))) == 1
    for strategy in keys.STRATEGIES:
        assert {forward_visits("eager", D, fanout, strategy) for D in depths} == {0}


def _svd_tangent_stub(xp, M, U, s, Vh, dM, discarded=None):
    """(dU, ds, dVh) of the k kept triplets from ``jax.jvp`` of the full SVD, signs matched
    to ``U`` (a non-degenerate test matrix): a stand-in to check the engine's wiring."""
    import jax
    import jax.numpy as jnp

    k = s.shape[0]
    (U_j, _, _), (dU, ds, dVh) = jax.jvp(lambda m: jnp.linalg.svd(m, full_matrices=False), (M,), (dM,))
    sign = np.sign(np.sum(np.asarray(U_j)[:, :k] * U, axis=0))
    return np.asarray(dU)[:, :k] * sign, np.asarray(ds)[:k], np.asarray(dVh)[:k] * sign[:, None]


@pytest.mark.parametrize("form", FORMS)
def test_svd_tangent_rule_is_wired_slot_by_slot(form, monkeypatch):
    import jax.numpy as jnp

    monkeypatch.setattr(svd, "svd_tangent", _svd_tangent_stub, raising=False)
    rng = np.random.default_rng(2)
    M0, direction = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))

    def f(M, svd_k, einsum):                  # gauge-invariant in each kept triplet
        U, s, Vh = svd_k(M, 2)
        return einsum("ij,j,jk->ik", U, s * s, Vh)

    def jnp_svd(M, k):
        U, s, Vh = jnp.linalg.svd(M, full_matrices=False)
        return U[:, :k], s[:k], Vh[:k]

    M = keyed.leaf(M0)
    [t] = FORMS[form]([f(M, keyed.svd, keyed.einsum)], M, direction).run()
    expected = _jax_jvp(lambda m: f(m, jnp_svd, jnp.einsum), M0, direction)
    np.testing.assert_allclose(t, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(not hasattr(svd, "svd_tangent"), reason="trgad.physics.svdrules.svd_tangent not written yet")
@pytest.mark.parametrize("form", FORMS)
def test_trg_tangent_equals_jax_gradient(form):
    schedule, lnz, dlnz = jax_reference(2)
    b = keyed.leaf(0.3, "interned")
    y = trg.lnz_per_site(b, schedule, ops=keyed_trg.KeyedOps("interned"))
    [t] = FORMS[form]([y], b, 1.0).run()
    assert float(t) == pytest.approx(dlnz, rel=1e-10)


@pytest.mark.parametrize("engine,mode", [("keyed", "reverse"), ("keyed", "forward_mode"), ("keyed", "forward_eager"),
                                         ("jax", "reverse"), ("jax", "forward_mode"), ("keyed", "forward")])
def test_chain_run_modes_give_the_same_row_fields(engine, mode):
    import json

    out = chain.run(8, 2, engine=engine, keys="interned", x0=1.9, mode=mode)
    json.dumps(out)
    assert out["mode"] == ("forward_mode" if mode == "forward" else mode)   # "forward": deprecated alias
    assert out["grad"] == pytest.approx(chain.analytic_grad(8, 2, 1.9), rel=1e-12)
    assert out["derivative_ops"] > 0 and out["transform_seconds"] >= 0
    if engine == "keyed":
        assert (out["key_visits"] == 0) == (mode == "forward_eager")
        assert out["run_seconds"] >= 0 and out["free_seconds"] >= 0


def test_chain_run_rejects_an_unknown_mode():
    for engine, mode in [("keyed", "sideways"), ("jax", "forward_eager")]:
        with pytest.raises(InputError) as info:
            chain.run(3, 2, engine=engine, mode=mode)
        assert "mode=" in str(info.value)
