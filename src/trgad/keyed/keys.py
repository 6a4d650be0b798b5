"""Value keys: the identity of a value in the keyed graph engine, and what comparing them costs.

The key of a computed value is (primitive, parameters, keys of all inputs, output slot), so
the key of a deep value contains its whole history: a DAG of keys.  This is the design of
``GlobalValKey`` / ``ValueKey`` in tensor4all/computegraph-rs (``src/types.rs``; commits
76aeccc, c20e891, 691def2).  Three ways to hash and compare such keys (:data:`STRATEGIES`):

* ``"structural"`` (:class:`StructuralKey`) - the failing design of computegraph-rs c20e891:
  O(1) fingerprint hash, unmemoised structural ``==`` with an identity shortcut.  Two equal
  keys built independently share no objects, so ``==`` walks the DAG as a tree.
* ``"interned"`` (:class:`InternedKey`) - the fix (hash-consing): one object and one int id
  per distinct structure; ``==`` compares ids.  An id lives as long as a key uses it.
* ``"memo"`` (:class:`MemoKey`) - structural ``==`` with a memo of compared node pairs.

:data:`COUNTER` counts *key visits* (one per ``hash``, per node pair ``==`` visits, per
interning lookup), so the cost of a transform is an exact integer.  :func:`tree_size`,
:func:`path_count` and :func:`dag_size` predict it from the DAG.  Every walk here uses an
explicit stack, so keys of any depth that fits in memory work.  The long explanation, with
measurements, is the book's root-cause chapter (``book/rootcause.md``).
"""
from __future__ import annotations

import itertools
import weakref

#: Key strategies: the failing design, the fix, and the memoised comparison.  The one
#: definition; every module that accepts ``keys=`` checks against it.
STRATEGIES = ("structural", "interned", "memo")


class Counter:
    """Key visits: one per ``hash``, per node pair compared by ``==``, per interning lookup."""

    def __init__(self):
        self.visits = 0


#: The global counter.  It only ever grows: a transform (or :func:`count_visits`) reports
#: the difference between its value after and before.
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
    """The failing key (computegraph-rs c20e891): O(1) hash, unmemoised structural ``==``."""

    __slots__ = ()
    strategy = "structural"
    __hash__ = Key.__hash__      # defining __eq__ would otherwise remove it

    def __eq__(self, other):
        # a == b  iff  a is b, or the same node with every pair of inputs equal: depth first,
        # inputs left to right, no memo, stop at the first difference; one key visit per
        # node pair.  The recursion runs on explicit stacks (any depth), one entry per open
        # level: the two input tuples and the index of the next pair to compare.
        left, right, next_pair = [(self,)], [(other,)], [0]
        while next_pair:
            i = next_pair[-1]
            if i == len(left[-1]):                     # level done: back to its parent
                left.pop(), right.pop(), next_pair.pop()
                continue
            next_pair[-1] = i + 1
            a, b = left[-1][i], right[-1][i]
            COUNTER.visits += 1
            if a is b:                                 # Arc::ptr_eq shortcut
                continue
            if not a._same_node(b):
                return False
            if a.inputs:                               # into every input, no memo
                left.append(a.inputs), right.append(b.inputs), next_pair.append(0)
        return True


class MemoKey(Key):
    """Structural ``==`` with the identity shortcut and a memo of compared node pairs."""

    __slots__ = ()
    strategy = "memo"
    __hash__ = Key.__hash__

    def __eq__(self, other):
        return _memo_eq(self, other)


def _memo_eq(a, b):
    """``==`` of two keys with a memo of the node pairs already found equal in this comparison.

    :class:`StructuralKey`'s walk (same order, one key visit per node pair reached), except
    that a pair found equal before is not entered again.  The first difference ends the
    whole comparison, so the memo only ever holds equal pairs.
    """
    equal = set()
    left, right, pairs, next_pair = [(a,)], [(b,)], [None], [0]
    while next_pair:
        i = next_pair[-1]
        if i == len(left[-1]):                         # every input pair was equal
            left.pop(), right.pop(), next_pair.pop()
            equal.add(pairs.pop())
            continue
        next_pair[-1] = i + 1
        x, y = left[-1][i], right[-1][i]
        COUNTER.visits += 1
        if x is y:
            continue
        xy = (id(x), id(y))
        if xy in equal:
            continue
        if not x._same_node(y):
            return False
        left.append(x.inputs), right.append(y.inputs), pairs.append(xy), next_pair.append(0)
    return True


class InternedKey(Key):
    """Hash-consed key: one object and one int ``id`` per distinct structure; ``==`` is O(1)."""

    __slots__ = ("id", "__weakref__")
    strategy = "interned"
    __hash__ = Key.__hash__

    def __eq__(self, other):
        COUNTER.visits += 1
        return self.id == other.id


#: The interning table: (prim, params, slot, input ids) -> the one live key with that
#: structure.  Weak: an entry goes when no value, key or program uses its key any more.
_INTERNED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
#: Interned ids come from a counter and are never reused, so a dead key's signature (which
#: names its inputs' ids) can never be met again.
_interned_ids = itertools.count()


def interned_count():
    """Number of live interned keys (entries of the interning table)."""
    return len(_INTERNED)


def make_key(strategy, prim, params=(), inputs=(), slot=0):
    """The key of ``prim(*inputs)[slot]`` under ``strategy``.

    ``structural`` and ``memo`` build a new object every time (so two builds of the same
    structure are equal but not identical); ``interned`` returns the existing object if this
    structure is alive (one interning lookup, counted as one key visit).
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
        key.id = next(_interned_ids)
        _INTERNED[signature] = key
    return key


def fresh_leaf_key(strategy, prim="input"):
    """A key that is equal to no other: a new leaf (an input, or a constant)."""
    return make_key(strategy, prim, (next(_fresh_ids),))


def postorder(key):
    """Distinct nodes of a key DAG, inputs before users (by object identity)."""
    return topological([key], lambda node: reversed(node.inputs))


def topological(roots, children):
    """Distinct nodes reachable from ``roots``, children before parents (by object identity).

    ``children(node)`` gives a node's children; nodes are never hashed (no key visits).
    """
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
    for node in postorder(key):
        size[id(node)] = 1 + sum(size[id(i)] for i in node.inputs)
    return size[id(key)]


def path_count(key, target):
    """Number of distinct paths from ``key`` down to ``target`` in the key DAG (nodes matched
    by identity).  A structural comparison of ``key`` with an independent copy visits the
    subtree of ``target`` once per path; this is the "base" a fan-out produces."""
    paths = {}
    for node in postorder(key):
        paths[id(node)] = 1 if node is target else sum(paths[id(i)] for i in node.inputs)
    return paths[id(key)]


def dag_size(key):
    """Distinct nodes of ``key``'s DAG (by object identity)."""
    return len(postorder(key))


def count_visits(fn):
    """``(fn(), key visits during the call)``: the counter's difference, never a reset."""
    start = COUNTER.visits
    result = fn()
    return result, COUNTER.visits - start
