"""Derivative programs of the keyed engine: how they are built and how they are run.

* :class:`Emitter` - what the rules of :mod:`trgad.keyed.rules` call while a transform runs: it
  appends instructions to a program and deduplicates identical ones by key (CSE), so with
  structural keys its table pays key comparisons too.
* :class:`Eager` - the same interface computing every operation at once on NumPy arrays
  (no keys, no program): the interpreter of :func:`trgad.keyed.engine.jvp_eager`.
* :class:`Derivative` - a program built by :func:`trgad.keyed.engine.vjp` or
  :func:`trgad.keyed.engine.jvp`, run later; :class:`Tangents` - what ``jvp_eager`` returns.
"""
from __future__ import annotations

import time

import numpy as np

from .keys import fresh_leaf_key, make_key
from .rules import IMPL
from ..runtime.validate import InputError


# ----------------------------------------------------------------------------------------
# 1. Emitters: what the rules call
# ----------------------------------------------------------------------------------------

class _Shorthands:
    """The operations the rules use, all through ``emit`` (defined by the subclass)."""

    def mul(self, a, b): return self.emit("mul", (), (a, b), np.broadcast_shapes(a.shape, b.shape))
    def div(self, a, b): return self.emit("div", (), (a, b), np.broadcast_shapes(a.shape, b.shape))
    def add(self, a, b): return self.emit("add", (), (a, b), np.broadcast_shapes(a.shape, b.shape))
    def neg(self, a): return self.emit("neg", (), (a,), a.shape)

    def sum_to(self, a, shape):
        shape = tuple(shape)
        return a if a.shape == shape else self.emit("sum_to", (shape,), (a,), shape)

    def broadcast_to(self, a, shape):
        shape = tuple(shape)
        return a if a.shape == shape else self.emit("broadcast_to", (shape,), (a,), shape)


class Reg:
    """A register of the derivative program: its key (for CSE) and its shape."""

    __slots__ = ("index", "key", "shape")

    def __init__(self, index, key, shape):
        self.index, self.key = index, key
        self.shape = None if shape is None else tuple(shape)   # None: a tuple of arrays


class Emitter(_Shorthands):
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

    def prune(self, outs):
        """Dead-code elimination: keep only what the registers ``outs`` depend on.

        The rules emit a cotangent for every input; those of constants are never used.
        """
        live = {out.index for out in outs}
        kept = []
        for instr in reversed(self.instructions):
            if instr[3] in live:
                kept.append(instr)
                live.update(instr[2])
        self.instructions = kept[::-1]
        self.inputs = [(i, a) for i, a in self.inputs if i in live]


class Eager(_Shorthands):
    """The emitter interface on NumPy arrays: every operation is computed at once, no keys.

    ``ops`` counts the operations (the size of the program it did not build).
    """

    def __init__(self):
        self.ops = 0

    def const(self, array):
        return np.asarray(array, dtype=np.float64)

    def emit(self, prim, params, args, shape):
        self.ops += 1
        return IMPL[prim](params, *args)


# ----------------------------------------------------------------------------------------
# 2. Derivative programs
# ----------------------------------------------------------------------------------------

class Derivative:
    """A derivative program built by :func:`vjp` or :func:`jvp`, not yet run.

    Attributes
    ----------
    transform_seconds : float, wall time of the transform (building this program).
    key_visits : int, exact key visits the transform made (see :data:`trgad.keyed.keys.COUNTER`).
    step_visits : dict, the same visits by step of the transform, summing to ``key_visits``:
        ``"value_table"``, ``"materialise"``, ``"fetch_residuals"`` and ``"reverse_sweep"``
        (:func:`~trgad.keyed.engine.vjp`) or ``"forward_sweep"`` (:func:`~trgad.keyed.engine.jvp`); a
        sweep's count includes looking up the outputs and ``wrt`` in the copy.
    derivative_ops : int, instructions in the program (its size).
    primal_ops : int, operations of the primal graph the transform saw.
    run_seconds : float or None, wall time of the last :meth:`run`.
    free_seconds : float or None, wall time of :meth:`free` (dropping the program, its
        residuals and the transform's copy of the graph).
    """

    def __init__(self, emitter, results, primal_ops, single):
        # results: (register or None for zero, shape) per result; single: run() returns one
        emitter.prune([reg for reg, _ in results if reg is not None])
        self._emitter = emitter
        self._results = results
        self._single = single
        self.derivative_ops = len(emitter.instructions)
        self.primal_ops = primal_ops
        self.transform_seconds = 0.0
        self.key_visits = 0
        self.step_visits = {}
        self.run_seconds = None
        self.free_seconds = None

    @property
    def program(self):
        """The instructions as comparable tuples ``(prim, params, arg registers, out register)``."""
        return list(self._emitter.instructions)

    def run(self):
        """Execute the program: the gradient (:func:`vjp`: a NumPy array of ``wrt``'s shape)
        or the tangents (:func:`jvp`: a list, one array per output, of the outputs' shapes)."""
        if self._emitter is None:
            raise InputError("this derivative program was freed; run the transform again")
        t0 = time.perf_counter()
        regs = [None] * self._emitter.n_regs
        for index, array in self._emitter.inputs:
            regs[index] = array
        for prim, params, args, out in self._emitter.instructions:
            regs[out] = IMPL[prim](params, *(regs[a] for a in args))
        values = [np.zeros(shape) if reg is None else np.broadcast_to(regs[reg.index], shape).copy()
                  for reg, shape in self._results]
        self.run_seconds = time.perf_counter() - t0
        return values[0] if self._single else values

    def free(self):
        """Drop the program and everything the transform built; time it (``free_seconds``)."""
        t0 = time.perf_counter()
        self._emitter = None
        self._results = None
        self.free_seconds = time.perf_counter() - t0
        return self.free_seconds


class Tangents:
    """What :func:`jvp_eager` returns: tangents already computed, with the fields of a
    :class:`Derivative` (``transform_seconds``, ``key_visits``, ``step_visits`` (empty: no
    steps keyed by value key), ``derivative_ops`` = tangent operations computed,
    ``primal_ops``, ``run_seconds``, ``free_seconds``).  :meth:`run`
    returns copies of the tangents (one array per output)."""

    def __init__(self, tangents, ops, primal_ops):
        self._tangents = tangents
        self.derivative_ops, self.primal_ops = ops, primal_ops
        self.transform_seconds, self.key_visits, self.step_visits = 0.0, 0, {}
        self.run_seconds = self.free_seconds = None

    def run(self):
        if self._tangents is None:
            raise InputError("these tangents were freed; run the transform again")
        self.run_seconds = 0.0
        return [t.copy() for t in self._tangents]

    def free(self):
        t0 = time.perf_counter()
        self._tangents = None
        self.free_seconds = time.perf_counter() - t0
        return self.free_seconds
