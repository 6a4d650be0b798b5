"""Part II's topics, each built on the JAX core.

:mod:`~trgad.topics.params` (gradients in many parameters, reverse against forward mode),
:mod:`~trgad.topics.transition` (c(beta) across the transition),
:mod:`~trgad.topics.fixedpoint` (derivatives through a fixed point),
:mod:`~trgad.topics.elsewhere` (the same growth in other iterated maps),
:mod:`~trgad.topics.broadened` (the broadened SVD rule), :mod:`~trgad.topics.impurity`
(the impurity-tensor derivative).  Imports the JAX core and the runtime.
"""
