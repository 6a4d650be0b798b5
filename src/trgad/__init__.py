"""trgad: whole-graph versus staged differentiation of the Ising TRG.

The package behind the book.  Importing it switches JAX to float64 (``jax_enable_x64``),
which every result here needs, chooses XLA's compile options for quick compilation of its
own programs (:func:`trgad.compiled.options`, passed to each ``jax.jit``), points JAX's persistent
compilation cache at trgad's folder (:mod:`trgad.cache`) and limits NumPy's BLAS to one
thread.

The rooms, one concept per module, in four layers; imports only point down the list, never
up or round a circle (``tests/test_layers.py`` checks it):

* **Front ends** - :mod:`~trgad.cli` (``python -m trgad``) and :mod:`~trgad.bench` (every
  mode timed in one run).
* **Engine side** - a graph engine whose transform fails like tenferro-rs 0.8.0's.
  :mod:`~trgad.keys` (value keys, their walks and the visit counter),
  :mod:`~trgad.engine` (values and the transforms), :mod:`~trgad.rules` (each primitive's
  rules), :mod:`~trgad.program` (derivative programs), :mod:`~trgad.keyed_trg` (the TRG on
  the engine: the whole graph and the staged fix), :mod:`~trgad.chain` (the mul chain),
  :mod:`~trgad.probe` (does a transform grow exponentially with depth?),
  :mod:`~trgad.tenferro` (tenferro-rs itself: the book's Rust harness, run as a child).
* **JAX core** - the physics and its derivatives.
  :mod:`~trgad.ising` (the site tensor whose contraction is Z),
  :mod:`~trgad.trg` (Levin-Nave TRG, written once for JAX, NumPy and the keyed engine),
  :mod:`~trgad.svd` (truncated SVD and balanced split with rules exact on degenerate spectra),
  :mod:`~trgad.whole` (one derivative of the whole graph), :mod:`~trgad.staged` (one VJP
  per step, and the exact staged second derivative), :mod:`~trgad.modes` (every mode of
  differentiation behind one entry point: whole, staged, forward_mode, checkpoint),
  :mod:`~trgad.params` (gradients in many parameters, reverse against forward mode),
  :mod:`~trgad.transition` (c(beta) across the transition), :mod:`~trgad.exact` (exact
  small tori, Kaufman's L x L torus and Onsager: the oracles).
* **Support** - :mod:`~trgad.validate` (input checks and their ranges), :mod:`~trgad.caps`
  (every demonstration's limits), :mod:`~trgad.timing` (timing, time caps, jaxpr sizes),
  :mod:`~trgad.compiled` (the registry of compiled programs), :mod:`~trgad.show` (numbers
  and tables in the chapters), :mod:`~trgad.recorded` (figures recorded elsewhere,
  labelled), :mod:`~trgad.verdict` and :mod:`~trgad.userstep` (the probe's rule and a
  user's step function).
"""
import jax as _jax
from threadpoolctl import threadpool_limits as _threadpool_limits

_jax.config.update("jax_enable_x64", True)

from . import compiled as _compiled  # noqa: E402

_compiled.setup()   # XLA's compile options (trgad.compiled): a user's XLA_FLAGS wins

from . import cache as _cache  # noqa: E402

_cache.setup()   # JAX's persistent compilation cache, shared by every process (trgad.cache)

from .exact import BETA_C, onsager, torus_exact  # noqa: E402
from .trg import lnz_per_site, trg_step, truncation_schedule  # noqa: E402
from .svd import balanced_split, truncated_svd  # noqa: E402
from .timing import capped_sweep, run_with_timeout, time_call  # noqa: E402
from .validate import InputError  # noqa: E402

# NumPy's OpenBLAS runs single-threaded (SciPy's too when loaded before this; trgad loads
# SciPy only for Onsager's integral, which uses no BLAS): on a machine whose few cores other
# processes share, two BLAS threads made a 256 x 256 np.linalg.svd many times slower (a
# thread that waits for a busy core holds up the other).  JAX's XLA kernels are not
# affected by this limit.
_threadpool_limits(1, user_api="blas")

__all__ = [
    "BETA_C", "onsager", "torus_exact",
    "lnz_per_site", "trg_step", "truncation_schedule", "balanced_split", "truncated_svd",
    "capped_sweep", "run_with_timeout", "time_call",
    "InputError",
]
