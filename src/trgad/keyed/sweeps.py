"""The keyed engine's transform, step by step (:func:`trgad.keyed.engine.vjp` and
:func:`~trgad.keyed.engine.jvp` run them in order, counting each step's key visits):

a. :func:`value_table` - the eager runtime's table from each traced value's key to its array;
b. :func:`materialise` - the graph rebuilt with fresh keys, deduplicated by key;
c. :func:`fetch_residuals` - every value of the copy looked up in the table by its key;
d. :func:`reverse_sweep` or :func:`forward_sweep` - the derivative program, one rule
   (:mod:`trgad.keyed.rules`) per operation, environments keyed by value key.

Each lookup compares keys; how much a comparison costs is the key strategy's
(:mod:`trgad.keyed.keys`), which is what the book measures.
"""
from __future__ import annotations

from .keys import make_key
from .rules import JVP_RULES, MULTI_OUTPUT, VJP_RULES


def value_table(leaves, user_ops):
    """a. The eager runtime's value table: key of every traced value -> its array."""
    table = {}
    for v in leaves:
        table[v.key] = v.data
    for op in user_ops:
        for key, data in zip(op.out_keys, op.out_data):
            table[key] = data
    return table


def materialise(strategy, leaves, user_ops):
    """b. Rebuild the graph with fresh keys, deduplicated by key (CSE).

    Returns ``(copy_of, nodes, ops)``: user key -> copy key (same objects on both sides,
    cheap lookups); the copy's dedup table (copy key -> copy key); and the copy's
    operations ``(prim, params, input copy keys, output copy keys)`` in trace order, each
    once: an op whose outputs' keys are already in the copy (the same primitive applied
    again to the same inputs, e.g. ``abs(x)`` computed twice) is that value, not a second
    use of it, so the sweeps must not run its rule twice (they did, and counted its
    cotangent twice).
    """
    copy_of, nodes, ops = {}, {}, []
    for v in leaves:
        k = make_key(strategy, v.key.prim, v.key.params)
        copy_of[v.key] = nodes.setdefault(k, k)
    for op in user_ops:
        ins = [copy_of[v.key] for v in op.inputs]
        outs, new = [], False
        for slot, user_key in enumerate(op.out_keys):
            k = make_key(strategy, op.prim, op.params, ins, slot)
            size = len(nodes)
            k = nodes.setdefault(k, k)
            new = new or len(nodes) > size
            copy_of[user_key] = k
            outs.append(k)
        if new:
            ops.append((op.prim, op.params, ins, outs))
    return copy_of, nodes, ops


def fetch_residuals(em, nodes, table):
    """c. Every value of the copy, fetched from the value table by the copy's key and
    loaded into a register of the program: copy key -> register."""
    residual = {}
    for k in nodes:
        residual[k] = em.load(k, table[k])
    return residual


def reverse_sweep(em, ops, residual, wrt_key, seeds):
    """d. The reverse sweep: a cotangent environment keyed by value key.

    ``seeds`` are ``(copy key, cotangent array)`` of the outputs.  Only values that
    depend on ``wrt_key`` get cotangents.  Returns the environment (key -> register).
    """
    active = {wrt_key}
    for prim, params, ins, outs in ops:
        if any(k in active for k in ins):
            active.update(outs)
    ct_env = {}

    def accumulate(k, reg):
        old = ct_env.get(k)
        ct_env[k] = reg if old is None else em.add(old, reg)

    for k, seed in seeds:
        if k in active:
            accumulate(k, em.const(seed))
    for prim, params, ins, outs in reversed(ops):
        cts = [ct_env.get(k) for k in outs]
        if all(c is None for c in cts):
            continue
        in_regs = [residual[k] for k in ins]
        out_regs = [residual[k] for k in outs]
        in_cts = VJP_RULES[prim](em, params, in_regs, out_regs, cts if prim in MULTI_OUTPUT else cts[0])
        for k, c in zip(ins, in_cts):
            if k in active:
                accumulate(k, c)
    return ct_env


def forward_sweep(em, ops, residual, wrt_key, tangent):
    """d. The forward sweep: a tangent environment keyed by value key, seeded with the
    register ``tangent`` at ``wrt_key``.  Returns the environment (key -> register)."""
    t_env = {wrt_key: tangent}
    for prim, params, ins, outs in ops:
        ts = [t_env.get(k) for k in ins]
        if all(t is None for t in ts):
            continue
        out_regs = [residual[k] for k in outs]
        out_ts = JVP_RULES[prim](em, params, [residual[k] for k in ins], out_regs, ts)
        for k, reg, t in zip(outs, out_regs, out_ts):
            t_env[k] = em.broadcast_to(t, reg.shape)
    return t_env
