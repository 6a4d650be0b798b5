"""Compiled programs: the ahead-of-time wrapper and the one registry of their caches.

Every module that keeps compiled JAX programs between calls keeps them in a dict it gets
from :func:`registry`, so that one call, :func:`clear`, forgets all of them (the next call of
every method then compiles again, as a first call does).  The caches today: ``modes``
(one executable per method, order and schedule), ``staged`` (the per-shape step and
pullback programs), ``whole.value_and_grad`` and ``whole.second`` (the whole graph's jitted
functions, per schedule), ``exact.kaufman``.  These live in this process's memory; JAX's
persistent compilation cache (:mod:`trgad.cache`) keeps compiled executables on disk for the
next process.

:func:`snapshot` and :func:`restore` let a benchmark time several first calls from empty
caches and keep what each compiled (:func:`trgad.bench.second_order_costs`).
"""
from __future__ import annotations

import jax

_CACHES = {}


def registry(name):
    """The registered dict of compiled programs called ``name`` (created empty on first use).

    The owner module stores what it compiled under keys of its choosing; :func:`clear`
    empties the dict in place, so the owner's reference stays valid.
    """
    return _CACHES.setdefault(str(name), {})


def clear():
    """Forget every compiled program of every registered cache."""
    for entries in _CACHES.values():
        entries.clear()


def snapshot():
    """A copy of every registered cache, ``{name: {key: program}}`` (the programs themselves
    are shared, not copied)."""
    return {name: dict(entries) for name, entries in _CACHES.items()}


def restore(saved):
    """Put back the entries of a :func:`snapshot` (entries added since are kept)."""
    for name, entries in saved.items():
        registry(name).update(entries)


def sizes():
    """Number of entries of each registered cache, ``{name: int}``."""
    return {name: len(entries) for name, entries in _CACHES.items()}


class Compiled:
    """``jax.jit(fn)`` compiled ahead of time for the shapes of each call.

    The first call with a new argument signature (tree structure, shapes and dtypes of the
    arguments) runs ``jax.jit(fn).lower(*args).compile()``; every call then runs that XLA
    executable.  ``executables`` maps each signature to its executable, which gives XLA's
    figures, e.g. ``memory_analysis().temp_size_in_bytes``.  Source: JAX's ahead-of-time
    lowering API (``jax.jit(...).lower(...).compile()``, "Ahead-of-time lowering and
    compilation" in the JAX documentation).
    """

    def __init__(self, fn):
        self.jit = jax.jit(fn)
        self.executables = {}

    def __call__(self, *args):
        leaves, tree = jax.tree_util.tree_flatten(args)
        key = (tree, tuple((jax.numpy.shape(x), str(getattr(x, "dtype", type(x).__name__)))
                           for x in leaves))
        exe = self.executables.get(key)
        if exe is None:
            exe = self.executables[key] = self.jit.lower(*args).compile()
        return exe(*args)
