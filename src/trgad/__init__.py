"""trgad: whole-graph versus staged differentiation of the Ising TRG.

The package behind the book.  Importing it switches JAX to float64
(``jax_enable_x64``), which every result here needs, and limits NumPy's BLAS to one thread.

Modules, one concept each:

* :mod:`trgad.ising`  - the Ising site tensor T(beta) whose contraction is Z.
* :mod:`trgad.trg`    - Levin-Nave TRG, written once for JAX / NumPy / the keyed engine.
* :mod:`trgad.svd`    - truncated SVD with a reverse rule that is finite on degenerate spectra.
* :mod:`trgad.exact`  - exact small tori and Onsager's solution (the oracles).
* :mod:`trgad.whole`  - whole-graph gradients: ``jax.grad``, and the keyed engine's.
* :mod:`trgad.engine` - a keyed graph engine whose transform fails like tenferro-rs 0.8.0's:
  values and transforms; its keys in :mod:`trgad.keys`, its primitives' rules in
  :mod:`trgad.rules`, its derivative programs in :mod:`trgad.program`.
* :mod:`trgad.chain`  - the minimal reproduction: the mul chain y <- y**K / K.
* :mod:`trgad.timing` - time a call, a capped sweep, a subprocess with a hard timeout.
* :mod:`trgad.validate` - input checks with one-line messages.
"""
import jax as _jax
from threadpoolctl import threadpool_limits as _threadpool_limits

_jax.config.update("jax_enable_x64", True)

from .exact import BETA_C, onsager, torus_exact  # noqa: E402
from .trg import lnz_per_site, trg_step, truncation_schedule  # noqa: E402
from .svd import truncated_svd  # noqa: E402
from .timing import capped_sweep, run_with_timeout, time_call  # noqa: E402
from .validate import InputError  # noqa: E402

# NumPy's and SciPy's OpenBLAS run single-threaded: on the 2-core machines this book is
# built on, two BLAS threads made a 256 x 256 np.linalg.svd about 18x slower (344 ms
# against 19 ms) once another process shared the cores.  JAX's XLA kernels are not affected by this limit.
_threadpool_limits(1, user_api="blas")

__all__ = [
    "BETA_C", "onsager", "torus_exact",
    "lnz_per_site", "trg_step", "truncation_schedule", "truncated_svd",
    "capped_sweep", "run_with_timeout", "time_call",
    "InputError",
]
