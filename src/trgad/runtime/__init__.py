"""The runtime: what every other room leans on and that knows no physics.

:mod:`~trgad.runtime.validate` (the input ranges and their one error),
:mod:`~trgad.runtime.timing` (timing, time caps, jaxpr sizes),
:mod:`~trgad.runtime.children` (child processes under a hard timeout, ended on any signal),
:mod:`~trgad.runtime.compiled` (XLA's compile options and the registry of compiled programs),
:mod:`~trgad.runtime.cache` (JAX's persistent compilation cache) and
:mod:`~trgad.runtime.exports` (lowered programs kept on disk).  Imports no other room.
"""
