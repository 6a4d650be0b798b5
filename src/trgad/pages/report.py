"""What the reproducibility appendix reports: the software, the machine and the caps of a build.

Each function returns rows of (name, value) strings for :func:`trgad.pages.show.grid`, read from the
running process (``importlib.metadata``, ``platform``, ``os``, ``/proc/cpuinfo``) and from
:mod:`trgad.pages.caps`, so the appendix shows what this build really ran with.
"""
from __future__ import annotations

import os
import platform
from importlib import metadata

from . import caps
from ..runtime import compiled

#: The distributions whose versions the appendix lists, in order.
SOFTWARE = ("jax", "jaxlib", "numpy", "scipy", "matplotlib", "myst-nb", "jupyter-book", "trgad")


def version(dist: str) -> str:
    """The installed version of distribution ``dist``, or "not installed"."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def software_rows():
    """[("Python", version), (distribution, version) for each of :data:`SOFTWARE`, ("XLA
    options", the compile options in force, :func:`trgad.runtime.compiled.options`)]."""
    options = " ".join(f"{k}={str(v).lower()}" for k, v in compiled.options().items()) or "none"
    return ([("Python", platform.python_version())] + [(d, version(d)) for d in SOFTWARE]
            + [("XLA options (trgad.runtime.compiled)", options)])


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def usable_threads() -> int:
    """Hardware threads this process may run on (its CPU affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # not on Linux
        return os.cpu_count() or 1


def machine_rows():
    """The CPU, the threads, the OS, JAX's backend and devices, the float width, and the
    load average when called (where the OS has one)."""
    import jax

    rows = [("CPU model", cpu_model()),
            ("hardware threads (os.cpu_count)", str(os.cpu_count())),
            ("threads this process may use", str(usable_threads())),
            ("operating system", f"{platform.system()} {platform.release()} ({platform.machine()})"),
            ("JAX backend and devices", f"{jax.default_backend()}: {', '.join(map(str, jax.devices()))}"),
            ("floating point", "float64" if jax.config.jax_enable_x64 else "float32")]
    if hasattr(os, "getloadavg"):
        rows.append(("load average (1, 5, 15 min)", ", ".join(f"{x:.1f}" for x in os.getloadavg())))
    return rows


def caps_rows():
    """("mode", "full" or "preview") and (name, value) for every upper-case constant of
    :mod:`trgad.pages.caps` (tuples as comma-separated values); the meaning of each is its
    ``#:`` comment in ``src/trgad/pages/caps.py``."""
    def shown(value):
        if isinstance(value, (tuple, list)):
            return ", ".join(map(str, value))
        return f"{value:g}" if isinstance(value, float) else str(value)

    names = [n for n in vars(caps) if n.isupper() and not n.startswith("_") and n != "PREVIEW"]
    return [("mode", "preview" if caps.PREVIEW else "full")] + [(f"`{n}`", shown(getattr(caps, n))) for n in names]
