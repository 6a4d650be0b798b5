"""trgad.pages.report: the rows the reproducibility appendix shows come from this process."""
import platform

from trgad.pages import caps
from trgad.pages import report


def test_software_rows_name_python_and_each_distribution():
    rows = dict(report.software_rows())
    assert rows["Python"] == platform.python_version()
    assert set(report.SOFTWARE) <= set(rows) and rows["trgad"] != "not installed"
    assert report.version("no-such-distribution-xyz") == "not installed"


def test_machine_rows():
    rows = dict(report.machine_rows())
    assert rows["floating point"] == "float64"            # trgad enables jax_enable_x64
    assert int(rows["threads this process may use"]) == report.usable_threads() >= 1
    assert rows["CPU model"]


def test_caps_rows_cover_every_cap_once():
    rows = report.caps_rows()
    assert rows[0] == ("mode", "preview" if caps.PREVIEW else "full")
    names = [n.strip("`") for n, _ in rows[1:]]
    assert len(names) == len(set(names)) and "REPEATS" in names and "PREVIEW" not in names
    assert dict(rows)["`REPEATS`"] == str(caps.REPEATS)
