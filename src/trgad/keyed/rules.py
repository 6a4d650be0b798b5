"""The keyed engine's primitives: how each is computed, and its reverse and tangent rules.

For every primitive, in one place: its NumPy implementation (:data:`IMPL`), its reverse rule
(:data:`VJP_RULES`, cotangents of the inputs from the cotangent of the output) and its
tangent rule (:data:`JVP_RULES`, tangent of the output from the tangents of the inputs),
each registered by the decorator above its definition, as in JAX's autodidax.

A rule does not compute: it calls an *emitter* ``em`` (:class:`trgad.keyed.engine.Emitter`,
which appends instructions to a derivative program, or the eager interpreter of
:func:`trgad.keyed.engine.jvp_eager`, which computes at once) with ``em.mul``, ``em.div``,
``em.add``, ``em.neg``, ``em.sum_to``, ``em.const`` and ``em.emit(prim, params, args,
shape)``.  Arguments: ``params`` of the primitive, ``ins`` / ``outs`` the registers of its
inputs and outputs (they have ``.shape``), and the output cotangent (one register; a list
for the SVD) or the input tangents (a list, ``None`` for an input that does not depend on
the differentiated leaf).  A reverse rule returns one cotangent per input; a tangent rule
returns one tangent per output, before broadcasting to the output's shape.

The SVD's rules are :func:`trgad.physics.svdrules.svd_pullback` and :func:`trgad.physics.svdrules.svd_tangent`,
called with ``numpy``: the same functions the JAX TRG uses.
"""
from __future__ import annotations

import string

import numpy as np

from ..physics import svdrules
from ..physics.svdrules import svd_pullback
from ..runtime.validate import check_finite_matrix

#: NumPy implementation of every primitive: ``IMPL[prim](params, *arrays)``.  Primitives
#: that only occur in derivative programs (``sum_to``, ``broadcast_to``, ``svd_pullback``,
#: ``svd_tangent``, ``slot``) are here too: running a program uses this table.
IMPL = {}
#: Reverse rules: ``VJP_RULES[prim](em, params, ins, outs, ct) -> [cotangent per input]``.
VJP_RULES = {}
#: Tangent rules: ``JVP_RULES[prim](em, params, ins, outs, tangents) -> [tangent per output]``.
JVP_RULES = {}
#: Primitives with several outputs: their reverse rule gets a list of output cotangents.
MULTI_OUTPUT = {"svd"}


def impl(prim):
    """Decorator: register the NumPy implementation of ``prim``."""
    def register(fn):
        IMPL[prim] = fn
        return fn
    return register


def vjp_rule(prim):
    """Decorator: register the reverse rule of ``prim``."""
    def register(fn):
        VJP_RULES[prim] = fn
        return fn
    return register


def jvp_rule(prim):
    """Decorator: register the tangent rule of ``prim``."""
    def register(fn):
        JVP_RULES[prim] = fn
        return fn
    return register


def _plus(em, a, b):
    """``a + b`` of two tangents where either may be None (zero)."""
    if a is None or b is None:
        return b if a is None else a
    return em.add(a, b)


def _times(em, t, x):
    """``t * x`` for a tangent ``t`` that may be None (zero)."""
    return None if t is None else em.mul(t, x)


# --- arithmetic (NumPy broadcasting, both operand orders) --------------------------------

IMPL["add"] = lambda p, a, b: a + b


@vjp_rule("add")
def add_vjp(em, params, ins, outs, ct):
    return [em.sum_to(ct, ins[0].shape), em.sum_to(ct, ins[1].shape)]


@jvp_rule("add")
def add_jvp(em, params, ins, outs, ts):
    return [_plus(em, ts[0], ts[1])]


IMPL["sub"] = lambda p, a, b: a - b


@vjp_rule("sub")
def sub_vjp(em, params, ins, outs, ct):
    return [em.sum_to(ct, ins[0].shape), em.sum_to(em.neg(ct), ins[1].shape)]


@jvp_rule("sub")
def sub_jvp(em, params, ins, outs, ts):
    return [_plus(em, ts[0], None if ts[1] is None else em.neg(ts[1]))]


IMPL["mul"] = lambda p, a, b: a * b


@vjp_rule("mul")
def mul_vjp(em, params, ins, outs, ct):
    a, b = ins
    return [em.sum_to(em.mul(ct, b), a.shape), em.sum_to(em.mul(ct, a), b.shape)]


@jvp_rule("mul")
def mul_jvp(em, params, ins, outs, ts):
    a, b = ins
    return [_plus(em, _times(em, ts[0], b), _times(em, ts[1], a))]


IMPL["div"] = lambda p, a, b: a / b


@vjp_rule("div")
def div_vjp(em, params, ins, outs, ct):
    a, b = ins                                   # out = a / b; d out / d b = -out / b
    ct_a = em.div(ct, b)
    return [em.sum_to(ct_a, a.shape), em.sum_to(em.neg(em.mul(ct_a, outs[0])), b.shape)]


@jvp_rule("div")
def div_jvp(em, params, ins, outs, ts):
    ta, tb = ts                                  # d(a / b) = (da - out db) / b
    return [em.div(_plus(em, ta, None if tb is None else em.neg(em.mul(tb, outs[0]))), ins[1])]


# --- elementwise functions: the derivative scales a cotangent and a tangent alike --------

def elementwise(prim, fn, scale):
    """Register an elementwise primitive: ``IMPL`` from the NumPy function ``fn``, and both
    rules from ``scale(em, g, x, out)`` = g * fn'(x), which serves for a cotangent and for
    a tangent ``g`` alike (the Jacobian is diagonal)."""
    IMPL[prim] = lambda p, a: fn(a)
    VJP_RULES[prim] = lambda em, params, ins, outs, ct: [scale(em, ct, ins[0], outs[0])]
    JVP_RULES[prim] = lambda em, params, ins, outs, ts: [scale(em, ts[0], ins[0], outs[0])]


elementwise("neg", np.negative, lambda em, g, x, out: em.neg(g))
elementwise("exp", np.exp, lambda em, g, x, out: em.mul(g, out))                    # exp' = exp
elementwise("expm1", np.expm1, lambda em, g, x, out: em.mul(g, em.add(out, em.const(1.0))))  # = out + 1
elementwise("log", np.log, lambda em, g, x, out: em.div(g, x))
elementwise("abs", np.abs, lambda em, g, x, out: em.mul(g, em.div(out, x)))          # sign(x), x != 0
elementwise("sqrt", np.sqrt, lambda em, g, x, out: em.div(g, em.mul(em.const(2.0), out)))


IMPL["norm"] = lambda p, a: np.sqrt(np.sum(a * a))


@vjp_rule("norm")
def norm_vjp(em, params, ins, outs, ct):
    return [em.mul(ct, em.div(ins[0], outs[0]))]


@jvp_rule("norm")
def norm_jvp(em, params, ins, outs, ts):
    letters = string.ascii_letters[:len(ins[0].shape)]       # d||a|| = <a, da> / ||a||
    return [em.div(em.emit("einsum", (f"{letters},{letters}->",), (ins[0], ts[0]), ()), outs[0])]


# --- shape and contraction ----------------------------------------------------------------

IMPL["reshape"] = lambda p, a: np.reshape(a, p[0])


@vjp_rule("reshape")
def reshape_vjp(em, params, ins, outs, ct):
    shape = ins[0].shape
    return [em.emit("reshape", (shape,), (ct,), shape)]


@jvp_rule("reshape")
def reshape_jvp(em, params, ins, outs, ts):
    return [em.emit("reshape", params, (ts[0],), outs[0].shape)]


IMPL["transpose"] = lambda p, a: np.transpose(a, p[0])


@vjp_rule("transpose")
def transpose_vjp(em, params, ins, outs, ct):
    inverse = tuple(int(i) for i in np.argsort(params[0]))
    return [em.emit("transpose", (inverse,), (ct,), ins[0].shape)]


@jvp_rule("transpose")
def transpose_jvp(em, params, ins, outs, ts):
    return [em.emit("transpose", params, (ts[0],), outs[0].shape)]


@impl("einsum")
def einsum_impl(params, *xs):
    return np.einsum(params[0], *xs, optimize=len(xs) > 2)


@vjp_rule("einsum")
def einsum_vjp(em, params, ins, outs, ct):
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
                terms.append((c + d, em.const(np.eye(dims[c]))))
                c = d
            seen.add(c)
            new_target += c
        present = set("".join(s for s, _ in terms))
        for c in sorted(set(target) - present):
            terms.append((c, em.const(np.ones(dims[c]))))
        spec = ",".join(s for s, _ in terms) + "->" + new_target
        cts.append(em.emit("einsum", (spec,), [x for _, x in terms], ins[i].shape))
    return cts


@jvp_rule("einsum")
def einsum_jvp(em, params, ins, outs, ts):
    """Product rule: the sum over operands i of the same einsum with operand i's tangent."""
    total = None
    for i, t in enumerate(ts):
        if t is not None:
            args = [t if j == i else x for j, x in enumerate(ins)]
            total = _plus(em, total, em.emit("einsum", params, args, outs[0].shape))
    return [total]


# --- truncated SVD: three outputs ---------------------------------------------------------

@impl("svd")
def svd_impl(params, M):
    """The k = params[0] largest triplets; InputError for a matrix with an inf or nan entry
    (:func:`trgad.runtime.validate.check_finite_matrix`, before LAPACK sees it)."""
    U, s, Vh = np.linalg.svd(check_finite_matrix(M), full_matrices=False)
    k = params[0]
    return U[:, :k], s[:k], Vh[:k, :]


@vjp_rule("svd")
def svd_vjp(em, params, ins, outs, cts):
    """All three output cotangents at once, through :func:`trgad.physics.svdrules.svd_pullback`."""
    cts = [c if c is not None else em.const(np.zeros(o.shape)) for c, o in zip(cts, outs)]
    return [em.emit("svd_pullback", (), (ins[0], *outs, *cts), ins[0].shape)]


@jvp_rule("svd")
def svd_jvp(em, params, ins, outs, ts):
    """(dU, ds, dVh) at once through ``trgad.physics.svdrules.svd_tangent``, then one ``slot`` each."""
    both = em.emit("svd_tangent", (), (ins[0], *outs, ts[0]), None)
    return [em.emit("slot", (i,), (both,), o.shape) for i, o in enumerate(outs)]


# --- primitives of derivative programs only -----------------------------------------------

def _sum_to(x, shape):
    """Sum a broadcast result back to ``shape`` (the cotangent of a broadcast)."""
    extra = x.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n == 1 and x.shape[extra + i] != 1)
    return np.sum(x, axis=axes).reshape(shape) if axes else x.reshape(shape)


IMPL["sum_to"] = lambda p, a: _sum_to(a, p[0])
IMPL["broadcast_to"] = lambda p, a: np.broadcast_to(a, p[0]).copy()
IMPL["svd_pullback"] = lambda p, *xs: svd_pullback(np, *xs)
# Looked up when called: ``svd_tangent`` is defined in trgad.physics.svd (same conventions as
# svd_pullback); the forward mode of graphs without an SVD never calls it.
IMPL["svd_tangent"] = lambda p, *xs: svdrules.svd_tangent(np, *xs)
IMPL["slot"] = lambda p, t: t[p[0]]
