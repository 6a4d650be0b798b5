"""A small keyed graph engine whose reverse-mode transform fails the way tenferro-rs 0.8.0's does.

tenferro-rs cannot be installed here, so this module rebuilds the part of it that matters:
values whose identity is a **key**, and a reverse-mode transform that finds values by key.
Read it top to bottom; it is meant to be read in one sitting, like a chapter of JAX's
autodidax.

1. **Keys** (:class:`Key`).  A leaf has a key of its own.  The key of a computed value is
   (primitive, parameters, keys of all inputs, output slot), so the key of a deep value
   contains its whole history.  This is the design of ``GlobalValKey`` / ``ValueKey`` in
   tensor4all/computegraph-rs (``src/types.rs``; commits 76aeccc, c20e891, 691def2).  Three
   ways to hash and compare such keys, chosen per value with ``keys=``:

   * ``"structural"`` - the failing design, modelled on computegraph-rs commit c20e891
     ("Optimize global graph key hashing (#3)"): ``hash`` returns a 64-bit fingerprint
     computed once when the key is built (O(1)); ``==`` is hand-written: the same object
     is equal at once (the ``Arc`` pointer shortcut), otherwise primitive, parameters,
     slot and *all inputs* are compared recursively, with no memo.  Two keys for the same
     value that were **built independently** share no objects, so the comparison walks the
     DAG as a tree: a value used k times per layer costs k**depth.
   * ``"interned"`` - the fix (hash-consing): a key is looked up in a global table by
     (primitive, parameters, ids of its inputs, slot) and gets a small int id once; an
     equal structure built again returns the *same* key object, and ``==`` compares ids.
     This is the ``KeyInterner`` / ``ValKeyId(u32)`` that tenferro-rs's
     ``docs/architecture/computegraph.md`` describes (computegraph-rs has
     ``src/interner.rs`` since 76aeccc, but no transform uses it).
   * ``"memo"`` - a middle way (as in SymbolicUtils.jl PR #1052): structural ``==`` with
     the identity shortcut and a memo of the pairs of nodes already compared in this one
     comparison.  Each comparison is linear in the size of the DAG, not exponential.

2. **Eager values** (:class:`Value`): a NumPy array, its key, and the operation that made
   it.  Arithmetic, ``exp``, ``log``, ``sqrt``, ``reshape``, ``transpose``, ``einsum``,
   ``norm`` and the truncated ``svd`` compute at once (eager) and record the graph.

3. **The transform** (:func:`vjp`) builds a *derivative program* (a list of instructions,
   :class:`Derivative`) and does not run it.  Like the real pipeline (computegraph
   ``materialize.rs`` / ``resolve.rs``, tidu-rs ``linearize.rs`` / ``linear_transpose.rs``,
   tenferro-rs ``crates/tenferro-ad``), every table in it is a hash map keyed by value key:

   a. the eager runtime's *value table*: key of each traced value -> its array;
   b. *materialise*: the primal graph is rebuilt into a fresh graph with **fresh keys**
      (a copy; deduplicated by key, i.e. common-subexpression elimination);
   c. the *residuals* each pullback needs are fetched from the value table **by the copy's
      keys** - this is where two independently built keys meet and are compared;
   d. the *cotangent environment* (key -> cotangent) and the derivative program's CSE
      table (key -> instruction) drive the reverse sweep.

   What is a model and what is known: the key representation, O(1) fingerprint hash and
   unmemoised recursive equality follow computegraph-rs c20e891; the hash maps keyed by
   value key follow the files named above.  *Which* code path of tenferro-rs 0.8.0 builds
   the second, independent copy of the key DAG is not confirmed (see
   ``../shared/notes/root-cause-facts.md``); step b is this engine's stand-in for it.  The
   model reproduces the measured signature: per-layer cost ratio = fan-out, derivative
   program linear, execution in milliseconds.

4. **A deterministic cost counter** (:data:`COUNTER`): every ``hash`` of a key, every node
   pair visited by ``==`` and every interning lookup adds one *key visit*.  A transform
   reports the exact number, so the exponential shape shows without timing noise.

The one reverse rule that is not a line of arithmetic, the truncated SVD's, is
:func:`trgad.svd.svd_pullback`, called with ``numpy`` - the same function the JAX TRG uses.
"""
from __future__ import annotations

import itertools
import string
import time

import numpy as np

from .svd import svd_pullback
from .validate import InputError, check_choice

#: Key strategies: the failing design, the fix, and the memoised comparison.
STRATEGIES = ("structural", "interned", "memo")


# ----------------------------------------------------------------------------------------
# 1. Keys and the cost counter
# ----------------------------------------------------------------------------------------

class Counter:
    """Key visits: one per ``hash``, per node pair compared by ``==``, per interning lookup."""

    def __init__(self):
        self.visits = 0


#: The global counter; :func:`vjp` resets it and reports how far it moved.
COUNTER = Counter()

_fresh_ids = itertools.count()


class Key:
    """Identity of a value: ``(prim, params, inputs, slot)``; a leaf has ``prim`` "input"/"const".

    ``inputs`` is a tuple of keys (so a key is a DAG of keys), ``params`` a hashable tuple,
    ``slot`` the output index (0, 1, 2 for the SVD's U, s, Vh).  ``fingerprint`` is computed
    once, from the inputs' fingerprints, so ``hash`` is O(1).  Subclasses define ``==``.
    """

    __slots__ = ("prim", "params", "inputs", "slot", "fingerprint")
    strategy = "?"

    def __init__(self, prim, params, inputs, slot):
        self.prim, self.params, self.inputs, self.slot = prim, params, inputs, slot
        self.fingerprint = hash((prim, params, slot, tuple(k.fingerprint for k in inputs)))

    def __hash__(self):
        COUNTER.visits += 1
        return self.fingerprint

    def __repr__(self):
        return f"{type(self).__name__}({self.prim}, slot={self.slot}, {len(self.inputs)} inputs)"

    def _same_node(self, other):
        """Everything but the inputs is equal (one node of the comparison)."""
        return (self.prim == other.prim and self.params == other.params
                and self.slot == other.slot and len(self.inputs) == len(other.inputs))


class StructuralKey(Key):
    """The failing key (computegraph-rs c20e891): O(1) hash, recursive unmemoised ``==``."""

    __slots__ = ()
    strategy = "structural"
    __hash__ = Key.__hash__      # defining __eq__ would otherwise remove it

    def __eq__(self, other):
        COUNTER.visits += 1
        if self is other:                      # Arc::ptr_eq shortcut
            return True
        if not self._same_node(other):
            return False
        for a, b in zip(self.inputs, other.inputs):   # recursion into every input, no memo
            if not a == b:
                return False
        return True


class MemoKey(Key):
    """Structural ``==`` with the identity shortcut and a memo of compared node pairs."""

    __slots__ = ()
    strategy = "memo"
    __hash__ = Key.__hash__

    def __eq__(self, other):
        return _memo_eq(self, other, {})


def _memo_eq(a, b, memo):
    COUNTER.visits += 1
    if a is b:
        return True
    pair = (id(a), id(b))
    if pair not in memo:
        memo[pair] = a._same_node(b) and all(_memo_eq(x, y, memo) for x, y in zip(a.inputs, b.inputs))
    return memo[pair]


class InternedKey(Key):
    """Hash-consed key: one object and one int ``id`` per distinct structure; ``==`` is O(1)."""

    __slots__ = ("id",)
    strategy = "interned"
    __hash__ = Key.__hash__

    def __eq__(self, other):
        COUNTER.visits += 1
        return self.id == other.id


#: The interning table: (prim, params, input ids, slot) -> the one key with that structure.
_INTERNED: dict = {}


def make_key(strategy, prim, params=(), inputs=(), slot=0):
    """The key of ``prim(*inputs)[slot]`` under ``strategy``.

    ``structural`` and ``memo`` build a new object every time (so two builds of the same
    structure are equal but not identical); ``interned`` returns the existing object if this
    structure was seen before (one interning lookup, counted as one key visit).
    """
    inputs = tuple(inputs)
    if strategy == "structural":
        return StructuralKey(prim, params, inputs, slot)
    if strategy == "memo":
        return MemoKey(prim, params, inputs, slot)
    COUNTER.visits += 1
    signature = (prim, params, slot, tuple(k.id for k in inputs))
    key = _INTERNED.get(signature)
    if key is None:
        key = InternedKey(prim, params, inputs, slot)
        key.id = len(_INTERNED)
        _INTERNED[signature] = key
    return key


def fresh_leaf_key(strategy, prim="input"):
    """A key that is equal to no other: a new leaf (an input, or a constant)."""
    return make_key(strategy, prim, (next(_fresh_ids),))


def rebuild_key(key):
    """An independent copy of ``key``'s DAG: structurally equal, sharing no objects.

    Sharing *inside* the copy is kept (each node is rebuilt once), exactly as a
    materialiser rebuilds a graph.  For interned keys the "copy" is the same object.
    """
    copies = {}
    for node in _postorder(key):
        copies[id(node)] = make_key(node.strategy, node.prim, node.params,
                                    [copies[id(i)] for i in node.inputs], node.slot)
    return copies[id(key)]


def _postorder(key):
    """Distinct nodes of a key DAG, inputs before users (by object identity)."""
    return _topological([key], lambda node: reversed(node.inputs))


def _topological(roots, children):
    """Distinct nodes reachable from ``roots``, children before parents (by object identity)."""
    seen, order, stack = set(), [], [(r, False) for r in roots]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children(node) if id(c) not in seen)
    return order


def tree_size(key):
    """Nodes of ``key`` unfolded into a tree = node pairs a structural ``==`` visits when it
    compares ``key`` with an independent equal copy.  Exact (Python int), computed on the
    DAG in linear time, so it can be evaluated where the comparison itself never finishes."""
    size = {}
    for node in _postorder(key):
        size[id(node)] = 1 + sum(size[id(i)] for i in node.inputs)
    return size[id(key)]


def path_count(key, target):
    """Number of distinct paths from ``key`` down to ``target`` in the key DAG (nodes matched
    by identity).  A structural comparison of ``key`` with an independent copy visits the
    subtree of ``target`` once per path; this is the "base" a fan-out produces."""
    paths = {}
    for node in _postorder(key):
        paths[id(node)] = 1 if node is target else sum(paths[id(i)] for i in node.inputs)
    return paths[id(key)]


def dag_size(key):
    """Distinct nodes of ``key``'s DAG (by object identity)."""
    return len(_postorder(key))


def count_visits(fn):
    """``(fn(), key visits during the call)``."""
    start = COUNTER.visits
    result = fn()
    return result, COUNTER.visits - start


# ----------------------------------------------------------------------------------------
# 2. Eager values
# ----------------------------------------------------------------------------------------

def _einsum(spec, *xs):
    return np.einsum(spec, *xs, optimize=len(xs) > 2)


def _svd(M, k):
    U, s, Vh = np.linalg.svd(M, full_matrices=False)
    return U[:, :k], s[:k], Vh[:k, :]


def _sum_to(x, shape):
    """Sum a broadcast result back to ``shape`` (the cotangent of a broadcast)."""
    extra = x.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n == 1 and x.shape[extra + i] != 1)
    return np.sum(x, axis=axes).reshape(shape) if axes else x.reshape(shape)


#: NumPy implementation of every primitive, for the eager forward pass and for running a
#: derivative program: ``IMPL[prim](params, *arrays)``.
IMPL = {
    "add": lambda p, a, b: a + b,
    "sub": lambda p, a, b: a - b,
    "mul": lambda p, a, b: a * b,
    "div": lambda p, a, b: a / b,
    "neg": lambda p, a: -a,
    "exp": lambda p, a: np.exp(a),
    "expm1": lambda p, a: np.expm1(a),
    "log": lambda p, a: np.log(a),
    "sqrt": lambda p, a: np.sqrt(a),
    "reshape": lambda p, a: np.reshape(a, p[0]),
    "transpose": lambda p, a: np.transpose(a, p[0]),
    "einsum": lambda p, *xs: _einsum(p[0], *xs),
    "norm": lambda p, a: np.sqrt(np.sum(a * a)),
    "svd": lambda p, a: _svd(a, p[0]),
    "sum_to": lambda p, a: _sum_to(a, p[0]),
    "svd_pullback": lambda p, *xs: svd_pullback(np, *xs),
}


class Op:
    """One primitive application in the eager trace: ``prim(*inputs; params)``."""

    __slots__ = ("prim", "params", "inputs", "outputs")

    def __init__(self, prim, params, inputs):
        self.prim, self.params, self.inputs, self.outputs = prim, params, inputs, []


class Value:
    """An eager value: ``data`` (NumPy float64 array), ``key``, and the ``op`` that made it.

    Leaves (from :func:`leaf` or constants) have ``op = None``.  ``slot`` is the output
    index within ``op``.  Supports ``+ - * /`` with other values, Python numbers and arrays
    (NumPy broadcasting, both operand orders) and unary ``-``.
    """

    __slots__ = ("data", "key", "op", "slot")
    __array_ufunc__ = None          # numpy scalars and arrays defer to our operators

    def __init__(self, data, key, op=None, slot=0):
        self.data, self.key, self.op, self.slot = data, key, op, slot

    @property
    def shape(self):
        return self.data.shape

    @property
    def strategy(self):
        return self.key.strategy

    def __repr__(self):
        return f"Value(shape={self.shape}, keys={self.strategy})"

    def __add__(self, other): return apply("add", (), self, other)
    def __radd__(self, other): return apply("add", (), other, self)
    def __sub__(self, other): return apply("sub", (), self, other)
    def __rsub__(self, other): return apply("sub", (), other, self)
    def __mul__(self, other): return apply("mul", (), self, other)
    def __rmul__(self, other): return apply("mul", (), other, self)
    def __truediv__(self, other): return apply("div", (), self, other)
    def __rtruediv__(self, other): return apply("div", (), other, self)
    def __neg__(self): return apply("neg", (), self)


def leaf(x, keys="structural"):
    """A differentiable input: a float or array (converted to float64) with a fresh key.

    Parameters: ``x`` array-like; ``keys`` one of :data:`STRATEGIES`.
    Returns a :class:`Value` of ``x``'s shape.  Raises InputError for an unknown strategy or
    a non-numeric ``x``.
    """
    check_choice("keys", keys, STRATEGIES)
    return Value(_as_array(x), fresh_leaf_key(keys, "input"))


def constant(x, keys="structural"):
    """A constant (never differentiated): like :func:`leaf`, with a key of kind "const"."""
    return Value(_as_array(x), fresh_leaf_key(keys, "const"))


def _as_array(x):
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"value={x!r} is not a number or an array of numbers") from None


def apply(prim, params, *args):
    """Run ``prim`` eagerly on ``args`` (Values or constants) and record it.

    Returns one :class:`Value`, or a tuple for the SVD (three outputs, slots 0, 1, 2).
    """
    strategy = next(a.strategy for a in args if isinstance(a, Value))
    inputs = tuple(a if isinstance(a, Value) else constant(a, strategy) for a in args)
    if any(v.strategy != strategy for v in inputs):
        raise InputError("values with different key strategies cannot be combined")
    result = IMPL[prim](params, *(v.data for v in inputs))
    op = Op(prim, params, inputs)
    keys_in = [v.key for v in inputs]
    outs = result if isinstance(result, tuple) else (result,)
    for slot, data in enumerate(outs):
        key = make_key(strategy, prim, params, keys_in, slot)
        op.outputs.append(Value(np.asarray(data, dtype=np.float64), key, op, slot))
    return tuple(op.outputs) if isinstance(result, tuple) else op.outputs[0]


def exp(x): return apply("exp", (), x)
def log(x): return apply("log", (), x)
def sqrt(x): return apply("sqrt", (), x)
def reshape(x, shape): return apply("reshape", (tuple(int(n) for n in shape),), x)
def transpose(x, perm): return apply("transpose", (tuple(int(p) for p in perm),), x)
def einsum(spec, *xs): return apply("einsum", (spec.replace(" ", ""),), *xs)
def norm(x): return apply("norm", (), x)


def svd(M, k):
    """Truncated SVD of an (m, n) value: (U (m, k), s (k,), Vh (k, n)), k largest values."""
    k = int(k)
    if not 1 <= k <= min(M.shape):
        raise InputError(f"k={k} is out of range: k must be in [1, {min(M.shape)}] for a {M.shape} matrix")
    return apply("svd", (k,), M)


class KeyedOps:
    """Array namespace for :mod:`trgad.trg` that builds this engine's graph.

    ``trg.lnz_per_site(leaf(beta, keys), schedule, ops=KeyedOps(keys))`` runs the very same
    TRG code as the JAX back end.  Attributes: ``name``, ``exp``, ``log``, ``sqrt``,
    ``reshape``, ``transpose``, ``einsum``, ``norm``, ``svd(M, k)``, ``constant``.
    """

    def __init__(self, keys="structural"):
        self.keys = check_choice("keys", keys, STRATEGIES)
        self.name = f"keyed-{keys}"
        self.exp, self.log, self.sqrt = exp, log, sqrt
        self.expm1 = lambda x: apply("expm1", (), x)
        self.reshape, self.transpose, self.einsum = reshape, transpose, einsum
        self.norm, self.svd = norm, svd

    def constant(self, x):
        return constant(x, self.keys)


# ----------------------------------------------------------------------------------------
# 3. Reverse rules: each emits instructions of the derivative program
# ----------------------------------------------------------------------------------------

class Reg:
    """A register of the derivative program: its key (for CSE) and its shape."""

    __slots__ = ("index", "key", "shape")

    def __init__(self, index, key, shape):
        self.index, self.key, self.shape = index, key, tuple(shape)


class Emitter:
    """Builds the derivative program; identical instructions are emitted once (CSE by key)."""

    def __init__(self, strategy):
        self.strategy = strategy
        self.instructions = []     # (prim, params, arg register indices, out register index)
        self.inputs = []           # (register index, array): residuals and constants
        self.n_regs = 0
        self.cse = {}              # instruction key -> Reg

    def _new(self, key, shape):
        reg = Reg(self.n_regs, key, shape)
        self.n_regs += 1
        return reg

    def load(self, key, array):
        """A register holding a known array (a residual under its key, or a constant)."""
        reg = self._new(key, np.shape(array))
        self.inputs.append((reg.index, array))
        return reg

    def const(self, array):
        return self.load(fresh_leaf_key(self.strategy, "const"), np.asarray(array, dtype=np.float64))

    def emit(self, prim, params, args, shape):
        key = make_key(self.strategy, prim, params, [a.key for a in args])
        reg = self.cse.get(key)
        if reg is None:
            reg = self._new(key, shape)
            self.instructions.append((prim, params, tuple(a.index for a in args), reg.index))
            self.cse[key] = reg
        return reg

    def prune(self, out):
        """Dead-code elimination: keep only what the register ``out`` depends on.

        The rules emit a cotangent for every input; those of constants are never used.
        """
        live = set() if out is None else {out.index}
        kept = []
        for instr in reversed(self.instructions):
            if instr[3] in live:
                kept.append(instr)
                live.update(instr[2])
        self.instructions = kept[::-1]
        self.inputs = [(i, a) for i, a in self.inputs if i in live]

    # shorthands used by the rules
    def mul(self, a, b): return self.emit("mul", (), (a, b), np.broadcast_shapes(a.shape, b.shape))
    def div(self, a, b): return self.emit("div", (), (a, b), np.broadcast_shapes(a.shape, b.shape))
    def add(self, a, b): return self.emit("add", (), (a, b), np.broadcast_shapes(a.shape, b.shape))
    def neg(self, a): return self.emit("neg", (), (a,), a.shape)

    def sum_to(self, a, shape):
        shape = tuple(shape)
        return a if a.shape == shape else self.emit("sum_to", (shape,), (a,), shape)


def _rule_add(E, params, ins, outs, ct):
    return [E.sum_to(ct, ins[0].shape), E.sum_to(ct, ins[1].shape)]


def _rule_sub(E, params, ins, outs, ct):
    return [E.sum_to(ct, ins[0].shape), E.sum_to(E.neg(ct), ins[1].shape)]


def _rule_mul(E, params, ins, outs, ct):
    a, b = ins
    return [E.sum_to(E.mul(ct, b), a.shape), E.sum_to(E.mul(ct, a), b.shape)]


def _rule_div(E, params, ins, outs, ct):
    a, b = ins                                   # out = a / b; d out / d b = -out / b
    ct_a = E.div(ct, b)
    return [E.sum_to(ct_a, a.shape), E.sum_to(E.neg(E.mul(ct_a, outs[0])), b.shape)]


def _rule_neg(E, params, ins, outs, ct):
    return [E.neg(ct)]


def _rule_exp(E, params, ins, outs, ct):
    return [E.mul(ct, outs[0])]


def _rule_expm1(E, params, ins, outs, ct):
    return [E.mul(ct, E.add(outs[0], E.const(1.0)))]     # d expm1(x) = (expm1(x) + 1) dx


def _rule_log(E, params, ins, outs, ct):
    return [E.div(ct, ins[0])]


def _rule_sqrt(E, params, ins, outs, ct):
    return [E.div(ct, E.mul(E.const(2.0), outs[0]))]


def _rule_norm(E, params, ins, outs, ct):
    return [E.mul(ct, E.div(ins[0], outs[0]))]


def _rule_reshape(E, params, ins, outs, ct):
    shape = ins[0].shape
    return [E.emit("reshape", (shape,), (ct,), shape)]


def _rule_transpose(E, params, ins, outs, ct):
    inverse = tuple(int(i) for i in np.argsort(params[0]))
    return [E.emit("transpose", (inverse,), (ct,), ins[0].shape)]


def _rule_einsum(E, params, ins, outs, ct):
    """Operand i's cotangent: contract the output cotangent with all other operands.

    A letter repeated inside operand i (a trace, "abab->") is renamed and tied back with an
    identity matrix; a letter that appears only in operand i is restored with a ones vector.
    """
    lhs, out_spec = params[0].split("->")
    specs = lhs.split(",")
    spare = iter(c for c in string.ascii_letters if c not in params[0])
    dims = {c: n for s, x in zip(specs, ins) for c, n in zip(s, x.shape)}
    cts = []
    for i, target in enumerate(specs):
        terms = [(out_spec, ct)] + [(s, x) for j, (s, x) in enumerate(zip(specs, ins)) if j != i]
        seen, new_target = set(), ""
        for c in target:
            if c in seen:                    # repeated letter: new name, tied by an identity
                d = next(spare)
                terms.append((c + d, E.const(np.eye(dims[c]))))
                c = d
            seen.add(c)
            new_target += c
        present = set("".join(s for s, _ in terms))
        for c in sorted(set(target) - present):
            terms.append((c, E.const(np.ones(dims[c]))))
        spec = ",".join(s for s, _ in terms) + "->" + new_target
        cts.append(E.emit("einsum", (spec,), [x for _, x in terms], ins[i].shape))
    return cts


def _rule_svd(E, params, ins, outs, cts):
    """All three output cotangents at once, through :func:`trgad.svd.svd_pullback`."""
    cts = [c if c is not None else E.const(np.zeros(o.shape)) for c, o in zip(cts, outs)]
    return [E.emit("svd_pullback", (), (ins[0], *outs, *cts), ins[0].shape)]


RULES = {
    "add": _rule_add, "sub": _rule_sub, "mul": _rule_mul, "div": _rule_div, "neg": _rule_neg,
    "exp": _rule_exp, "expm1": _rule_expm1, "log": _rule_log, "sqrt": _rule_sqrt, "norm": _rule_norm,
    "reshape": _rule_reshape, "transpose": _rule_transpose, "einsum": _rule_einsum,
    "svd": _rule_svd,
}
MULTI_OUTPUT = {"svd"}


# ----------------------------------------------------------------------------------------
# 4. The transform
# ----------------------------------------------------------------------------------------

class Derivative:
    """A derivative program built by :func:`vjp`, not yet run.

    Attributes
    ----------
    transform_seconds : float, wall time of the transform (building this program).
    key_visits : int, exact key visits the transform made (see :data:`COUNTER`).
    derivative_ops : int, instructions in the program (its size).
    primal_ops : int, operations of the primal graph the transform saw.
    run_seconds : float or None, wall time of the last :meth:`run`.
    free_seconds : float or None, wall time of :meth:`free` (dropping the program, its
        residuals and the transform's copy of the graph).
    """

    def __init__(self, emitter, out_reg, wrt_shape, primal_ops):
        emitter.prune(out_reg)
        self._emitter = emitter
        self._out = out_reg
        self._wrt_shape = wrt_shape
        self.derivative_ops = len(emitter.instructions)
        self.primal_ops = primal_ops
        self.transform_seconds = 0.0
        self.key_visits = 0
        self.run_seconds = None
        self.free_seconds = None

    @property
    def program(self):
        """The instructions as comparable tuples ``(prim, params, arg registers, out register)``."""
        return list(self._emitter.instructions)

    def run(self):
        """Execute the program; returns the gradient (NumPy array of ``wrt``'s shape)."""
        if self._emitter is None:
            raise InputError("this derivative program was freed; run the transform again")
        t0 = time.perf_counter()
        regs = [None] * self._emitter.n_regs
        for index, array in self._emitter.inputs:
            regs[index] = array
        for prim, params, args, out in self._emitter.instructions:
            regs[out] = IMPL[prim](params, *(regs[a] for a in args))
        grad = np.zeros(self._wrt_shape) if self._out is None else np.broadcast_to(regs[self._out.index], self._wrt_shape).copy()
        self.run_seconds = time.perf_counter() - t0
        return grad

    def free(self):
        """Drop the program and everything the transform built; time it (``free_seconds``)."""
        t0 = time.perf_counter()
        self._emitter = None
        self._out = None
        self.free_seconds = time.perf_counter() - t0
        return self.free_seconds


def _trace(outputs):
    """Ops reachable from ``outputs`` in the user's eager trace, inputs first (by identity)."""
    return _topological([v.op for v in outputs if v.op is not None],
                        lambda op: [v.op for v in op.inputs if v.op is not None])


def _leaves(ops, outputs):
    found = {}
    for v in [*outputs, *(i for op in ops for i in op.inputs)]:
        if v.op is None:
            found[id(v)] = v
    return list(found.values())


def vjp(outputs, wrt, cotangents):
    """Reverse-mode transform: a program for sum_i <cotangents[i], d outputs[i] / d wrt>.

    Parameters
    ----------
    outputs : list of :class:`Value` (one key strategy for all).
    wrt : :class:`Value`, a leaf made by :func:`leaf` (a list holding one such leaf is
        accepted too).
    cotangents : list, one float or array per output, broadcastable to its shape.

    Returns
    -------
    :class:`Derivative`; ``.run()`` gives the gradient with ``wrt``'s shape.  Transform time,
    exact key visits and program size are recorded on it.

    Raises
    ------
    InputError for an empty or mismatched ``outputs`` / ``cotangents``, a ``wrt`` that is not
    a leaf, or mixed key strategies.
    """
    outputs = list(outputs)
    cotangents = list(cotangents)
    if isinstance(wrt, (list, tuple)):
        if len(wrt) != 1:
            raise InputError(f"wrt has {len(wrt)} entries: give one leaf (one gradient per transform)")
        wrt = wrt[0]
    if not outputs or len(outputs) != len(cotangents):
        raise InputError(f"outputs ({len(outputs)}) and cotangents ({len(cotangents)}) must be non-empty lists of equal length")
    if not all(isinstance(v, Value) for v in [*outputs, wrt]):
        raise InputError("outputs and wrt must be engine values (trgad.engine.Value)")
    if wrt.op is not None or wrt.key.prim != "input":
        raise InputError("wrt must be a leaf made by trgad.engine.leaf")
    strategy = wrt.strategy
    if any(v.strategy != strategy for v in outputs):
        raise InputError("outputs and wrt use different key strategies")

    start_visits = COUNTER.visits
    t0 = time.perf_counter()
    user_ops = _trace(outputs)

    # a. The eager runtime's value table: user key -> array.
    table = {}
    leaves = _leaves(user_ops, [*outputs, wrt])
    for v in leaves:
        table[v.key] = v.data
    for op in user_ops:
        for v in op.outputs:
            table[v.key] = v.data

    # b. Materialise: rebuild the graph with fresh keys (deduplicated by key).
    copy_of = {}       # user key -> copy key (same objects on both sides: cheap lookups)
    nodes = {}         # copy key -> copy key (the dedup / CSE table of the copy)
    ops = []           # (prim, params, input copy keys, output copy keys)
    for v in leaves:
        k = make_key(strategy, v.key.prim, v.key.params)
        copy_of[v.key] = nodes.setdefault(k, k)
    for op in user_ops:
        ins = [copy_of[v.key] for v in op.inputs]
        outs = []
        for v in op.outputs:
            k = make_key(strategy, op.prim, op.params, ins, v.slot)
            k = nodes.setdefault(k, k)
            copy_of[v.key] = k
            outs.append(k)
        ops.append((op.prim, op.params, ins, outs))
    wrt_copy = copy_of[wrt.key]

    # Which copy values depend on wrt (only those get cotangents).
    active = {wrt_copy}
    for prim, params, ins, outs in ops:
        if any(k in active for k in ins):
            active.update(outs)

    # c. Residuals: every value of the copy is fetched from the value table by its key.
    E = Emitter(strategy)
    residual = {}
    for k in nodes:
        residual[k] = E.load(k, table[k])

    # d. Reverse sweep: cotangent environment keyed by value key.
    ct_env = {}

    def accumulate(k, reg):
        old = ct_env.get(k)
        ct_env[k] = reg if old is None else E.add(old, reg)

    for v, c in zip(outputs, cotangents):
        k = copy_of[v.key]
        if k in active:
            accumulate(k, E.const(np.broadcast_to(np.asarray(c, dtype=np.float64), v.shape).copy()))
    for prim, params, ins, outs in reversed(ops):
        cts = [ct_env.get(k) for k in outs]
        if all(c is None for c in cts):
            continue
        in_regs = [residual[k] for k in ins]
        out_regs = [residual[k] for k in outs]
        rule = RULES[prim]
        in_cts = rule(E, params, in_regs, out_regs, cts if prim in MULTI_OUTPUT else cts[0])
        for k, c in zip(ins, in_cts):
            if k in active:
                accumulate(k, c)

    d = Derivative(E, ct_env.get(wrt_copy), wrt.shape, primal_ops=len(user_ops))
    d.transform_seconds = time.perf_counter() - t0
    d.key_visits = COUNTER.visits - start_visits
    return d


def grad(y, x):
    """``vjp([y], x, [1.0])`` for a scalar ``y``: the program for dy/dx."""
    return vjp([y], x, [1.0])


# ----------------------------------------------------------------------------------------
# 5. The whole-graph TRG on this engine
# ----------------------------------------------------------------------------------------

def trg_whole(beta, schedule, keys="structural"):
    """lnZ/N and u = -d(lnZ/N)/d beta, differentiating the whole TRG graph on this engine.

    Parameters: ``beta`` > 0 (1/J); ``schedule`` list of ints, ks[i] kept at step i (from
    :func:`trgad.trg.truncation_schedule`); ``keys`` one of :data:`STRATEGIES`.

    Returns a dict: ``lnz_per_site``, ``u``, ``forward_seconds`` (eager forward pass),
    ``transform_seconds``, ``key_visits``, ``derivative_ops``, ``primal_ops``,
    ``run_seconds``, ``free_seconds`` (seconds; counts are ints).

    Raises InputError for a bad beta, an empty schedule or an unknown ``keys``.  With
    structural keys the transform is exponential in the number of steps: cap it
    (:func:`trgad.timing.capped_sweep`, :func:`trgad.timing.run_with_timeout`).
    """
    from . import trg
    from .validate import check_beta, check_int

    beta = check_beta(beta)
    keys = check_choice("keys", keys, STRATEGIES)
    schedule = [check_int("k", k, 1) for k in schedule]
    if not schedule:
        raise InputError("schedule=[] is out of range: at least one TRG step is needed")
    t0 = time.perf_counter()
    b = leaf(beta, keys)
    lnz = trg.lnz_per_site(b, schedule, ops=KeyedOps(keys))
    forward = time.perf_counter() - t0
    d = grad(lnz, b)
    g = float(d.run())
    d.free()
    return {
        "lnz_per_site": float(lnz.data), "u": -g, "forward_seconds": forward,
        "transform_seconds": d.transform_seconds, "key_visits": d.key_visits,
        "derivative_ops": d.derivative_ops, "primal_ops": d.primal_ops,
        "run_seconds": d.run_seconds, "free_seconds": d.free_seconds,
    }
