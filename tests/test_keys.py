"""Value keys: exact key-visit counts against the recursive definition, any depth, and an
interning table that forgets.

No timed assertions: every cost is the deterministic key-visit count.
"""
import gc

import numpy as np
import pytest

import trgad  # noqa: F401  (float64 for JAX)
from trgad.keyed import chain, keyed_trg, keys
from trgad.physics import trg
from trgad.keyed import engine as keyed


def rebuild_key(key):
    """An independent copy of ``key``'s DAG: structurally equal, sharing no objects.

    Sharing *inside* the copy is kept (each node is rebuilt once), exactly as a
    materialiser rebuilds a graph.  For interned keys the "copy" is the same object.
    """
    copies = {}
    for node in keys.postorder(key):
        copies[id(node)] = keys.make_key(node.strategy, node.prim, node.params,
                                         [copies[id(i)] for i in node.inputs], node.slot)
    return copies[id(key)]


# --- the recursive definitions, as the engine had them (the oracle for the counts) --------

def same_node(a, b):
    return a.prim == b.prim and a.params == b.params and a.slot == b.slot and len(a.inputs) == len(b.inputs)


def recursive_eq(a, b):
    """Structural ``==``: one visit per call, identity shortcut, no memo, short-circuit."""
    keys.COUNTER.visits += 1
    if a is b:
        return True
    return same_node(a, b) and all(recursive_eq(x, y) for x, y in zip(a.inputs, b.inputs))


def recursive_memo_eq(a, b, memo):
    keys.COUNTER.visits += 1
    if a is b:
        return True
    pair = (id(a), id(b))
    if pair not in memo:
        memo[pair] = same_node(a, b) and all(recursive_memo_eq(x, y, memo) for x, y in zip(a.inputs, b.inputs))
    return memo[pair]


RECURSIVE = {"structural": (keys.StructuralKey, recursive_eq),
             "memo": (keys.MemoKey, lambda a, b: recursive_memo_eq(a, b, {}))}


def recursive_tree_size(key):
    return 1 + sum(recursive_tree_size(k) for k in key.inputs)


def recursive_path_count(key, target):
    return 1 if key is target else sum(recursive_path_count(k, target) for k in key.inputs)


def visits(depth, fanout, strategy):
    x = keyed.leaf(1.1, strategy)
    return keyed.grad(chain.build(x, depth, fanout), x).key_visits


def diffs(seq):
    return [b - a for a, b in zip(seq, seq[1:])]


def key_pairs(strategy):
    """Pairs of keys to compare: equal copies, and differences found early, deep and late."""
    pairs = []
    for depth, fanout in [(1, 1), (4, 1), (3, 2), (5, 2), (4, 3)]:
        y = chain.build(keyed.leaf(1.1, strategy), depth, fanout)
        other = chain.build(keyed.leaf(1.1, strategy), depth, fanout)       # another leaf
        copy = rebuild_key(y.key)
        left, right = copy.inputs                                          # y = left / const
        late = keys.make_key(strategy, "div", (), [left, keys.fresh_leaf_key(strategy, "const")])
        early = keys.make_key(strategy, "sub", (), [left, right])
        pairs += [(y.key, copy), (y.key, y.key), (y.key, other.key), (y.key, late), (y.key, early)]
    b = keyed.leaf(0.3, strategy)
    T = trgad.physics.ising.initial_tensor(b, keyed_trg.KeyedOps(strategy))
    T_next, ln = trg.trg_step(T, 2, keyed_trg.KeyedOps(strategy))            # an SVD: three slots
    pairs += [(T_next.key, rebuild_key(T_next.key)), (ln.key, rebuild_key(ln.key))]
    return pairs


# --- the comparison: same counts as the recursive definition --------------------------------

@pytest.mark.parametrize("strategy", ["structural", "memo"])
def test_comparison_visits_equal_the_recursive_definition(strategy):
    _, reference = RECURSIVE[strategy]
    outcomes = set()
    for a, b in key_pairs(strategy):
        got = keys.count_visits(lambda: a == b)
        expected = keys.count_visits(lambda: reference(a, b))
        assert got == expected
        outcomes.add(got[0])
    assert outcomes == {True, False}


@pytest.mark.parametrize("strategy", ["structural", "memo"])
@pytest.mark.parametrize("fanout", [2, 3])
def test_transform_visits_equal_those_of_the_recursive_comparison(strategy, fanout, monkeypatch):
    depths = range(1, 8)
    iterative = [visits(D, fanout, strategy) for D in depths]
    cls, reference = RECURSIVE[strategy]
    monkeypatch.setattr(cls, "__eq__", reference)
    assert [visits(D, fanout, strategy) for D in depths] == iterative


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
    x = keyed.leaf(1.1, "structural")
    y = chain.build(x, depth, fanout)
    copy = rebuild_key(y.key)
    assert copy is not y.key
    equal, n = keys.count_visits(lambda: y.key == copy)
    assert equal
    assert n == tree_size_closed_form(depth, fanout) == keys.tree_size(y.key) == recursive_tree_size(y.key)
    assert keys.dag_size(y.key) == 1 + depth * (fanout + 1)
    assert keys.path_count(y.key, x.key) == fanout ** depth == recursive_path_count(y.key, x.key)
    # the identity shortcut: comparing a key with itself is one visit
    assert keys.count_visits(lambda: y.key == y.key) == (True, 1)


# --- where a transform's visits go: step by step ---------------------------------------------

TRANSFORMS = {"vjp": (lambda y, x: keyed.grad(y, x), "reverse_sweep"),
              "jvp": (lambda y, x: keyed.jvp([y], x, 1.0), "forward_sweep")}


@pytest.mark.parametrize("form", TRANSFORMS)
@pytest.mark.parametrize("fanout", [2, 3])
def test_step_visits_add_up_and_step_c_walks_every_tree(form, fanout):
    transform, sweep = TRANSFORMS[form]
    others = []
    for depth in range(1, 8):
        x = keyed.leaf(1.1, "structural")
        y = chain.build(x, depth, fanout)
        d = transform(y, x)
        assert set(d.step_visits) == {"value_table", "materialise", "fetch_residuals", sweep}
        assert sum(d.step_visits.values()) == d.key_visits
        # step c: every value of the graph is looked up once by the copy's key: a hash, an ==
        # between two independently built equal keys (a walk of the value's whole tree), and
        # a hash to store the register
        nodes = keys.postorder(y.key)
        assert d.step_visits["fetch_residuals"] == sum(recursive_tree_size(n) + 2 for n in nodes)
        others.append(d.key_visits - d.step_visits["fetch_residuals"])
    assert len(set(diffs(others))) == 1          # steps a, b, d: the same visits per layer


@pytest.mark.parametrize("form", TRANSFORMS)
def test_interned_step_c_is_two_visits_per_value(form):
    transform, _ = TRANSFORMS[form]
    x = keyed.leaf(1.1, "interned")
    y = chain.build(x, 9, 2)
    d = transform(y, x)
    assert d.step_visits["fetch_residuals"] == 2 * keys.dag_size(y.key)
    assert sum(d.step_visits.values()) == d.key_visits


def test_eager_tangents_have_no_steps():
    x = keyed.leaf(1.1, "structural")
    r = keyed.jvp_eager([chain.build(x, 5, 2)], x, 1.0)
    assert r.step_visits == {} and r.key_visits == 0


# --- any depth ------------------------------------------------------------------------------

# the quick tier walks the deep chains with interned keys; the other strategies: slow tier
INTERNED_QUICK = [s if s == "interned" else pytest.param(s, marks=pytest.mark.slow) for s in keys.STRATEGIES]

@pytest.mark.parametrize("strategy", INTERNED_QUICK)
def test_gradient_at_depth_3000_with_fanout_1(strategy):
    x = keyed.leaf(1.1, strategy)
    d = keyed.grad(chain.build(x, 3000, 1), x)
    assert float(d.run()) == chain.analytic_grad(3000, 1, 1.1) == 1.0


def test_gradient_at_depth_20000_with_fanout_1_interned():
    r = chain.run(20000, 1, keys="interned", x0=1.1)
    assert r["grad"] == r["analytic_grad"] == 1.0


@pytest.mark.parametrize("strategy", INTERNED_QUICK)
def test_walks_at_depth_20000(strategy):
    # The structural transform itself is quadratic here (each of 40 000 lookups walks its
    # key): minutes, not a RecursionError.  Each walk it is made of is checked at full depth.
    depth = 20000
    x = keyed.leaf(1.1, strategy)
    y = chain.build(x, depth, 1)
    copy = rebuild_key(y.key)
    equal, n = keys.count_visits(lambda: y.key == copy)
    assert equal
    assert n == (1 if strategy == "interned" else 2 * depth + 1)
    assert keys.tree_size(y.key) == tree_size_closed_form(depth, 1) == 2 * depth + 1
    assert keys.dag_size(y.key) == 2 * depth + 1
    assert keys.path_count(y.key, x.key) == 1
    other = chain.build(keyed.leaf(1.1, strategy), depth, 1)
    assert keys.count_visits(lambda: y.key == other.key) == (False, 1 if strategy == "interned" else depth + 1)
    r = keyed.jvp_eager([y], x, 1.0)
    assert r.key_visits == 0 and float(r.run()[0]) == 1.0


# --- interning that forgets -----------------------------------------------------------------

def test_interned_copy_is_the_same_object_and_equality_is_one_visit():
    y = chain.build(keyed.leaf(1.1, "interned"), 10, 2)
    assert rebuild_key(y.key) is y.key
    other = chain.build(keyed.leaf(1.1, "interned"), 10, 2)
    equal, n = keys.count_visits(lambda: y.key == other.key)
    assert not equal and n == 1          # different leaves: different ids, one visit
    assert keys.count_visits(lambda: y.key == rebuild_key(y.key)) == (True, 1 + keys.dag_size(y.key))


def test_interning_table_holds_exactly_the_live_keys():
    gc.collect()
    gc.disable()                         # no reference cycles: dropping a value frees its keys
    try:
        base = keys.interned_count()
        x = keyed.leaf(1.1, "interned")
        y = chain.build(x, 20, 2)
        assert keys.interned_count() - base == keys.dag_size(y.key) == 1 + 20 * 3
        d = keyed.grad(y, x)
        assert keys.interned_count() > base + keys.dag_size(y.key)     # the program's keys
        d.free()
        assert keys.interned_count() - base == keys.dag_size(y.key)
        first_ids = {k.id for k in keys.postorder(y.key)}
        del x, y, d
        assert keys.interned_count() == base
        # the same structure again: new ids (never reused), still O(1) and correct equality
        x = keyed.leaf(1.1, "interned")
        y, z = keyed.exp(x * x) + x, keyed.exp(x * x) + x       # no fresh constants inside
        assert y.key is z.key and not first_ids & {k.id for k in keys.postorder(y.key)}
        assert keys.count_visits(lambda: y.key == z.key) == (True, 1)
        del x, y, z
        assert keys.interned_count() == base
    finally:
        gc.enable()


def test_interning_table_stays_flat_over_repeated_runs():
    gc.collect()
    gc.disable()
    try:
        base = keys.interned_count()
        sizes = []
        for _ in range(20):
            r = chain.run(20, 2, keys="interned", x0=2.0)
            sizes.append(keys.interned_count())
        assert r["grad"] == pytest.approx(2.0 ** 20, rel=1e-12)
        schedule = trg.truncation_schedule(16, 3, 0.3)
        for _ in range(2):
            keyed_trg.value_and_grad_engine(0.3, schedule, keys="interned")
            sizes.append(keys.interned_count())
            keyed_trg.trg_whole(0.3, schedule[:2], keys="interned")
            sizes.append(keys.interned_count())
        assert sizes == [base] * len(sizes)
    finally:
        gc.enable()


def test_interned_ids_are_not_reused():
    a = keys.fresh_leaf_key("interned")
    first = a.id
    del a
    b = keys.fresh_leaf_key("interned")
    assert b.id > first
    assert np.all(np.diff([keys.fresh_leaf_key("interned").id for _ in range(5)]) > 0)
