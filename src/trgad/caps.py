"""Caps for the long demonstrations, in one place.

The default gives the full story.  ``TRGAD_PREVIEW=1`` (environment) gives a quick preview
build: smaller sweeps, shorter caps and timeouts.  Every chapter and the benchmark read their
limits from here, and each page prints the caps it used.  The book's build extension
(``_ext/buildext.py``) reads :data:`PREVIEW` from here too, to label its timing report.
"""
import os

from .validate import InputError

_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def parse_preview(value):
    """The ``TRGAD_PREVIEW`` setting as a bool: unset or empty is False.

    Accepts 1/true/yes/on and 0/false/no/off (any case, surrounding spaces ignored); any
    other value raises :class:`trgad.validate.InputError` with a one-line message naming it.
    """
    word = (value or "").strip().lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise InputError(f"TRGAD_PREVIEW={value!r} is not known: use 1, true, yes or on for a "
                     f"preview build, 0, false, no, off or empty for the full one")


#: True when the environment asks for a quick preview build.
PREVIEW = parse_preview(os.environ.get("TRGAD_PREVIEW"))

#: A sweep of transform times stops after the first measurement above this (seconds).
TRANSFORM_CAP_SECONDS = 0.3 if PREVIEW else 1.5
#: Hard timeout for the run that is expected not to return (seconds, subprocess killed).
HANG_TIMEOUT_SECONDS = 5.0 if PREVIEW else 20.0
#: Timed repeats after one warm-up (min is reported).
REPEATS = 1 if PREVIEW else 3
#: TRG steps in the phenomenon's JAX table.
PHENOMENON_STEPS = (1, 2, 3, 4, 5) if PREVIEW else (1, 2, 3, 4, 5, 20)
#: Number of beta values in the u(beta) scan of the Ising chapter.
BETA_POINTS = 7 if PREVIEW else 21
#: TRG steps for the whole-graph automatic second derivative in the staged chapter.
AUTODIFF_C_STEPS = 6 if PREVIEW else 20
#: TRG steps used for the u(beta) scan.
SCAN_STEPS = 12 if PREVIEW else 20
#: TRG steps of the keyed engine's eager forward mode in the mul-chain chapter.
FORWARD_EAGER_STEPS = 8 if PREVIEW else 20
#: Numbers of TRG steps whose jax.grad the Ising chapter takes through JAX's own SVD rule
#: (NaN from 5 steps; each is one small compiled gradient).
STOCK_RULE_STEPS = (4, 5) if PREVIEW else (1, 2, 3, 4, 5, 6)
#: Bond dimensions of the Ising chapter's convergence figure.  Each point costs a NumPy
#: schedule and an eager second derivative of the whole graph; one point at chi = 32 (a
#: 1024 x 1024 SVD per split: the cost grows like chi**6) costs more than the four smaller
#: chi together.
CONV_CHIS = (8, 12, 16) if PREVIEW else (8, 12, 16, 24, 32)
#: Largest chi of that figure at beta = 0.3 and near beta_c: chi = 32 is spent only near
#: beta_c, where the truncation error is largest.
CONV_CHI_MAX = (16, 16) if PREVIEW else (24, 32)
#: TRG steps of that figure at beta = 0.3 and near beta_c (2**steps sites; the chapter prints
#: how many correlation lengths wide each torus is).
CONV_STEPS = (10, 12) if PREVIEW else (12, 16)

# ---- the modes of differentiation (trgad.modes, trgad.bench, trgad.params, trgad.transition)
#: TRG steps at which the methods are compared side by side (bench.methods, modes).
MODES_STEPS = 8 if PREVIEW else 20
#: Steps of the growth measurement (book/modes.md: memory per method; bench.growth).  Each
#: count has at least two full-size steps (input bond dimension chi = 16 from step 5 on),
#: so the bytes added per full-size step are comparable.
GROWTH_STEPS = (6, 8) if PREVIEW else (10, 20, 40)
#: A method's growth sweep stops after the first call that took longer than this (seconds).
GROWTH_CAP_SECONDS = 30.0 if PREVIEW else 60.0
#: TRG steps at which the specific heat is compared across methods (bench.second_order_costs;
#: book/modes.md): 3 steps, where the TRG truncates nothing and the exact 8-site torus is
#: the oracle (a first call is mostly compilation, which hardly depends on the steps).
SECOND_STEPS = 3
#: TRG steps of the many-parameter gradients (params.compare).
PARAMS_STEPS = 4 if PREVIEW else 6
#: Number of betas in the c(beta) scan across the transition (transition.beta_grid).
C_SCAN_POINTS = 9 if PREVIEW else 41
#: Bond dimensions of the c(beta) scan.
C_SCAN_CHIS = (4, 8) if PREVIEW else (8, 16)
#: TRG steps of the c(beta) scan (2**steps sites).
C_SCAN_STEPS = 10 if PREVIEW else 20
#: Extra betas between the neighbours of the coarse peak (transition.refine).
C_REFINE_POINTS = 2 if PREVIEW else 4

# ---- the same trap elsewhere (book/elsewhere.md, trgad.elsewhere); kept in their own block
#: Mul-chain depths that HIPS autograd differentiates at x0 = 2 (the gradient 2**depth is
#: checked against chain.analytic_grad, finite up to depth 61).
ELSEWHERE_AUTOGRAD_DEPTHS = (8, 15, 30, 60)
#: Mul-chain depths whose equality is counted: SymPy's ``==``, CPython's tuple ``==`` and
#: the keyed engine's structural key visits (all about double per layer).
ELSEWHERE_EQ_DEPTHS = tuple(range(2, 11, 2)) if PREVIEW else tuple(range(2, 15, 2))
#: Iterations of the logistic map whose SymPy derivative is counted (the tree grows about
#: 2.5x per layer; sympy.count_ops walks it).
ELSEWHERE_SYMPY_DEPTHS = tuple(range(1, 7)) if PREVIEW else tuple(range(1, 9))
#: Orders of jax.grad nested on sin(x) exp(x) (its jaxpr grows about 2.2x per order).
ELSEWHERE_GRAD_ORDERS = tuple(range(1, 7)) if PREVIEW else tuple(range(1, 9))
#: Orders of Taylor mode (jax.experimental.jet) on the same function.
ELSEWHERE_JET_ORDERS = tuple(range(1, 9)) if PREVIEW else tuple(range(1, 13))
#: Nesting depths of lax.cond in the jax-ml/jax #8184 and #8193 reproductions.
ELSEWHERE_COND_DEPTHS = (3, 6, 12) if PREVIEW else (3, 6, 9, 12, 18, 24)


def describe():
    """One line naming the caps in force (pages print it)."""
    mode = "preview (TRGAD_PREVIEW on)" if PREVIEW else "full"
    return (f"{mode} build: transform cap {TRANSFORM_CAP_SECONDS:g} s, hang timeout "
            f"{HANG_TIMEOUT_SECONDS:g} s, {REPEATS} repeat(s) after a warm-up")

# ---- fixed points (book/fixed-points.md, trgad.fixedpoint) ---------------------------------
#: Circumference L of the Ising cylinder whose row transfer matrix (2**L x 2**L, dense) the
#: fixed-point page iterates; exact diagonalisation costs O(8**L).
FIXEDPOINT_L = 6 if PREVIEW else 8
#: Largest iteration count of the page's stopped-early sweep (the errors reach rounding
#: within it near beta_c at the full L).
FIXEDPOINT_SWEEP = 40 if PREVIEW else 60

# ---- tensorgrad's broadened SVD rule on the TRG (book/broadened.md) -------------------------
#: TRG steps at which tensorgrad's broadened rule is compared with the exact one (even, so
#: that the torus is square and Kaufman's L x L value applies; 20 is the size of the recorded
#: tensorgrad run).  Each rule compiles one second-order program of this many steps.
BROADENED_STEPS = 8 if PREVIEW else 20
#: Broadenings epsilon of that page's scan at beta = 0.3 (each is one more call of the
#: compiled program; tensorgrad's 1e-12 is always computed).
BROADENED_EPSILONS = (1e-10, 1e-12) if PREVIEW else (1e-8, 1e-10, 1e-12, 1e-14, 1e-16)
