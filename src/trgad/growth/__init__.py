"""The growth probe: does a transform's cost grow exponentially with depth?

:mod:`~trgad.growth.probe` (the probe on JAX, the keyed engine or a user's step),
:mod:`~trgad.growth.sweep` (its sweep under a time budget),
:mod:`~trgad.growth.verdict` (the probe's result and its rule), :mod:`~trgad.growth.graphs`
(the built-in graphs), :mod:`~trgad.growth.userstep` (a user's step function).  Imports the keyed engine, the JAX core and the runtime.
"""
