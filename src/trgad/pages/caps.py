"""Caps for the long demonstrations, in one place.

The default gives the full story.  ``TRGAD_PREVIEW=1`` (environment) gives a quick preview
build: smaller sweeps, shorter caps and timeouts.  Every chapter and the benchmark read their
limits from here, and each page prints the caps it used.  The book's build extension
(``_ext/buildext.py``) reads :data:`PREVIEW` from here too, to label its timing report.
"""
import os

from ..runtime.validate import InputError

_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def parse_preview(value):
    """The ``TRGAD_PREVIEW`` setting as a bool: unset or empty is False.

    Accepts 1/true/yes/on and 0/false/no/off (any case, surrounding spaces ignored); any
    other value raises :class:`trgad.runtime.validate.InputError` with a one-line message naming it.
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
#: Hard timeout for the run that is expected not to return (seconds, subprocess killed; the
#: child's start-up, importing JAX, is inside it).  Short, because the page that uses it
#: (book/phenomenon.md) shows what the killed run would have cost by counting its key
#: visits, not by waiting.
HANG_TIMEOUT_SECONDS = 3.0 if PREVIEW else 6.0
#: Timed repeats after one warm-up (min is reported).
REPEATS = 1 if PREVIEW else 3
#: Numbers of TRG steps whose jax.grad the SVD page (book/svd-degeneracy.md) takes through
#: JAX's own SVD rule (each a jitted gradient; NaN once equal discarded values appear).  Which
#: graphs are NaN depends on the LAPACK kernel: with OpenBLAS's Haswell kernel from 1 step,
#: with its SkylakeX kernel from 5, so the preview keeps 5.
STOCK_RULE_STEPS = (1, 2, 5) if PREVIEW else (1, 2, 3, 4, 5, 6)
#: Bond dimensions of the convergence figure of the TRG page (book/trg.md).  Each point
#: costs a NumPy schedule and a staged second derivative (forward over forward, one step at
#: a time: one compiled program per step shape).
CONV_CHIS = (4, 8) if PREVIEW else (4, 8, 16)
#: Largest chi of that figure at beta = 0.3 and near beta_c.
CONV_CHI_MAX = (8, 8) if PREVIEW else (16, 16)
#: TRG steps of that figure at beta = 0.3 and near beta_c (2**steps sites, an even number of
#: steps: the torus is square and Kaufman's exact value is the reference, so the errors are
#: the truncation's alone).
CONV_STEPS = (6, 6) if PREVIEW else (8, 8)

# ---- the phenomenon (book/phenomenon.md) --------------------------------------------------
#: TRG steps of the phenomenon's JAX rows: equations of the gradient jaxpr, make_jaxpr time
#: and the first jit(grad) call, compiled afresh (the expensive part).  Three consecutive
#: sizes show the exact per-step increase, one far away shows that it holds.
PHENOMENON_STEPS = (1, 2, 3, 8) if PREVIEW else (1, 2, 3, 20)
#: Most TRG steps whose whole-graph transform the phenomenon runs in its own process on the
#: keyed engine (structural keys: seconds at 3 steps); the next size runs in a child process
#: killed after HANG_TIMEOUT_SECONDS (it would take minutes).
PHENOMENON_ENGINE_STEPS = 3

# ---- tenferro-rs itself (trgad.harness.tenferro; book/phenomenon.md, mulchain.md, staged.md) ------
#: TRG steps whose whole-graph ad.grad the phenomenon runs in tenferro-rs (4 takes about a
#: second, transform and drop); the next size runs killed after TENFERRO_HANG_SECONDS.
TENFERRO_STEPS = (1, 2, 3, 4)
#: Hard timeout of tenferro-rs's 5-step whole-graph run (seconds; the report's was 60, and
#: its 5-step run did not return).  Here the 4-step transform takes about 0.6 s and the
#: 5-step one about 8 s, so a cap below that kills it; what the kill shows is a lower bound
#: on the factor per step, about this cap over the 4-step transform.
TENFERRO_HANG_SECONDS = 4.0
#: Depths of tenferro-rs's mul chain, by fan-out: the largest transform takes well under a
#: second (fan-out 2 at 22 layers, 3 at 14), and so does its drop; below ~10 ms a fixed
#: cost of about a millisecond flattens the fit of the base.
TENFERRO_CHAIN_DEPTHS = ({2: (16, 18, 20), 3: (11, 12, 13)} if PREVIEW
                         else {2: (16, 18, 20, 22), 3: (11, 12, 13, 14)})
#: Mul-chain depths at which tenferro-rs's calls of its key equality are counted exactly
#: (valgrind's callgrind, trgad.harness.tenferro.count; book/maintainers.md), by fan-out: three depths
#: fix the closed form A K**D + B D + C, the others check it.  Under callgrind the deepest
#: takes about 10 s; each count is kept per machine.
COUNT_CHAIN_DEPTHS = ({2: tuple(range(2, 9)), 3: tuple(range(2, 7))} if PREVIEW
                      else {2: tuple(range(2, 11)), 3: tuple(range(2, 8))})
#: TRG steps counted the same way, stock and fixed (book/rootcause.md; 3 steps: about 15 s
#: under callgrind).
COUNT_TRG_STEPS = (1, 2, 3)

#: TRG steps at which staged.md compares tenferro-rs's staged loop with the fixed build's
#: whole-graph ad.grad (time and the child's peak memory; 20 is the report's staged run,
#: a few seconds each).
STAGED_VS_FIXED_STEPS = (5, 10, 20)

# ---- tenferro-rs fixed: computegraph's equality patched (book/maintainers.md, phenomenon, staged)
#: Mul-chain depths counted in the fixed build, by fan-out: doubling depths to 32, where the
#: stock build's walk would take 2**32 calls; linear, so each count takes seconds.
FIXED_CHAIN_DEPTHS = {2: (4, 8, 16, 32), 3: (4, 8, 16, 32)}
#: TRG steps counted in the fixed build (4 steps: about a minute under callgrind, which runs
#: the gradient program too; 8 steps take over five).
FIXED_TRG_COUNT_STEPS = (1, 2, 3, 4)
#: TRG steps whose whole-graph ad.grad runs in the fixed build, up to the most allowed: the
#: growth from 16 to 64 steps is the page's test of "about linear".
FIXED_WHOLE_STEPS = (1, 2, 3, 4, 8, 16, 32, 64)

# ---- the modes of differentiation (trgad.physics.modes, trgad.bench, trgad.topics.params, trgad.topics.transition)
#: TRG steps at which the methods are compared side by side (bench.methods, modes).
MODES_STEPS = 8 if PREVIEW else 20
#: Steps of the growth measurement (book/modes.md: memory per method; bench.growth).  Each
#: count has at least two full-size steps (input bond dimension chi = 16 from step 5 on),
#: so the bytes added per full-size step are comparable.
GROWTH_STEPS = (6, 8) if PREVIEW else (10, 20, 40)
#: TRG steps at which the specific heat is compared across methods (bench.second_order_costs;
#: book/modes.md): 3 steps, where the TRG truncates nothing and the exact 8-site torus is
#: the oracle (a first call is mostly compilation, which hardly depends on the steps).
SECOND_STEPS = 3
#: TRG steps of the many-parameter gradients (params.compare).
PARAMS_STEPS = 4 if PREVIEW else 6

# ---- the same trap elsewhere (book/elsewhere.md, trgad.topics.elsewhere); kept in their own block
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
    """Three short lines naming the sizes and caps in force (pages print them at the top)."""
    mode = ("preview sizes (TRGAD_PREVIEW on)" if PREVIEW
            else "full sizes (TRGAD_PREVIEW=1: smaller)")
    return (f"{mode}; a sweep stops at a transform over {TRANSFORM_CAP_SECONDS:g} s;\n"
            f"a run that may not return is killed after {HANG_TIMEOUT_SECONDS:g} s "
            f"(tenferro-rs: {TENFERRO_HANG_SECONDS:g} s);\n"
            f"a steady time is the best of {REPEATS} calls after a warm-up")

# ---- fixed points (book/fixed-points.md, trgad.topics.fixedpoint) ---------------------------------
#: Circumference L of the Ising cylinder whose row transfer matrix (2**L x 2**L, dense) the
#: fixed-point page iterates; exact diagonalisation costs O(8**L).
FIXEDPOINT_L = 6 if PREVIEW else 8
#: Largest iteration count of the page's stopped-early sweep (the errors reach rounding
#: within it near beta_c at the full L).
FIXEDPOINT_SWEEP = 40 if PREVIEW else 60

# ---- tensorgrad's broadened SVD rule on the TRG (book/svd-degeneracy.md) ------------------------
#: TRG steps at which tensorgrad's broadened rule is compared with the exact one (even, so
#: that the torus is square and Kaufman's L x L value applies; 20 is the size of the recorded
#: tensorgrad run).  Each rule compiles one second-order program of this many steps.
BROADENED_STEPS = 8 if PREVIEW else 20
#: Broadenings epsilon of that page's scan at beta = 0.3 (each is one more call of the
#: compiled program; tensorgrad's 1e-12 is always computed).
BROADENED_EPSILONS = (1e-10, 1e-12) if PREVIEW else (1e-8, 1e-10, 1e-12, 1e-14, 1e-16)

# ---- the root cause (book/rootcause.md) -----------------------------------------------------
#: Mul-chain depths of the tiny transform with structural keys (the key visits about
#: double per layer: about 10**5 at depth 14).
ROOTCAUSE_STRUCTURAL_DEPTHS = tuple(range(2, 11, 2)) if PREVIEW else tuple(range(2, 15, 2))

# ---- the mul chain (book/mulchain.md) ------------------------------------------------------
#: Depths of that page's structural-key sweeps, by fan-out: the deepest costs about 10**6
#: exact key visits at fan-out 2 (the count doubles per layer) and 10**5 at fan-out 3.
MULCHAIN_DEPTHS = ({2: tuple(range(2, 13)), 3: tuple(range(2, 9))} if PREVIEW
                   else {2: tuple(range(2, 16)), 3: tuple(range(2, 11))})
#: Depths of that page's JAX and eager forward-mode sweeps (their cost per layer is constant).
MULCHAIN_DEEP_DEPTHS = (10, 20, 30) if PREVIEW else (10, 20, 30, 40)

# ---- how to detect it (book/detect.md) -----------------------------------------------------
#: Depths at which that page probes each graph with structural keys on the keyed engine (the
#: deepest costs about 10**5 key visits; the doubling rule needs the deepest >= 4 x the first;
#: power iteration keeps its full depths, whose fitted base the page compares with its paths).
DETECT_DEPTHS = ({"chain": (2, 4, 6, 8, 10), "newton": (2, 4, 6, 8, 10), "evolve": tuple(range(1, 9)),
                  "power": (1, 2, 3, 4, 5), "trg": (1, 2, 3)} if PREVIEW else
                 {"chain": (2, 4, 6, 8, 10, 12, 14), "newton": (2, 4, 6, 8, 10, 12),
                  "evolve": tuple(range(1, 11)), "power": (1, 2, 3, 4, 5), "trg": (1, 2, 3)})
#: Depths of that page's JAX probes (exact jaxpr equations; CPU time of make_jaxpr(grad)).
DETECT_DEPTHS_JAX = (4, 8, 16) if PREVIEW else (4, 8, 16, 32)
#: TRG steps of that page's JAX probe (make_jaxpr(grad) of the whole graph, not compiled).
DETECT_STEPS_JAX = (1, 2, 4)
#: Mul-chain depth of that page's transform/run/free split (the same in both builds: the
#: probe names the trap only when the transform takes at least probe.TRAP_MIN_SECONDS, and
#: at preview depths it is faster than that; about 2 * 10**5 key visits).
DETECT_SPLIT_DEPTH = 14

# ---- u(beta) and c(beta) across the transition (book/trg.md) --------------------------------
#: Bond dimensions of that page's scan (the smaller one shows a truncation overshoot).
TRANSITION_CHIS = (8, 16)
#: TRG steps of the scan (even: the torus is L x L with L = 2**(steps // 2), so Kaufman's
#: exact finite-torus c applies).
TRANSITION_STEPS = 12
#: Number of betas of the scan (transition.beta_grid between the two bounds below; each is
#: one staged second derivative per chi, compiled once per chi).
TRANSITION_POINTS = 4
#: The scanned range of beta (1/J), around beta_c.
TRANSITION_RANGE = (0.40, 0.48)

# ---- the staged cotangent as the environment (book/environment.md, trgad.topics.impurity) ----------
#: TRG steps of that page's environments and impurity method (even: an L x L torus, so
#: Kaufman's exact u applies; 20 is the book's reference size).
ENVIRONMENT_STEPS = 10 if PREVIEW else 20
