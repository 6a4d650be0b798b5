"""trgad.topics.elsewhere: other systems on the book's graphs, counted exactly, against oracles.

Oracles: the mul chain's closed form (trgad.keyed.chain.analytic_grad), the closed form of the
derivatives of sin(x) exp(x), SymPy's own tree walk (preorder_traversal) for the sizes
counted on the DAG, and autograd against SymPy on the logistic map.  Quick: small depths.
"""
import math

import pytest

sympy = pytest.importorskip("sympy")
pytest.importorskip("autograd")

from trgad import InputError
from trgad.keyed import chain
from trgad.topics import elsewhere, nesting
from trgad.pages import recorded  # noqa: E402

CHAIN = lambda y: chain.build(y, 1, 2)            # noqa: E731  (y*y)/2
LOGISTIC = lambda y: 4 * y * (1 - y)              # noqa: E731


# ---- autograd -------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [1, 5, 20, 61])
def test_autograd_chain_gradient_is_the_closed_form_and_its_tape_is_linear(depth):
    r = elsewhere.autograd_tape(lambda x: chain.build(x, depth, 2), 2.0)
    assert r["grad"] == chain.analytic_grad(depth, 2, 2.0) == 2.0 ** depth
    assert r["value"] == 2.0
    assert r["tape_nodes"] == 2 * depth + 1          # a product and a quotient per layer, and x
    assert r["seconds"] > 0


def test_autograd_fanout_three():
    depth = 6
    r = elsewhere.autograd_tape(lambda x: chain.build(x, depth, 3), 1.1)
    assert r["tape_nodes"] == 3 * depth + 1
    assert r["grad"] == pytest.approx(chain.analytic_grad(depth, 3, 1.1), rel=1e-12)


def test_autograd_nodes_are_found_by_identity():
    from autograd.core import VJPNode

    assert VJPNode.__hash__ is object.__hash__ and VJPNode.__eq__ is object.__eq__


@pytest.mark.parametrize("bad", [lambda x: 3.0, "x0"])
def test_autograd_bad_input_is_one_line(bad):
    with pytest.raises(InputError) as err:
        if bad == "x0":
            elsewhere.autograd_tape(lambda x: x * x, math.nan)
        else:
            elsewhere.autograd_tape(bad, 1.0)
    assert "\n" not in str(err.value)


# ---- SymPy ----------------------------------------------------------------------------

def test_sympy_folds_the_chain_into_a_monomial_whose_degree_is_the_path_count():
    for depth in (1, 4, 9):
        x, y = elsewhere.sympy_unroll(CHAIN, depth)
        assert sympy.degree(y, x) == 2 ** depth
        assert y == x ** (2 ** depth) / sympy.Integer(2) ** (2 ** depth - 1)


def test_sympy_unevaluated_chain_keeps_the_fanout():
    x, y = elsewhere.sympy_unroll(CHAIN, 3, evaluate=False)
    products = [e for e in sympy.preorder_traversal(y) if e.is_Mul and len(e.args) == 2 and e.args[0] is e.args[1]]
    assert products                                # y*y kept as a product of two uses of y


def test_expr_sizes_against_sympys_tree_walk():
    x, y = elsewhere.sympy_unroll(LOGISTIC, 4)
    d = sympy.diff(y, x)
    s = elsewhere.expr_sizes(d)
    walk = list(sympy.preorder_traversal(d))
    assert s["tree"] == len(walk)
    assert s["dag"] == len(set(walk))
    assert s["ops"] == sympy.count_ops(d)
    assert s["objects"] == len({id(e) for e in walk})


def test_cse_program_computes_the_same_derivative():
    x, y = elsewhere.sympy_unroll(LOGISTIC, 4)
    d = sympy.diff(y, x)
    replacements, (reduced,) = sympy.cse(d)
    env = {x: sympy.Rational(3, 10)}
    for sym, e in replacements:
        env[sym] = e.subs(env)
    assert reduced.subs(env) == d.subs(x, sympy.Rational(3, 10))
    assert elsewhere.cse_size(d)["subexpressions"] == len(replacements)


def test_sympy_swell_mul_chain_gradient_is_the_closed_form():
    rows = elsewhere.sympy_swell(CHAIN, [1, 2, 5, 10], x0=2.0)
    for r in rows:
        assert r["grad"] == chain.analytic_grad(r["depth"], 2, 2.0)
        assert r["ops"] <= 2                       # one monomial: constant size


def test_sympy_swell_logistic_against_autograd():
    rows = elsewhere.sympy_swell(LOGISTIC, [1, 2, 3, 4, 5], x0=0.3)
    for r in rows:
        g = elsewhere.autograd_tape(lambda x: chain_apply(LOGISTIC, x, r["depth"]), 0.3)["grad"]
        assert r["grad"] == pytest.approx(g, rel=1e-12)
    trees = [r["tree"] for r in rows]
    assert all(b > 2 * a for a, b in zip(trees, trees[1:]))       # exponential
    assert all(r["cse_ops"] < 4 * r["depth"] ** 2 for r in rows)   # polynomial


def chain_apply(step, x, depth):
    for _ in range(depth):
        x = step(x)
    return x


def test_sympy_eq_walks_the_tree_of_independent_copies():
    for depth in (2, 5, 8):
        r = elsewhere.sympy_eq_calls(CHAIN, depth)
        assert r["equal"] and r["distinct"]
        _, y = elsewhere.sympy_unroll(CHAIN, depth, evaluate=False)
        # one Basic.__eq__ per non-number node of the unfolded tree (numbers have their own __eq__)
        assert r["eq_calls"] == sum(1 for e in sympy.preorder_traversal(y) if not e.is_Number)
        assert r["objects"] == len({id(e) for e in sympy.preorder_traversal(y)})


def test_count_calls_counts_recursion():
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    assert elsewhere.count_calls(lambda: fib(10), fib) == (55, 177)
    with pytest.raises(InputError):
        elsewhere.count_calls(lambda: None, len)


def test_tuple_eq_once_per_path():
    for depth in (0, 4, 12):
        r = elsewhere.tuple_eq_calls(depth)
        assert r["equal"] and r["eq_calls"] == 2 ** depth
        assert r["hash_calls"] in (1, 2 ** depth)


@pytest.mark.parametrize("call", [
    lambda: elsewhere.sympy_unroll(CHAIN, 0),
    lambda: elsewhere.sympy_unroll(CHAIN, elsewhere.MAX_SYMPY_DEPTH + 1),
    lambda: elsewhere.sympy_unroll(lambda y: y.no_such_method(), 2),
    lambda: elsewhere.sympy_unroll(lambda y: 3, 2),
    lambda: elsewhere.sympy_swell(CHAIN, [3, 2]),
    lambda: elsewhere.tuple_eq_calls(-1),
])
def test_sympy_bad_input_is_one_line(call):
    with pytest.raises(InputError) as err:
        call()
    assert "\n" not in str(err.value)


# ---- JAX ------------------------------------------------------------------------------

def test_sin_exp_derivative_low_orders():
    x = 0.7
    assert nesting.sin_exp_derivative(0, x) == pytest.approx(math.sin(x) * math.exp(x), rel=1e-15)
    assert nesting.sin_exp_derivative(1, x) == pytest.approx((math.sin(x) + math.cos(x)) * math.exp(x), rel=1e-15)
    assert nesting.sin_exp_derivative(2, x) == pytest.approx(2 * math.cos(x) * math.exp(x), rel=1e-15)


def test_nested_grad_and_taylor_mode_agree_with_the_closed_form():
    grads = nesting.nested_grad(nesting.sin_exp, [1, 2, 3, 4])
    jets = nesting.taylor_mode(nesting.sin_exp, [1, 2, 3, 4, 8])
    for r in grads + jets:
        assert r["value"] == pytest.approx(nesting.sin_exp_derivative(r["order"], nesting.SIN_EXP_X0), rel=1e-12)
        assert 0 < r["distinct"] <= r["eqns"]
    eq = [r["eqns"] for r in grads]
    assert all(b > 2 * a for a, b in zip(eq, eq[1:]))       # each order more than doubles


def test_distinct_eqns_merges_equal_equations():
    import jax
    import jax.numpy as jnp

    closed = jax.make_jaxpr(lambda x: jnp.sin(x) + jnp.sin(x))(0.5)
    assert len(closed.jaxpr.eqns) == 3
    assert nesting.distinct_eqns(closed) == 2      # one sin, one add


def test_nested_cond_reproductions_run_and_return_x():
    import jax.numpy as jnp

    x = jnp.array([2.0])
    assert float(nesting.nested_cond(x, True, 5)[0]) == 2.0
    h = nesting.cond_history([2, 3, 4], repeats=1)
    assert [r["depth"] for r in h["vmap"]] == [2, 3, 4] == [r["depth"] for r in h["linearize"]]
    assert all(r["seconds"] >= 0 for rows in h.values() for r in rows)
    eqns = [r["eqns"] for r in h["vmap"]]
    assert eqns == sorted(eqns) and eqns[0] >= 1


@pytest.mark.parametrize("call", [
    lambda: nesting.nested_grad(nesting.sin_exp, [0]),
    lambda: nesting.nested_grad(nesting.sin_exp, [2, 1]),
    lambda: nesting.taylor_mode(nesting.sin_exp, [1], x0=math.inf),
    lambda: nesting.cond_history([1]),
    lambda: nesting.sin_exp_derivative(-1, 0.0),
])
def test_jax_bad_input_is_one_line(call):
    with pytest.raises(InputError) as err:
        call()
    assert "\n" not in str(err.value)


# ---- recorded -------------------------------------------------------------------------

def test_recorded_rows_carry_their_links():
    keys = {"system", "identifies", "affected", "fix", "sources"}
    for row in recorded.RECORDED:
        assert set(row) == keys
        assert row["sources"] and all(url.startswith("https://github.com/") for _, url in row["sources"])
    assert sorted(recorded.RECORDED_8193_SECONDS) == list(range(7, 13))
    assert recorded.RECORDED_8193_SOURCE.endswith("/issues/8193")


def test_measured_rows_describe_without_verdicts():
    for name, row in recorded.MEASURED.items():
        assert set(row) == {"system", "identifies", "fix", "sources"}, name
        assert all(url.startswith("https://") for _, url in row["sources"])
