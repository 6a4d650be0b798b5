"""The keyed graph engine: exact key-visit counts, gradients against independent oracles.

No timed assertions: the exponential shape is checked on the deterministic key-visit count.
"""
import functools

import numpy as np
import pytest

import trgad  # noqa: F401  (float64 for JAX)
from trgad import chain, engine as E, svd, trg, whole
from trgad.validate import InputError


def visits(depth, fanout, keys):
    x = E.leaf(1.1, keys)
    return E.grad(chain.build(x, depth, fanout), x).key_visits


def diffs(seq):
    return [b - a for a, b in zip(seq, seq[1:])]


# --- the exponential shape, exactly -----------------------------------------------------

@pytest.mark.parametrize("fanout", [2, 3])
def test_structural_visits_grow_by_exactly_the_fanout_per_layer(fanout):
    # V(D) = A K**D + B D + C  <=>  the increments obey  dV(D+1) = K dV(D) + const.
    V = [visits(D, fanout, "structural") for D in range(1, 10)]
    d = diffs(V)
    residual = [d[i + 1] - fanout * d[i] for i in range(len(d) - 1)]
    assert len(set(residual)) == 1
    assert d[-1] > fanout ** 6          # and the exponential part dominates
    assert abs(V[-1] / V[-2] - fanout) < 0.05 * fanout


@pytest.mark.parametrize("fanout", [1, 2, 3])
def test_interned_visits_grow_linearly(fanout):
    V = [visits(D, fanout, "interned") for D in range(1, 12)]
    assert len(set(diffs(V))) == 1      # the same number of visits per added layer


def test_memo_visits_are_polynomial():
    # Memoised comparison: each lookup is linear in depth, the transform quadratic.
    V = [visits(D, 2, "memo") for D in range(1, 12)]
    assert len(set(diffs(diffs(V)))) == 1


def tree_size_closed_form(depth, fanout):
    """Nodes of the chain's key unfolded into a tree, by hand: leaf 1; a layer is K-1
    multiplications (1 + both inputs each) then a division by a constant leaf."""
    S = 1
    for _ in range(depth):
        p = S
        for _ in range(fanout - 1):
            p = 1 + p + S
        S = 1 + p + 1
    return S


@pytest.mark.parametrize("fanout", [1, 2, 3])
def test_comparing_independent_copies_walks_the_tree(fanout):
    depth = 6
    y = chain.build(E.leaf(1.1, "structural"), depth, fanout)
    copy = E.rebuild_key(y.key)
    assert copy is not y.key
    equal, n = E.count_visits(lambda: y.key == copy)
    assert equal
    assert n == tree_size_closed_form(depth, fanout) == E.tree_size(y.key)
    assert E.dag_size(y.key) == 1 + depth * (fanout + 1)
    # the identity shortcut: comparing a key with itself is one visit
    assert E.count_visits(lambda: y.key == y.key) == (True, 1)


def test_interned_copy_is_the_same_object():
    y = chain.build(E.leaf(1.1, "interned"), 10, 2)
    assert E.rebuild_key(y.key) is y.key
    other = chain.build(E.leaf(1.1, "interned"), 10, 2)
    equal, n = E.count_visits(lambda: y.key == other.key)
    assert not equal and n == 1          # different leaves: different ids, one visit


# --- gradients ---------------------------------------------------------------------------

@pytest.mark.parametrize("keys", E.STRATEGIES)
@pytest.mark.parametrize("fanout,x0", [(1, 1.1), (2, 2.0), (2, 1.9), (3, 3 ** 0.5), (3, -1.6), (2, 1.1)])
def test_chain_gradient_equals_analytic(keys, fanout, x0):
    depth = 7
    x = E.leaf(x0, keys)
    g = E.grad(chain.build(x, depth, fanout), x).run()
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
        for keys in E.STRATEGIES:
            x = E.leaf(1.3, keys)
            progs.append(E.grad(chain.build(x, 8, fanout), x).program)
        assert progs[0] == progs[1] == progs[2]
    for steps in (1, 2):
        schedule = trg.truncation_schedule(16, steps, 0.3)
        progs = []
        for keys in ("structural", "interned"):
            b = E.leaf(0.3, keys)
            progs.append(E.grad(trg.lnz_per_site(b, schedule, ops=E.KeyedOps(keys)), b).program)
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
    for keys in ("interned", "structural") if steps < 3 else ("interned",):
        r = E.trg_whole(0.3, schedule, keys=keys)
        assert r["lnz_per_site"] == pytest.approx(lnz, rel=1e-13)
        assert r["u"] == pytest.approx(-dlnz, rel=1e-12)
        assert r["derivative_ops"] > 0 and r["key_visits"] > 0 and r["run_seconds"] >= 0


def test_structural_trg_costs_more_than_interned_and_grows_fast():
    per_step = []
    for steps in (1, 2):
        schedule = trg.truncation_schedule(16, steps, 0.3)
        s = E.trg_whole(0.3, schedule, keys="structural")["key_visits"]
        i = E.trg_whole(0.3, schedule, keys="interned")["key_visits"]
        per_step.append(s)
        assert s > 5 * i
    assert per_step[1] / per_step[0] > 8      # base of one TRG step is far above 2


def test_svd_rule_is_the_shared_formula():
    assert E.svd_pullback is svd.svd_pullback


def _jax_grad(f, x):
    import jax

    return np.asarray(jax.grad(f)(x))


@pytest.mark.parametrize("spec", ["ij,jk->ik", "abab->", "ij->i", "si,sj,sk,sl->ijkl", "pqD,qrC,Brs,Asp->ABCD"])
def test_einsum_gradient_equals_jax(spec):
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    lhs, out = spec.split("->")
    specs = lhs.split(",")
    same = spec.startswith("si,sj")                      # the same value four times
    dims = {c: 2 + (0 if same else i % 2) for i, c in enumerate(sorted(set(lhs) - {","}))}
    arrays = [rng.standard_normal([dims[c] for c in s]) for s in specs]
    w = rng.standard_normal([dims[c] for c in out])      # loss = <w, einsum(...)>

    def operands(x, const):
        return [x] * 4 if same else [x] + [const(a) for a in arrays[1:]]

    x = E.leaf(arrays[0])
    y = E.einsum(out + "," + out + "->", E.einsum(spec, *operands(x, E.constant)), E.constant(w))
    g = E.grad(y, x).run()
    expected = _jax_grad(lambda v: jnp.sum(jnp.einsum(spec, *operands(v, jnp.asarray)) * w), arrays[0])
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-13)


def test_arithmetic_broadcasting_both_orders_equals_jax():
    import jax.numpy as jnp

    c = np.array([1.0, 2.0, 3.0])
    x0 = np.array([[0.7], [1.3]])             # (2, 1), broadcast against (3,)

    def f(x, exp, log, sqrt, norm, summ):
        a = (2.0 - x) / (x * c) + c / x - (-x) * 3.0
        b = exp(a * 0.1) + log(x + 1.0) * sqrt(x) - 1.5 / norm(a)
        return summ(b)

    x = E.leaf(x0)
    y = f(x, E.exp, E.log, E.sqrt, E.norm, lambda v: E.einsum("ij->", v))
    g = E.grad(y, x).run()
    expected = _jax_grad(lambda v: f(v, jnp.exp, jnp.log, jnp.sqrt, jnp.linalg.norm, jnp.sum), x0)
    assert g.shape == (2, 1)
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_vjp_with_several_outputs_and_cotangents():
    x = E.leaf(np.array([1.0, 2.0]))
    y1, y2 = x * x, E.reshape(E.transpose(E.reshape(x, (1, 2)), (1, 0)), (2,)) * 3.0
    d = E.vjp([y1, y2], x, [np.array([1.0, -1.0]), 2.0])
    np.testing.assert_allclose(d.run(), [2 * 1 + 6, -2 * 2 + 6])
    np.testing.assert_allclose(E.vjp([y1, y2], [x], [np.array([1.0, -1.0]), 2.0]).run(), d.run())
    assert d.free() >= 0 and d.free_seconds is not None
    with pytest.raises(InputError):
        d.run()


def test_gradient_of_an_unrelated_output_is_zero():
    x, z = E.leaf(1.0), E.leaf(np.ones(3))
    np.testing.assert_array_equal(E.grad(E.einsum("i->", z * 2.0), x).run(), 0.0)
    assert E.grad(x, x).run() == 1.0


def test_bad_input_raises_one_line_input_errors():
    x = E.leaf(1.0)
    cases = [
        lambda: E.leaf("abc"),
        lambda: E.leaf(1.0, keys="pointer"),
        lambda: E.vjp([x * 2.0], x, []),
        lambda: E.vjp([x * 2.0], x * 2.0, [1.0]),
        lambda: E.grad(x * 2.0, 1.0),
        lambda: E.vjp([x * 2.0], [x, x], [1.0]),
        lambda: x + E.leaf(1.0, "interned"),
        lambda: E.svd(E.leaf(np.eye(3)), 4),
        lambda: E.trg_whole(0.3, [], keys="structural"),
        lambda: E.trg_whole(-1.0, [2], keys="structural"),
    ]
    for case in cases:
        with pytest.raises(InputError) as info:
            case()
        assert "\n" not in str(info.value)


def test_keyed_ops_runs_the_same_trg_code():
    ops = E.KeyedOps("interned")
    assert ops.name == "keyed-interned"
    T = trgad.ising.initial_tensor(E.leaf(0.3, "interned"), ops)
    assert isinstance(T, E.Value) and T.shape == (2, 2, 2, 2)
    expected = trgad.ising.initial_tensor(0.3, trg.NUMPY)
    np.testing.assert_allclose(T.data, expected, rtol=1e-14)
