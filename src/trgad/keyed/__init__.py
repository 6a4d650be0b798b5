"""The keyed engine: a graph engine whose transform fails like tenferro-rs 0.8.0's.

:mod:`~trgad.keyed.keys` (value keys, their walks and the visit counter),
:mod:`~trgad.keyed.keylayout` (how keys lay out a tree), :mod:`~trgad.keyed.engine` (values
and the transforms), :mod:`~trgad.keyed.sweeps` (the transform's steps),
:mod:`~trgad.keyed.rules` (each primitive's rules),
:mod:`~trgad.keyed.program` (derivative programs), :mod:`~trgad.keyed.keyed_trg` (the TRG on
the engine: the whole graph and the staged fix), :mod:`~trgad.keyed.chain` (the mul chain).
Imports the JAX core and the runtime.
"""
