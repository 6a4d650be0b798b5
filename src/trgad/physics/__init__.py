"""The JAX core: the Ising TRG and its derivatives.

:mod:`~trgad.physics.ising` (the site tensor whose contraction is Z),
:mod:`~trgad.physics.trg` (Levin-Nave TRG, written once for JAX, NumPy and the keyed engine),
:mod:`~trgad.physics.svd` (truncated SVD and balanced split for JAX),
:mod:`~trgad.physics.svdrules` (their derivative rules, exact on degenerate spectra),
:mod:`~trgad.physics.whole` (one derivative of the whole graph),
:mod:`~trgad.physics.staged` (one VJP per step, and the exact staged second derivative),
:mod:`~trgad.physics.heat` (the specific heat from staged derivatives),
:mod:`~trgad.physics.modes` (every mode of differentiation behind one entry point),
:mod:`~trgad.physics.stepcost` (one full-size step and its pullback: the steady state's floor),
:mod:`~trgad.physics.exact` (exact small tori, Kaufman's torus and Onsager: the oracles).
Imports the runtime only.
"""
