"""Part II's topics, each built on the JAX core.

:mod:`~trgad.topics.params` (gradients in many parameters, reverse against forward mode),
:mod:`~trgad.topics.transition` (c(beta) across the transition),
:mod:`~trgad.topics.fixedpoint` (derivatives through a fixed point, three ways),
:mod:`~trgad.topics.cylinder` (the Ising cylinder's transfer matrix and the loop's oracles),
:mod:`~trgad.topics.elsewhere` (the same trap in autograd, SymPy and CPython),
:mod:`~trgad.topics.nesting` (JAX's nested derivatives, Taylor mode and nested cond),
:mod:`~trgad.topics.broadened` (the broadened SVD rule), :mod:`~trgad.topics.impurity`
(u by an impurity tensor, no derivative: an oracle).  Imports the JAX core and the runtime.
"""
