"""trgad: whole-graph versus staged differentiation of the Ising TRG.

The package behind the book.  What ``import trgad`` changes in the process, and how your own
setting wins:

* JAX computes in float64 (``jax_enable_x64``): every result here needs it, so this one is
  not yours to turn off while using trgad.
* trgad's own programs compile with XLA options for quick compilation
  (:func:`trgad.runtime.compiled.options`, passed to each of its ``jax.jit``; your programs
  keep XLA's defaults); an option you name in ``XLA_FLAGS`` wins.
* JAX's persistent compilation cache goes to trgad's folder (:mod:`trgad.runtime.cache`,
  ``~/.cache/trgad``) and keeps every program; your own cache folder or switch
  (``JAX_COMPILATION_CACHE_DIR``, ``JAX_ENABLE_COMPILATION_CACHE``, or ``jax.config`` before
  the import) wins, and ``TRGAD_CACHE_DIR=`` (empty) turns trgad's off.
* NumPy's BLAS runs on one thread, unless you set ``OPENBLAS_NUM_THREADS``,
  ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS``.

Why at import, not in an explicit setup function: every use of trgad (each book page, the
tests, ``python -m trgad``, a reader's script) needs the first change, and a forgotten call
would give float32 numbers without a word; the others yield to the user's setting.

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
names :class:`InputError`.

Input is checked once, where it enters (:mod:`trgad.runtime.validate`, one
:class:`InputError` naming the value and its range): the command line, and the public API,
the functions a chapter calls - the TRG's (``trg.truncation_schedule``,
``lnz_per_site``, ``lnz_terms``, ``cut_spectra``), the derivatives'
(``modes.value_and_derivatives``, ``modes.program``, ``modes.lnz_scanned``,
``staged.value_and_grad_jax``, ``cotangents``,
``whole.value_and_grad``, ``heat.specific_heat``), the exact oracles, the keyed engine's
(``chain.run``, ``chain.sweep``, ``keyed_trg.trg_whole``, ``value_and_grad_engine``), the
probe's (``probe.growth``, ``probe.trg_growth``), ``tenferro.whole``, the topics' functions
and ``bench.run``.  Functions only trgad calls trust their callers.  A checked function is
written once and marked ``@checked(beta=check_beta, ...)`` (:func:`trgad.runtime.validate.checked`);
where trgad needs it inside, it calls its body, ``f.trusted`` (``trg.truncation_schedule.trusted``,
``modes.value_and_derivatives.trusted``, ...); ``tests/test_check_once.py`` counts the checks
of every command and of the public functions.
"""
import os as _os

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
# affected by this limit.  A thread count the user names wins.
if not any(_os.environ.get(v, "").strip()
           for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")):
    _threadpool_limits(1, user_api="blas")

__all__ = ["InputError"]
