"""The probe's built-in iterative graphs: step functions of plain Python (``+ - * /``), each
with a starting state (:data:`BUILTINS`), and the names the command line accepts
(:data:`GRAPHS`: these and "trg", the whole-graph TRG by steps).
"""
from __future__ import annotations

#: Graph names the command line accepts besides ``module:function``.
GRAPHS = ("chain", "trg", "power", "newton", "evolve")


def chain_step(y):
    """The source report's mul chain: y <- (y * y) / 2 (each value used twice)."""
    return (y * y) / 2.0


def power_step(state):
    """One power-iteration step for A = [[2, 1], [1, 3]]: v <- A v / (sum of A v).

    The 1-norm of a positive vector needs no abs or sqrt; the first component converges to
    the dominant eigenvector's first entry.  Each old component feeds both a2 and b2, and
    each of those is used twice (numerator and norm), so every old component reaches every
    new one along 3 paths: the path-count matrix per step is [[3, 3], [3, 3]] (largest
    eigenvalue 6, the asymptotic base of a structural key walk).
    """
    a, b = state
    a2 = 2.0 * a + b
    b2 = a + 3.0 * b
    n = a2 + b2
    return a2 / n, b2 / n


def newton_step(x):
    """Newton's method for sqrt(2): x <- (x + 2/x) / 2 (x used twice per step)."""
    return (x + 2.0 / x) / 2.0


def evolve_step(state, dt=0.1):
    """Symplectic Euler for a harmonic oscillator: p <- p - dt q; q <- q + dt p.

    A linear time-evolution loop: every operation is linear, yet q and p feed each other.
    Paths per step: p2 <- (q: 1, p: 1), q2 <- (q: 2, p: 1), a path-count matrix
    [[2, 1], [1, 1]] whose largest eigenvalue is (3 + sqrt 5)/2 = 2.618 (the golden ratio
    squared), so a structural key of q after n steps holds about 2.618**n paths.
    """
    q, p = state
    p2 = p - dt * q
    q2 = q + dt * p2
    return q2, p2


#: Built-in graphs: name -> (step, x0, description).  "trg" is handled by :func:`trg_growth`.
BUILTINS = {
    "chain": (chain_step, 1.1, "mul chain y <- (y*y)/2"),
    "power": (power_step, (1.0, 0.5), "power iteration v <- A v / |A v|_1, A = [[2, 1], [1, 3]]"),
    "newton": (newton_step, 1.5, "Newton iteration x <- (x + 2/x)/2 for sqrt(2)"),
    "evolve": (evolve_step, (1.0, 0.0), "harmonic oscillator, symplectic Euler, dt = 0.1"),
}
