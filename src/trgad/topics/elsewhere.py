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
* JAX on another axis, the order of differentiation, and JAX's own history of nested
  ``cond``: :mod:`trgad.topics.nesting`.

:data:`trgad.pages.recorded.RECORDED` lists what other projects reported (each row with the
link it rests on), :data:`trgad.pages.recorded.MEASURED` the descriptions of the rows the book
measures (their verdicts are computed on the page).  Nothing here is a
figure of this machine; the book's page "The same trap elsewhere" (book/elsewhere.md) shows
the measurements.

autograd and SymPy are imported inside the functions that use them, so the rest of the
package imports without them (both are in requirements.txt).
"""
from __future__ import annotations

import cProfile
import pstats
import time
import warnings
from functools import partial
from typing import Callable, Sequence

from ..runtime.timing import time_call
from ..runtime.validate import InputError, check_depths, check_finite, check_int, check_repeats, checked

#: Deepest SymPy iteration accepted: the tree of a derivative grows about 2.4x per layer, so
#: count_ops (a tree walk) takes seconds at depth 11 and minutes at 14.
MAX_SYMPY_DEPTH = 14


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

    timing = time_call.trusted(once, warmup=1, repeats=repeats)
    value, end, grad = timing.fastest
    return {"value": float(value), "grad": float(grad),
            "tape_nodes": sum(1 for _ in toposort(end)), "seconds": timing.min}


# --------------------------------------------------------------------------------------
# SymPy
# --------------------------------------------------------------------------------------

@checked(depth=partial(check_int, "depth", low=1, high=MAX_SYMPY_DEPTH))
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

    rows, x0 = [], None if x0 is None else check_finite("x0", x0)
    for depth in check_depths("depths", depths, 1, MAX_SYMPY_DEPTH):
        x, y = sympy_unroll.trusted(step, depth)
        d = sympy.diff(y, x)
        sizes, cse = expr_sizes(d), cse_size(d)
        row = {"depth": depth, **sizes, "cse_ops": cse["ops"], "cse_subexpressions": cse["subexpressions"]}
        if x0 is not None:
            value = sympy.lambdify(x, d, modules="mpmath", cse=True)(sympy.Float(x0))
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

    depth = check_int("depth", depth, 1, MAX_SYMPY_DEPTH)
    clear_cache()
    _, a = sympy_unroll.trusted(f, depth, evaluate=False)
    clear_cache()
    _, b = sympy_unroll.trusted(f, depth, evaluate=False)
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
