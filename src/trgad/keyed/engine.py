"""A small keyed graph engine whose reverse-mode transform fails the way tenferro-rs 0.8.0's does.

The engine rebuilds the part of tenferro-rs that matters, small enough to read and to count:
values whose identity is a key, and transforms that find values by key.  The book's
root-cause chapter (``book/rootcause.md``) builds its smallest version and counts the library
itself (:func:`trgad.harness.tenferro.count`); this is the map.

Around this module: :mod:`trgad.keyed.keys` (keys, their three strategies, the key-visit
counter), :mod:`trgad.keyed.rules` (each primitive's NumPy implementation, reverse rule and
tangent rule) and :mod:`trgad.keyed.program` (the emitter the rules call, derivative programs).
This module has two parts:

1. **Eager values** (:class:`Value`): a NumPy array, its key, and the operation that made
   it.  Arithmetic, ``exp``, ``expm1``, ``log``, ``sqrt``, ``reshape``, ``transpose``,
   ``einsum``, ``norm`` and the truncated ``svd`` compute at once and record the graph.
2. **The transforms.**  :func:`vjp` (reverse mode) and :func:`jvp` (forward mode, graph to
   graph) build a derivative program and do not run it.  They share their steps, one
   function each, every table keyed by value key:

   a. :func:`~trgad.keyed.sweeps.value_table` - the table from the key of each traced value to its array (in
      tenferro-rs 0.8.0: the process-wide metadata registry, where tracing registered each
      value's key);
   b. :func:`~trgad.keyed.sweeps.materialise` - the graph rebuilt with **fresh keys** (deduplicated by key; in
      tenferro-rs: tenferro-ad's ``derivative_traces_from_frozen_program`` rebuilding the
      derivative graph through computegraph's ``GraphBuilder::add_operation``, a new
      ``Arc<OperationKey>`` per operation);
   c. :func:`~trgad.keyed.sweeps.fetch_residuals` - every value of the copy looked up in the table **by the
      copy's key**: two independently built, equal keys meet and are compared (in
      tenferro-rs: ``register_scoped_global_metadata_batch``'s ``entry(key)``, and again
      when the gradient is dropped);
   d. :func:`~trgad.keyed.sweeps.reverse_sweep` (cotangent environment keyed by value key) or
      :func:`~trgad.keyed.sweeps.forward_sweep` (tangent environment keyed by value key).

   A transform's :class:`Derivative` counts its key visits by step (``step_visits``).

   :func:`jvp_eager` is forward mode without keys: tangents follow the recorded trace by
   object identity, like dual numbers.

Confirmed by counting the library (callgrind, book/maintainers.md): on the mul chain, step c
and the library's registry walk the same trees, base the fan-out, in the same closed form
A K^D + B D + C; the engine's copy holds every value, the library's derivative graph only the
primal values it recomputes, so its leading constant A is half the engine's.
"""
from __future__ import annotations

import time
from functools import partial

import numpy as np

from .keys import COUNTER, STRATEGIES, count_visits, fresh_leaf_key, make_key, topological
from .program import Derivative, Eager, Emitter, Tangents
from .rules import IMPL, JVP_RULES
from .sweeps import fetch_residuals, forward_sweep, materialise, reverse_sweep, value_table
from ..runtime.validate import InputError, check_choice, checked


# ----------------------------------------------------------------------------------------
# 1. Eager values
# ----------------------------------------------------------------------------------------

class Op:
    """One primitive application in the eager trace: ``prim(*inputs; params)``.

    ``out_keys`` / ``out_data`` are the keys and arrays of its outputs (slot order).  The
    op holds them, not the output values, so values and ops form no reference cycle: a
    value and everything only it uses are freed as soon as it is dropped.
    """

    __slots__ = ("prim", "params", "inputs", "out_keys", "out_data")

    def __init__(self, prim, params, inputs):
        self.prim, self.params, self.inputs = prim, params, inputs
        self.out_keys, self.out_data = [], []


class Value:
    """An eager value: ``data`` (NumPy float64 array), ``key``, and the ``op`` that made it.

    Leaves (from :func:`leaf` or constants) have ``op = None``.  ``slot`` is the output
    index within ``op``.  Supports ``+ - * /`` with other values, Python numbers and arrays
    (NumPy broadcasting, both operand orders), unary ``-`` and ``abs``.
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
    def __abs__(self): return apply("abs", (), self)


@checked(keys=partial(check_choice, "keys", allowed=STRATEGIES))
def leaf(x, keys="structural"):
    """A differentiable input: a float or array (converted to float64) with a fresh key.

    Parameters: ``x`` array-like; ``keys`` one of :data:`trgad.keyed.keys.STRATEGIES`.
    Returns a :class:`Value` of ``x``'s shape.  Raises InputError for an unknown strategy or
    a non-numeric ``x``.
    """
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
    outs = []
    for slot, data in enumerate(result if isinstance(result, tuple) else (result,)):
        key = make_key(strategy, prim, params, keys_in, slot)
        data = np.asarray(data, dtype=np.float64)
        op.out_keys.append(key)
        op.out_data.append(data)
        outs.append(Value(data, key, op, slot))
    return tuple(outs) if isinstance(result, tuple) else outs[0]


def exp(x): return apply("exp", (), x)
def expm1(x): return apply("expm1", (), x)
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


# ----------------------------------------------------------------------------------------
# 2. The transforms
# ----------------------------------------------------------------------------------------

def trace(outputs):
    """Ops reachable from ``outputs`` in the user's eager trace, inputs first (by identity)."""
    return topological([v.op for v in outputs if v.op is not None],
                       lambda op: [v.op for v in op.inputs if v.op is not None])


def _leaves(ops, outputs):
    found = {}
    for v in [*outputs, *(i for op in ops for i in op.inputs)]:
        if v.op is None:
            found[id(v)] = v
    return list(found.values())


def _check(outputs, wrt):
    """The checks every transform makes; returns (outputs as a list, the one leaf)."""
    outputs = list(outputs)
    if isinstance(wrt, (list, tuple)):
        if len(wrt) != 1:
            raise InputError(f"wrt has {len(wrt)} entries: give one leaf (one derivative per transform)")
        wrt = wrt[0]
    if not outputs:
        raise InputError("outputs=[] is empty: give at least one engine value")
    if not all(isinstance(v, Value) for v in [*outputs, wrt]):
        raise InputError("outputs and wrt must be engine values (trgad.keyed.engine.Value)")
    if wrt.op is not None or wrt.key.prim != "input":
        raise InputError("wrt must be a leaf made by trgad.keyed.engine.leaf")
    if any(v.strategy != wrt.strategy for v in outputs):
        raise InputError("outputs and wrt use different key strategies")
    return outputs, wrt


def prepare_transform(outputs, wrt, visits):
    """Steps a, b and c, shared by both keyed transforms (:func:`vjp`, :func:`jvp`).

    ``outputs``: list of :class:`Value`; ``wrt``: a leaf :class:`Value`; ``visits``: a dict
    that receives each step's key visits under "value_table", "materialise" and
    "fetch_residuals" (tracing and finding the leaves go by object identity: no key is
    visited).  Returns (user_ops, copy_of, ops, emitter, residual): the user's traced ops,
    the map user key -> copy key, the copy's ops in topological order, the
    :class:`trgad.keyed.program.Emitter` of the derivative program and its registers of the
    residuals, keyed by copy key; step d (:func:`~trgad.keyed.sweeps.reverse_sweep` or :func:`~trgad.keyed.sweeps.forward_sweep`)
    takes them from there."""
    user_ops = trace(outputs)
    leaves = _leaves(user_ops, [*outputs, wrt])
    table, visits["value_table"] = count_visits(lambda: value_table(leaves, user_ops))
    (copy_of, nodes, ops), visits["materialise"] = count_visits(
        lambda: materialise(wrt.strategy, leaves, user_ops))
    em = Emitter(wrt.strategy)
    residual, visits["fetch_residuals"] = count_visits(lambda: fetch_residuals(em, nodes, table))
    return user_ops, copy_of, ops, em, residual


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
    outputs, wrt = _check(outputs, wrt)
    cotangents = list(cotangents)
    if len(outputs) != len(cotangents):
        raise InputError(f"outputs ({len(outputs)}) and cotangents ({len(cotangents)}) must be lists of equal length")
    start_visits, t0 = COUNTER.visits, time.perf_counter()
    visits = {}
    user_ops, copy_of, ops, em, residual = prepare_transform(outputs, wrt, visits)
    start_sweep = COUNTER.visits
    seeds = [(copy_of[v.key], _broadcast("cotangent", c, v.shape)) for v, c in zip(outputs, cotangents)]
    wrt_key = copy_of[wrt.key]
    gradient = reverse_sweep(em, ops, residual, wrt_key, seeds).get(wrt_key)
    visits["reverse_sweep"] = COUNTER.visits - start_sweep
    d = Derivative(em, [(gradient, wrt.shape)], len(user_ops), single=True)
    d.transform_seconds = time.perf_counter() - t0
    d.key_visits = COUNTER.visits - start_visits
    d.step_visits = visits
    return d


def grad(y, x):
    """``vjp([y], x, [1.0])`` for a scalar ``y``: the program for dy/dx."""
    return vjp([y], x, [1.0])


def _broadcast(name, x, shape):
    """``x`` as a float64 array of ``shape`` (a cotangent or tangent seed); InputError if it
    is not numeric or does not broadcast to ``shape``."""
    try:
        return np.broadcast_to(np.asarray(x, dtype=np.float64), shape).copy()
    except (TypeError, ValueError):
        shown = f" of shape {np.shape(x)}" if hasattr(x, "shape") else f"={x!r}"
        raise InputError(f"{name}{shown} is out of range: give a number or an array that "
                         f"broadcasts to shape {shape}") from None


def jvp(outputs, wrt, tangent):
    """Forward-mode transform, graph to graph: a program for d outputs[i] / d wrt . tangent.

    Built like :func:`vjp` (value table, materialise with fresh keys, residuals fetched by
    key) with a forward sweep (:func:`~trgad.keyed.sweeps.forward_sweep`), so it pays the same key comparisons.

    Parameters: ``outputs`` list of :class:`Value`; ``wrt`` a leaf (or a list holding one);
    ``tangent`` float or array broadcastable to ``wrt``'s shape (the direction).
    Returns a :class:`Derivative`; ``.run()`` gives a list of directional derivatives, one
    array per output, of that output's shape.  Raises InputError as :func:`vjp` does.
    """
    outputs, wrt = _check(outputs, wrt)
    start_visits, t0 = COUNTER.visits, time.perf_counter()
    visits = {}
    user_ops, copy_of, ops, em, residual = prepare_transform(outputs, wrt, visits)
    start_sweep = COUNTER.visits
    t_env = forward_sweep(em, ops, residual, copy_of[wrt.key], em.const(_broadcast("tangent", tangent, wrt.shape)))
    results = [(t_env.get(copy_of[v.key]), v.shape) for v in outputs]
    visits["forward_sweep"] = COUNTER.visits - start_sweep
    d = Derivative(em, results, len(user_ops), single=False)
    d.transform_seconds = time.perf_counter() - t0
    d.key_visits = COUNTER.visits - start_visits
    d.step_visits = visits
    return d


def jvp_eager(outputs, wrt, tangent):
    """Forward mode without keys: tangents computed along the recorded trace, like dual
    numbers.  The tangent environment is keyed by object identity (``id`` of a value's key
    object, never hashed or compared), so no key is visited.

    Same parameters and errors as :func:`jvp`.  Returns :class:`Tangents` (``.run()``: one
    array per output).
    """
    outputs, wrt = _check(outputs, wrt)
    start_visits, t0 = COUNTER.visits, time.perf_counter()
    user_ops = trace(outputs)
    ev = Eager()
    t_env = {id(wrt.key): _broadcast("tangent", tangent, wrt.shape)}
    for op in user_ops:
        ts = [t_env.get(id(v.key)) for v in op.inputs]
        if all(t is None for t in ts):
            continue
        out_ts = JVP_RULES[op.prim](ev, op.params, [v.data for v in op.inputs], op.out_data, ts)
        for key, data, t in zip(op.out_keys, op.out_data, out_ts):
            t_env[id(key)] = ev.broadcast_to(t, data.shape)
    found = [t_env.get(id(v.key)) for v in outputs]
    r = Tangents([np.zeros(v.shape) if t is None else np.array(t) for v, t in zip(outputs, found)],
                 ev.ops, len(user_ops))
    r.transform_seconds = time.perf_counter() - t0
    r.key_visits = COUNTER.visits - start_visits
    return r
