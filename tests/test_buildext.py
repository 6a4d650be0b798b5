"""_ext/buildext.py: the build re-reads every page exactly when what the pages compute with changes."""
import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("buildext", ROOT / "_ext" / "buildext.py")
buildext = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(buildext)


def _tree(tmp_path):
    src = tmp_path / "src" / "pkg"
    src.mkdir(parents=True)
    (src / "a.py").write_text("x = 1\n")
    return tmp_path


def test_key_follows_src_contents_and_caps_mode(tmp_path):
    root = _tree(tmp_path)
    key = buildext.inputs_key(root, "full")
    assert key == buildext.inputs_key(root, "full")
    assert key.startswith("full-") and buildext.inputs_key(root, "preview").startswith("preview-")
    assert buildext.inputs_key(root, "preview")[-16:] != key[-16:]
    (root / "src" / "pkg" / "a.py").write_text("x = 2\n")
    assert buildext.inputs_key(root, "full") != key


def test_key_ignores_bytecode_and_build_metadata(tmp_path):
    root = _tree(tmp_path)
    key = buildext.inputs_key(root, "full")
    (root / "src" / "pkg" / "__pycache__").mkdir()
    (root / "src" / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0\1")
    (root / "src" / "pkg.egg-info").mkdir()
    (root / "src" / "pkg.egg-info" / "PKG-INFO").write_text("Version: 1\n")
    assert buildext.inputs_key(root, "full") == key
    shutil.rmtree(root / "src" / "pkg" / "__pycache__")
    (root / "src" / "pkg" / "b.py").write_text("")
    assert buildext.inputs_key(root, "full") != key


def test_times_report_names_the_caps():
    report = {"caps": "preview", "wall_seconds_sphinx": 12.0,
              "pages": [{"page": "book/a", "method": "inline", "seconds": 4.0},
                        {"page": "book/b", "method": "inline", "seconds": None}]}
    lines = buildext.format_times(report).splitlines()
    assert lines[1].split() == ["book/a", "inline", "4.0"] and lines[2].split() == ["book/b", "inline", "-"]
    assert lines[-3].split()[-1] == "4.0" and lines[-2].split()[-1] == "12.0" and lines[-1] == "caps: preview"


def test_build_jobs_default_to_the_usable_cpus_and_refuse_bad_values():
    import pytest

    assert buildext.build_jobs(None, 2) == 2 and buildext.build_jobs("", 3) == 3
    assert buildext.build_jobs("1", 2) == 1 and buildext.build_jobs(" 4 ", 2) == 4
    assert buildext.build_jobs(None, 0) == 1
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(ValueError, match="TRGAD_BUILD_JOBS="):
            buildext.build_jobs(bad, 2)


def test_the_extensions_marked_parallel_safe_still_declare_nothing():
    # if one starts declaring itself, the mark is no longer needed (or it says it is unsafe)
    import importlib
    from unittest import mock

    from sphinx.environment.collectors.toctree import TocTreeCollector

    saved = TocTreeCollector.assign_section_numbers      # sphinx_multitoc_numbering patches it
    try:
        for name in buildext.UNDECLARED_BUT_SAFE:
            metadata = importlib.import_module(name).setup(mock.MagicMock())
            assert not (isinstance(metadata, dict) and "parallel_read_safe" in metadata), name
    finally:
        TocTreeCollector.assign_section_numbers = saved
