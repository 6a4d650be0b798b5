"""The children's peak resident memory (trgad.runtime.children, ``peak_rss_mib``): against
the bytes a child touches, not inflated by this process's own memory (Linux's ru_maxrss
would carry it over at the fork), and, through the harness, growing with the TRG graph."""
import math
import sys

import pytest

from trgad.harness import tenferro
from trgad.runtime.children import run_command

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (VmHWM)")


def touched(mib, pause=0.1):
    """A child that writes every page of ``mib`` MiB, then waits ``pause`` s."""
    code = (f"import time; x = bytearray({mib} * 2**20)\n"
            f"for i in range(0, len(x), 4096): x[i] = 1\n"
            f"time.sleep({pause})")
    return run_command([sys.executable, "-c", code], 30)


@linux
def test_peak_is_the_memory_the_child_touched():
    small, large = touched(20), touched(300)
    assert small.status == 0 and large.status == 0
    # the interpreter itself: tens of MiB at most
    assert 20 <= small.peak_rss_mib < 20 + 60, small.peak_rss_mib
    assert 300 <= large.peak_rss_mib < 300 + 60, large.peak_rss_mib


@linux
def test_peak_does_not_include_the_parents_memory():
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"\1" * len(ballast[::4096])
    assert touched(20).peak_rss_mib < 100, "the child's own, not this process's 400 MiB"
    del ballast


@linux
@pytest.mark.skipif(not tenferro.available(build="fixed"), reason="trgad-tenferro-fixed not built")
def test_harness_peak_is_positive_and_grows_with_the_graph():
    small, large = (tenferro.whole(n, 0.3, 16, build="fixed") for n in (1, 16))
    for r in (small, large):
        assert isinstance(r["peak_rss_mib"], float) and math.isfinite(r["peak_rss_mib"])
        assert r["peak_rss_mib"] > 1
    assert large["peak_rss_mib"] > 2 * small["peak_rss_mib"], (small, large)
