"""trgad: whole-graph versus staged differentiation of the Ising TRG.

The package behind the book.  Importing it switches JAX to float64 (``jax_enable_x64``),
which every result here needs, chooses XLA's compile options for quick compilation of its
own programs (:func:`trgad.runtime.compiled.options`, passed to each ``jax.jit``), points
JAX's persistent compilation cache at trgad's folder (:mod:`trgad.runtime.cache`) and
limits NumPy's BLAS to one thread.

The rooms, one subpackage each, in layers; an import between rooms only points down the
list, never up or round a circle (``tests/test_layers.py`` checks it on the folders):

* **Front ends** (the top level) - :mod:`~trgad.cli` (``python -m trgad``) and
  :mod:`~trgad.bench` (every mode timed in one run).
* :mod:`trgad.growth` - the growth probe: does a transform grow exponentially with depth?
* :mod:`trgad.keyed` - the keyed engine, a graph engine whose transform fails like
  tenferro-rs 0.8.0's, the TRG on it and its staged fix, the mul chain.
  :mod:`trgad.harness` - tenferro-rs itself: the book's Rust harness, run as a child.
  :mod:`trgad.topics` - Part II's topics: many parameters, the transition, fixed points,
  the trap elsewhere, the broadened rule, the impurity method.
* :mod:`trgad.physics` - the JAX core: the Ising tensor, the TRG, the SVD and its rules,
  the whole-graph and staged derivatives, every mode behind one entry point, the exact
  oracles.  :mod:`trgad.pages` - the book's support: numbers and tables, recorded figures,
  the machine report, flow charts, every page's caps.
* :mod:`trgad.runtime` - input ranges and their one error, timing, compile options
  and the compilation cache.

Each room's docstring lists its modules; a chapter imports from the rooms.  ``trgad`` itself
sets JAX to float64 and XLA's options, and names :class:`InputError`.

Input is checked once, where it enters (:mod:`trgad.runtime.validate`, one
:class:`InputError` naming the value and its range): the command line, and the public API,
the functions a chapter calls - the TRG's (``trg.truncation_schedule``,
``lnz_per_site``, ``lnz_terms``, ``cut_spectra``), the derivatives'
(``modes.value_and_derivatives``, ``modes.program``, ``modes.lnz_scanned``,
``staged.value_and_grad_jax``, ``cotangents``,
``whole.value_and_grad``, ``heat.specific_heat``), the exact oracles, the keyed engine's
(``chain.run``, ``chain.sweep``, ``keyed_trg.trg_whole``, ``value_and_grad_engine``), the
probe's (``probe.growth``, ``probe.trg_growth``), ``tenferro.whole``, the topics' functions
and ``bench.run``.  Functions only trgad calls trust their callers; where a checked function
is needed inside, trgad calls its ``*_unchecked`` twin (``trg.truncation_schedule_unchecked``,
``modes.value_and_derivatives_unchecked``, ...); ``tests/test_check_once.py`` counts the checks
of every command and of the public functions.
"""
import jax as _jax
from threadpoolctl import threadpool_limits as _threadpool_limits

_jax.config.update("jax_enable_x64", True)

from .runtime import compiled as _compiled  # noqa: E402

_compiled.setup()   # XLA's compile options (trgad.runtime.compiled): a user's XLA_FLAGS wins

from .runtime import cache as _cache  # noqa: E402

_cache.setup()   # JAX's persistent compilation cache, shared by every process (trgad.runtime.cache)

from .runtime.validate import InputError  # noqa: E402

# NumPy's OpenBLAS runs single-threaded (SciPy's too when loaded before this; trgad loads
# SciPy only for Onsager's integral, which uses no BLAS): on a machine whose few cores other
# processes share, two BLAS threads made a 256 x 256 np.linalg.svd many times slower (a
# thread that waits for a busy core holds up the other).  JAX's XLA kernels are not
# affected by this limit.
_threadpool_limits(1, user_api="blas")

__all__ = ["InputError"]
