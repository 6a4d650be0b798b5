"""The same trap elsewhere: other systems measured on the book's graphs, and the ones recorded.

The book's trap is a walk that treats a DAG as the tree it denotes.  This module measures
other systems on the same kind of graph, at build time, with exact counts:

* HIPS ``autograd`` (a tape whose nodes are linked, and found again, by object identity):
  :func:`autograd_tape` differentiates any scalar function and counts its tape;
* SymPy (expressions identified by structure): :func:`sympy_unroll` builds an iterated
  expression, :func:`expr_sizes` / :func:`cse_size` / :func:`sympy_swell` count a symbolic
  derivative as a tree, as a DAG and after common-subexpression elimination, and
  :func:`sympy_eq_calls` counts the structural comparisons of two equal expressions built
  independently (:func:`count_calls` counts calls of any Python function), and
  :func:`tuple_eq_calls` does the same for CPython's nested tuples;
* JAX on another axis, the order of differentiation: :func:`nested_grad` (``jax.grad``
  nested n times) against :func:`taylor_mode` (``jax.experimental.jet``), checked against
  the closed form :func:`sin_exp_derivative`; :func:`distinct_eqns` counts a jaxpr's
  equations after merging equal ones;
* JAX's own history: :func:`nested_cond` rebuilds the reproductions of jax-ml/jax #8184 and
  #8193 and :func:`cond_history` times them on today's JAX.

:data:`RECORDED` lists what other projects reported (each row with the link it rests on),
:data:`RECORDED_8193_SECONDS` the timings printed in jax-ml/jax #8193, :data:`MEASURED` the
descriptions of the rows the book measures (their verdicts are computed on the page).  Nothing here is a
figure of this machine; the book's page "The same trap elsewhere" (book/elsewhere.md) shows
the measurements.

autograd and SymPy are imported inside the functions that use them, so the rest of the
package imports without them (both are in requirements.txt).
"""
from __future__ import annotations

import cProfile
import math
import pstats
import time
import warnings
from typing import Callable, Sequence

from ..runtime.timing import time_call
from ..runtime.validate import InputError, check_finite, check_int, check_repeats
from ..runtime.timing import count_eqns

#: Point at which sin(x) * exp(x) is differentiated (any real x works; 0.3 as elsewhere).
SIN_EXP_X0 = 0.3
#: Highest order :func:`nested_grad` accepts: make_jaxpr of grad nested 10 times takes about
#: a minute here and its jaxpr about 12,000 equations (the program grows about 2.2x per order).
MAX_GRAD_ORDER = 10
#: Highest order :func:`taylor_mode` accepts (its program grows quadratically in the order).
MAX_JET_ORDER = 40
#: Deepest SymPy iteration accepted: the tree of a derivative grows about 2.4x per layer, so
#: count_ops (a tree walk) takes seconds at depth 11 and minutes at 14.
MAX_SYMPY_DEPTH = 14
#: Deepest nesting of :func:`nested_cond` accepted (each level is a Python recursion frame
#: per traced branch).
MAX_COND_DEPTH = 200


def _depths(name, values, low, high):
    try:
        ds = [check_int(name, d, low, high) for d in values]
    except TypeError:
        raise InputError(f"{name}={values!r} is not a sequence of integers") from None
    if not ds or any(b <= a for a, b in zip(ds, ds[1:])):
        raise InputError(f"{name}={list(values)!r} is out of range: give increasing integers in [{low}, {high}]")
    return ds


# --------------------------------------------------------------------------------------
# HIPS autograd
# --------------------------------------------------------------------------------------

def autograd_tape(f: Callable, x0: float, repeats: int = 1) -> dict:
    """Reverse mode of HIPS autograd on ``f`` at ``x0``, with the size of its tape.

    ``f`` maps a float to a float using operations autograd records (``+ - * /`` on its
    argument, ``autograd.numpy`` functions); e.g. ``lambda x: trgad.keyed.chain.build(x, D, 2)``.
    autograd traces ``f`` into a graph of ``VJPNode`` objects, each holding its parents
    (``autograd.tracer.trace``), and runs the backward pass (``autograd.core.backward_pass``),
    whose cotangents live in a dict keyed by node: the node objects' own identity, since
    ``Node`` defines no ``__eq__`` or ``__hash__`` (HIPS/autograd, ``autograd/core.py`` and
    ``autograd/tracer.py``).

    Returns a dict: ``value`` (f(x0)), ``grad`` (df/dx at x0), ``tape_nodes`` (nodes
    reachable from the output, the root included: ``autograd.util.toposort``), ``seconds``
    (wall time of trace plus backward pass, the fastest of ``repeats`` after one warm-up).
    Raises InputError for a non-finite x0, repeats out of [1, 100], or an ``f`` whose output
    does not depend on its input.
    """
    from autograd.core import VJPNode, backward_pass
    from autograd.tracer import trace
    from autograd.util import toposort

    x0 = check_finite("x0", x0)
    repeats = check_repeats(repeats)

    def once():
        with warnings.catch_warnings():      # autograd warns, then we raise, on a constant f
            warnings.filterwarnings("ignore", "Output seems independent of input")
            value, end = trace(VJPNode.new_root(), f, x0)
        if end is None:
            raise InputError("f's output does not depend on its argument: autograd recorded no tape")
        return value, end, backward_pass(1.0, end)

    timing = time_call(once, warmup=1, repeats=repeats)
    value, end, grad = timing.fastest
    return {"value": float(value), "grad": float(grad),
            "tape_nodes": sum(1 for _ in toposort(end)), "seconds": timing.min}


# --------------------------------------------------------------------------------------
# SymPy
# --------------------------------------------------------------------------------------

def sympy_unroll(step: Callable, depth: int, evaluate: bool = True):
    """``step`` applied ``depth`` times to the SymPy symbol x: returns ``(x, y)``.

    ``step`` maps an expression to an expression with ``+ - * /`` (e.g. the book's chain
    ``lambda y: trgad.keyed.chain.build(y, 1, 2)``, which is (y*y)/2).  With ``evaluate=False``
    the expression is built inside ``sympy.evaluate(False)``: SymPy keeps each product as
    written (y*y stays a product of two uses of y) instead of rewriting it (y*y -> y**2), so
    the expression is the DAG a tape would record.  Raises InputError for depth outside
    [1, :data:`MAX_SYMPY_DEPTH`] or a step that fails on SymPy expressions.
    """
    import sympy

    depth = check_int("depth", depth, 1, MAX_SYMPY_DEPTH)
    x = sympy.Symbol("x")
    y = x
    try:
        with sympy.evaluate(evaluate):
            for _ in range(depth):
                y = step(y)
    except InputError:
        raise
    except Exception as e:                              # the step failed on SymPy values
        raise InputError(f"step failed on SymPy expressions: {type(e).__name__}: {e}") from None
    if not isinstance(y, sympy.Basic):
        raise InputError(f"step must return a SymPy expression, got {type(y).__name__}")
    return x, y


def expr_sizes(expr, ops: bool = True) -> dict:
    """Sizes of a SymPy expression, exact counts.

    ``ops``: ``sympy.count_ops(expr)``, the operations of the expression written out (a walk
    of its tree: every path to a shared subexpression counts it again).  ``tree``: nodes of
    the unfolded tree, counted on the DAG in linear time (a memo keyed by object id).
    ``dag``: distinct subexpressions (a set, so structurally equal subexpressions count
    once): the size of the expression stored with all sharing.  ``objects``: distinct
    objects in memory (by id); equal to ``dag`` when every distinct subexpression is stored
    once.  Leaves (symbols, numbers) count as nodes in ``tree``, ``dag`` and ``objects``,
    not in ``ops``.  ``ops=False`` skips ``count_ops`` (the only tree walk; ``ops`` is then
    None).
    """
    import sympy

    size, stack = {}, [(expr, False)]
    while stack:                                        # post-order, no recursion limit
        e, ready = stack.pop()
        if id(e) in size:
            continue
        if ready:
            size[id(e)] = 1 + sum(size[id(a)] for a in e.args)
        else:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args if id(a) not in size)
    seen, todo = set(), [expr]
    while todo:
        e = todo.pop()
        if e not in seen:
            seen.add(e)
            todo.extend(e.args)
    return {"ops": int(sympy.count_ops(expr)) if ops else None, "tree": size[id(expr)], "dag": len(seen),
            "objects": len(size)}


def cse_size(expr) -> dict:
    """``sympy.cse`` of ``expr``: ``subexpressions`` (how many it named) and ``ops``
    (``count_ops`` of the named subexpressions plus of the reduced expression: the
    operations of the straight-line program cse writes)."""
    import sympy

    replacements, (reduced,) = sympy.cse(expr)
    ops = sum(int(sympy.count_ops(e)) for _, e in replacements) + int(sympy.count_ops(reduced))
    return {"subexpressions": len(replacements), "ops": ops}


def sympy_swell(step: Callable, depths: Sequence[int], x0: float | None = None) -> list:
    """The symbolic derivative dy/dx of ``step`` iterated to each depth, counted.

    For each depth (increasing, in [1, :data:`MAX_SYMPY_DEPTH`]): ``y`` from
    :func:`sympy_unroll` (SymPy's default evaluation), ``sympy.diff(y, x)``, and a row with
    ``depth``, the derivative's :func:`expr_sizes` (``ops``, ``tree``, ``dag``, ``objects``), its
    :func:`cse_size` (``cse_ops``, ``cse_subexpressions``) and, if ``x0`` is given,
    ``grad`` = the derivative at x0 as a float (evaluated in mpmath's floats, whose exponent
    range is unbounded, through ``sympy.lambdify(..., cse=True)``, so the tree is never
    written out; inf or 0.0 when the result leaves the float range).  Raises InputError for
    bad depths or a failing step.
    """
    import sympy

    rows = []
    for depth in _depths("depths", depths, 1, MAX_SYMPY_DEPTH):
        x, y = sympy_unroll(step, depth)
        d = sympy.diff(y, x)
        sizes, cse = expr_sizes(d), cse_size(d)
        row = {"depth": depth, **sizes, "cse_ops": cse["ops"], "cse_subexpressions": cse["subexpressions"]}
        if x0 is not None:
            value = sympy.lambdify(x, d, modules="mpmath", cse=True)(sympy.Float(check_finite("x0", x0)))
            row["grad"] = float(value)
        rows.append(row)
    return rows


def count_calls(fn: Callable, function: Callable):
    """Run ``fn()`` under the standard library's profiler and count the calls of
    ``function`` (a Python function, matched by its code object; C functions cannot be
    counted).  Returns ``(fn's result, calls)``; calls is exact (recursive calls included).
    """
    code = getattr(function, "__code__", None)
    if code is None:
        raise InputError(f"function={function!r} is not a Python function (it has no __code__ to count)")
    profile = cProfile.Profile()
    profile.enable()
    try:
        result = fn()
    finally:
        profile.disable()
    stats = pstats.Stats(profile).stats
    return result, stats.get((code.co_filename, code.co_firstlineno, code.co_name), (0, 0))[1]


def sympy_eq_calls(f: Callable, depth: int) -> dict:
    """``==`` between two equal SymPy expressions that were built independently.

    Builds ``f`` iterated ``depth`` times (:func:`sympy_unroll` with ``evaluate=False``, so
    the fan-out stays in the expression) twice, clearing SymPy's cache before each build
    (``sympy.core.cache.clear_cache``: otherwise SymPy may hand back the object it built
    first, and ``==`` returns at once on identity).  SymPy's ``Basic.__eq__`` returns True on
    identity, else compares type and arguments, the arguments again by ``==``, with no memo
    (``sympy/core/basic.py``); its hash is cached per object.

    Returns a dict: ``depth``, ``equal`` (the result of ``a == b``), ``distinct`` (a is not
    b), ``eq_calls`` (calls of ``sympy.Basic.__eq__`` during ``a == b``, counted by
    :func:`count_calls`), ``objects`` (distinct objects in one copy, :func:`expr_sizes`),
    ``seconds`` (wall time of ``a == b`` without the profiler).
    Raises InputError as :func:`sympy_unroll`.
    """
    import sympy
    from sympy.core.cache import clear_cache

    clear_cache()
    _, a = sympy_unroll(f, depth, evaluate=False)
    clear_cache()
    _, b = sympy_unroll(f, depth, evaluate=False)
    clear_cache()
    t0 = time.perf_counter()
    equal = a == b
    seconds = time.perf_counter() - t0
    _, calls = count_calls(lambda: a == b, sympy.Basic.__eq__)
    return {"depth": depth, "equal": bool(equal), "distinct": a is not b, "eq_calls": calls,
            "objects": expr_sizes(a, ops=False)["objects"], "seconds": seconds}


class _Leaf:
    """A number that counts how often it is compared and hashed (for :func:`tuple_eq_calls`)."""

    eq_calls = hash_calls = 0

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        _Leaf.eq_calls += 1
        return self.x == other.x

    def __hash__(self):
        _Leaf.hash_calls += 1
        return hash(self.x)


def tuple_eq_calls(depth: int) -> dict:
    """``==`` and ``hash`` of nested Python tuples that share sub-tuples.

    Builds ``t = (leaf,)`` and then ``t = (t, t)`` ``depth`` times, twice, independently: two
    equal DAGs of ``depth + 1`` tuples each, whose unfolded trees have 2**depth leaves.
    CPython's tuple ``==`` compares elements in order, skipping pairs that are the same
    object; elements that are equal but distinct are compared again, recursively.  The leaf
    counts its ``__eq__`` and ``__hash__`` calls.  Returns ``depth``, ``equal``,
    ``eq_calls`` (leaf comparisons in ``a == b``), ``hash_calls`` (leaf hashes in a first
    ``hash(a)``: 2**depth on a CPython that recomputes tuple hashes, 1 on one that caches
    them, python/cpython#131525) and ``seconds`` (wall time of ``a == b``).  Raises
    InputError for depth outside [0, 40].
    """
    depth = check_int("depth", depth, 0, 40)

    def build():
        t = (_Leaf(1.5),)
        for _ in range(depth):
            t = (t, t)
        return t

    a, b = build(), build()
    _Leaf.eq_calls = _Leaf.hash_calls = 0
    t0 = time.perf_counter()
    equal = a == b
    seconds = time.perf_counter() - t0
    eq_calls = _Leaf.eq_calls
    hash(a)
    return {"depth": depth, "equal": equal, "eq_calls": eq_calls, "hash_calls": _Leaf.hash_calls,
            "seconds": seconds}


# --------------------------------------------------------------------------------------
# JAX: nested derivatives against Taylor mode
# --------------------------------------------------------------------------------------

def sin_exp(x):
    """sin(x) * exp(x) (JAX), the function whose derivatives of every order are compared."""
    import jax.numpy as jnp

    return jnp.sin(x) * jnp.exp(x)


def sin_exp_derivative(n: int, x: float) -> float:
    """The n-th derivative of sin(x) exp(x) in closed form (the oracle), a float:

    d^n/dx^n [sin x e^x] = Im[(1 + i)^n e^((1 + i) x)] = 2**(n/2) e^x sin(x + n pi/4).

    Raises InputError for n outside [0, 1000] or a non-finite x.
    """
    n, x = check_int("n", n, 0, 1000), check_finite("x", x)
    return 2.0 ** (n / 2) * math.exp(x) * math.sin(x + n * math.pi / 4)


def _eval(closed, x0):
    import jax

    return float(jax.core.eval_jaxpr(closed.jaxpr, closed.consts, x0)[0])


def distinct_eqns(closed) -> int:
    """Equations of a jaxpr that remain after merging equal ones (value numbering).

    Walks the top-level equations of ``closed`` (a ``ClosedJaxpr``) in order and numbers
    each value: an equation whose primitive, parameters (compared by ``repr``) and input
    numbers (literals by value and type) repeat an earlier equation's gets that equation's
    numbers instead of new ones.  Returns how many distinct equations there are: what
    common-subexpression elimination keyed by structure could at best reduce the program
    to, with no algebra (x * 1 and x stay distinct).  An equation holding a sub-jaxpr counts
    as one equation, keyed by its parameters' ``repr``.
    """
    from jax.extend.core import Literal

    jaxpr = closed.jaxpr if hasattr(closed, "jaxpr") else closed
    number = {v: ("in", i) for i, v in enumerate(jaxpr.invars)}
    number.update({v: ("const", i) for i, v in enumerate(jaxpr.constvars)})
    table = {}
    for eqn in jaxpr.eqns:
        ins = tuple(("lit", repr(a.val), str(a.aval)) if isinstance(a, Literal) else number[a]
                    for a in eqn.invars)
        key = (eqn.primitive.name, repr(sorted(eqn.params.items())), ins)
        index = table.setdefault(key, len(table))
        number.update({v: (index, j) for j, v in enumerate(eqn.outvars)})
    return len(table)


def nested_grad(f: Callable, orders: Sequence[int], x0: float = SIN_EXP_X0) -> list:
    """``jax.make_jaxpr`` of ``jax.grad`` nested n times of ``f``, for each n in ``orders``.

    Rows: ``order``, ``eqns`` (equations of the jaxpr, nested ones included:
    :func:`trgad.runtime.timing.count_eqns`), ``distinct`` (:func:`distinct_eqns`), ``seconds`` (wall
    time of that one ``make_jaxpr``: tracing and every nested transform), ``value`` (the
    jaxpr evaluated at ``x0``, op by op, no compilation).  Orders: increasing integers in [1, :data:`MAX_GRAD_ORDER`].  Raises
    InputError for bad orders or a non-finite x0.
    """
    import jax

    orders, x0 = _depths("orders", orders, 1, MAX_GRAD_ORDER), check_finite("x0", x0)
    rows, g = [], f
    for n in range(1, orders[-1] + 1):
        g = jax.grad(g)
        if n in orders:
            t0 = time.perf_counter()
            closed = jax.make_jaxpr(g)(x0)
            seconds = time.perf_counter() - t0
            rows.append({"order": n, "eqns": count_eqns(closed), "distinct": distinct_eqns(closed),
                         "seconds": seconds, "value": _eval(closed, x0)})
    return rows


def taylor_mode(f: Callable, orders: Sequence[int], x0: float = SIN_EXP_X0) -> list:
    """The n-th derivative of ``f`` by Taylor mode, ``jax.experimental.jet``, for each n.

    ``jet.jet(f, (x0,), ((1, 0, ..., 0),))`` with n series terms pushes the truncated
    Taylor series x0 + t through ``f``; its last output term is the n-th derivative (jet's
    series are derivatives, not Taylor coefficients: ``factorial_scaled=True``, the
    default).  Rows as :func:`nested_grad`: ``order``, ``eqns`` of the jaxpr of that
    computation, ``distinct``, ``seconds`` of its ``make_jaxpr``, ``value``.  Orders: increasing integers
    in [1, :data:`MAX_JET_ORDER`].  Raises InputError for bad orders or a non-finite x0.
    """
    import jax
    from jax.experimental import jet

    orders, x0 = _depths("orders", orders, 1, MAX_JET_ORDER), check_finite("x0", x0)
    rows = []
    for n in orders:
        series = ((1.0,) + (0.0,) * (n - 1),)
        g = lambda x, s=series: jet.jet(f, (x,), s)[1][-1]      # noqa: E731
        t0 = time.perf_counter()
        closed = jax.make_jaxpr(g)(x0)
        seconds = time.perf_counter() - t0
        rows.append({"order": n, "eqns": count_eqns(closed), "distinct": distinct_eqns(closed),
                     "seconds": seconds, "value": _eval(closed, x0)})
    return rows


# --------------------------------------------------------------------------------------
# JAX's own history: nested cond (jax-ml/jax #8184, #8193)
# --------------------------------------------------------------------------------------

def nested_cond(x, pred, depth: int):
    """``depth - 1`` nested ``lax.cond``, each taking the deeper cond or the identity: the
    reproduction of jax-ml/jax #8184 (``pred = jnp.array(True)``, under ``vmap``) and #8193
    (``pred = True``, under ``linearize``), as written in those threads.  Returns x."""
    from jax import lax

    if depth == 1:
        return x
    return lax.cond(pred, lambda y: nested_cond(y, pred, depth - 1), lambda y: y, x)


def cond_history(depths: Sequence[int], repeats: int = 3) -> dict:
    """The two reproductions of the nested-cond threads, timed on today's JAX.

    ``"vmap"`` (jax-ml/jax #8184): ``make_jaxpr(vmap(lambda x: nested_cond(x,
    jnp.array(True), d)))`` at ``jnp.array([1.])``; ``"linearize"`` (#8193):
    ``jax.linearize(lambda x: nested_cond(x, True, d), jnp.array([1.]))``.  Each maps to
    rows ``depth``, ``seconds`` (this process's CPU time, ``time.process_time``, the fastest
    of ``repeats``, a fresh function each time, after one untimed call at the first depth)
    and ``eqns`` (equations of the vmap jaxpr, nested ones included; None for linearize).
    Depths: increasing integers in [2, :data:`MAX_COND_DEPTH`].  Raises InputError for bad
    depths or repeats.
    """
    import jax
    import jax.numpy as jnp

    depths, repeats = _depths("depths", depths, 2, MAX_COND_DEPTH), check_repeats(repeats)
    x = jnp.array([1.0])

    def vmapped(d):
        return jax.make_jaxpr(jax.vmap(lambda y: nested_cond(y, jnp.array(True), d)))(x)

    def linearized(d):
        return jax.linearize(lambda y: nested_cond(y, True, d), x)

    out = {}
    for name, run in (("vmap", vmapped), ("linearize", linearized)):
        run(depths[0])                                   # warm-up: first-use costs of JAX
        rows = []
        for d in depths:
            best, result = math.inf, None
            for _ in range(repeats):
                t0 = time.process_time()
                result = run(d)
                best = min(best, time.process_time() - t0)
            rows.append({"depth": d, "seconds": best, "eqns": count_eqns(result) if name == "vmap" else None})
        out[name] = rows
    return out


# --------------------------------------------------------------------------------------
# Recorded elsewhere
# --------------------------------------------------------------------------------------

#: jax-ml/jax #8193 as printed in the thread (October 2021, the JAX of then; machine not
#: stated): nesting depth -> seconds of ``jax.linearize``.  Recorded elsewhere, quoted.
RECORDED_8193_SECONDS = {7: 0.3668365478515625, 8: 0.5641067028045654, 9: 0.9860150814056396,
                         10: 2.0171751976013184, 11: 4.0435779094696045, 12: 7.562690019607544}
#: Where :data:`RECORDED_8193_SECONDS` comes from.
RECORDED_8193_SOURCE = "https://github.com/jax-ml/jax/issues/8193"

#: What other projects reported, each row resting on the threads it links (read by this
#: book's authors; nothing here is measured by the book).  Keys: ``system``, ``identifies``
#: (how it identifies or compares values), ``affected`` (what the thread reports), ``fix``
#: (what was adopted, or the thread's state), ``sources`` ((label, url) pairs).
RECORDED = (
    {"system": "SymbolicUtils.jl (Julia CAS)",
     "identifies": "hash-consing, structural `isequal`",
     "affected": "`isequal` of equal, distinct copies: exponential in depth",
     "fix": "a memo of compared pairs (#1052), keyed by the objects, not their ids (#1055)",
     "sources": (("#1049", "https://github.com/JuliaSymbolics/SymbolicUtils.jl/issues/1049"),
                 ("#1052", "https://github.com/JuliaSymbolics/SymbolicUtils.jl/pull/1052"),
                 ("#1055", "https://github.com/JuliaSymbolics/SymbolicUtils.jl/pull/1055"))},
    {"system": "pytato (lazy arrays)",
     "identifies": "structural `==`",
     "affected": "exponential (#163); quadratic with a memo rebuilt per use (#322)",
     "fix": "a memoising comparison, identity first: 7 min to 3 s (#322)",
     "sources": (("#163", "https://github.com/inducer/pytato/issues/163"),
                 ("#322", "https://github.com/inducer/pytato/pull/322"))},
    {"system": "snyk dep-graph",
     "identifies": "content hash",
     "affected": "O(2^n) on n stacked diamonds",
     "fix": "a memoised Merkle hash",
     "sources": (("#169", "https://github.com/snyk/dep-graph/pull/169"),)},
    {"system": "cargo",
     "identifies": "recursive fingerprint hash",
     "affected": "exponential blow-up",
     "fix": "the memoised hash, Merkle-style",
     "sources": (("#4521", "https://github.com/rust-lang/cargo/pull/4521"),)},
    {"system": "Apache TVM",
     "identifies": "`StructuralHash`",
     "affected": "none reported (a design PR)",
     "fix": "a DAG hashed as a DAG (occurrence index)",
     "sources": (("#5160", "https://github.com/apache/tvm/pull/5160"),)},
    {"system": "hevm (symbolic EVM)",
     "identifies": "derived structural `Eq`",
     "affected": "914-node DAG held as a 601,664-node tree, 22 GB",
     "fix": "hash-consing, pointer equality (an open RFC)",
     "sources": (("#1085", "https://github.com/argotorg/hevm/pull/1085"),)},
    {"system": "PyTorch autograd",
     "identifies": "a tape, by identity",
     "affected": "nested `autograd.grad`: about 3x per order",
     "fix": "none (issue open)",
     "sources": (("#111563", "https://github.com/pytorch/pytorch/issues/111563"),)},
    {"system": "JAX (2019)",
     "identifies": "tracers, by identity",
     "affected": "nested `jvp`: exponential in the order",
     "fix": "CSE discussed; Taylor mode (`jet`) today",
     "sources": (("#520", "https://github.com/jax-ml/jax/issues/520"),)},
    {"system": "Lean 4 kernel",
     "identifies": "`is_def_eq` cache (union-find)",
     "affected": "unsound: a non-transitive check closed under transitivity",
     "fix": "a plain cache keyed on the query pair",
     "sources": (("#14806", "https://github.com/leanprover/lean4/pull/14806"),)},
)

#: The rows this book measures (book/elsewhere.md), without their verdicts, which the page
#: computes: name -> ``system``, ``identifies``, ``fix``, ``sources`` as in :data:`RECORDED`.
MEASURED = {
    "autograd": {
        "system": "HIPS autograd: mul chain (tape nodes)",
        "identifies": "node objects, by identity",
        "fix": "none needed",
        "sources": (("autograd/core.py", "https://github.com/HIPS/autograd/blob/master/autograd/core.py"),)},
    "sympy_eq": {
        "system": "SymPy `==`: two copies of the mul chain (calls)",
        "identifies": "structure: hash cached, `==` without memo",
        "fix": "its constructor cache (LRU) returns the same object",
        "sources": (("basic.py", "https://github.com/sympy/sympy/blob/master/sympy/core/basic.py"),
                    ("cache.py", "https://github.com/sympy/sympy/blob/master/sympy/core/cache.py"))},
    "tuple_eq": {
        "system": "CPython tuple `==`: shared sub-tuples (leaf calls)",
        "identifies": "element by element, identity shortcut",
        "fix": "3.14 caches `hash`, not `==`",
        "sources": (("#131525", "https://github.com/python/cpython/issues/131525"),)},
    "sympy_chain": {
        "system": "SymPy `diff`: mul chain (`count_ops`)",
        "identifies": "structure, rewritten (y*y becomes y**2)",
        "fix": "algebra: the fan-out becomes an exponent",
        "sources": (("mul.py", "https://github.com/sympy/sympy/blob/master/sympy/core/mul.py"),)},
    "sympy_tree": {
        "system": "SymPy `diff`: logistic map (tree nodes)",
        "identifies": "structure; a DAG in memory, walked as a tree",
        "fix": "`cse` (next row)",
        "sources": (("Baydin et al. 2.2", "https://jmlr.org/papers/v18/17-468.html"),)},
    "sympy_cse": {
        "system": "the same after `sympy.cse` (operations)",
        "identifies": "shared subexpressions named once",
        "fix": "this is the fix",
        "sources": (("cse_main.py", "https://github.com/sympy/sympy/blob/master/sympy/simplify/cse_main.py"),)},
    "jax_grad": {
        "system": "JAX `grad` nested n times (equations)",
        "identifies": "tracers, by identity",
        "fix": "Taylor mode (next row)",
        "sources": (("#520", "https://github.com/jax-ml/jax/issues/520"),)},
    "jax_jet": {
        "system": "JAX `jet` to order n (equations)",
        "identifies": "one Taylor series per value",
        "fix": "this is the fix (no `svd` rule; ignores `custom_jvp`)",
        "sources": (("jet.py", "https://github.com/jax-ml/jax/blob/main/jax/experimental/jet.py"),
                    ("#2431", "https://github.com/jax-ml/jax/issues/2431"))},
    "jax_cond": {
        "system": "JAX today: nested `cond` under `vmap`, `linearize` (CPU time)",
        "identifies": "tracers, by identity",
        "fix": "jaxpr transformations cached by jaxpr (2022)",
        "sources": (("#8184", "https://github.com/jax-ml/jax/issues/8184"),
                    ("#8193", "https://github.com/jax-ml/jax/issues/8193"),
                    ("#9196", "https://github.com/jax-ml/jax/pull/9196"),
                    ("#9228", "https://github.com/jax-ml/jax/pull/9228"))},
}
