"""Hostile inputs, fourth round: ``python -m trgad tenferro ...`` and the runner of its
programs.  No process outlives its command (SIGINT, SIGTERM, SIGHUP, its own timeout), no
kept count is printed unchecked, every stated range is the one enforced, a result that
cannot be written is one line and status 5, and the programs' answers are checked.

Most cases run stand-ins written here: a program (``TRGAD_TENFERRO_BIN``) that answers as
``trgad-tenferro`` does, or hangs, or lies, and a ``valgrind`` first on PATH that writes a
callgrind file, or hangs with a grandchild.  Oracles: the processes ``ps`` lists (each
stand-in carries this test's folder in its command line), the folders left in TMPDIR, the
exit status and stderr of a real ``python -m trgad``, and counts written by hand.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from trgad.harness import callgrind, tenferro
from trgad.runtime.validate import X0_MIN

from conftest import assert_error

PROGRAM = f"""#!{sys.executable}
import json, os, subprocess, sys, time
a = sys.argv[1:]
o = dict(zip(a[1::2], a[2::2]))
how = os.environ.get("FAKE_HOW", "answer")
if how == "hang":                       # a grandchild in its group, then no return
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", os.environ["FAKE_MARK"]])
    open(os.environ["FAKE_MARK"] + "/started", "w").close()
    time.sleep(1000)
if how == "kill":
    os.kill(os.getpid(), 9)
if how == "print":
    print(open(os.environ["FAKE_MARK"] + "/print").read())
    sys.exit(0)
print(json.dumps({{"mode": "chain", "depth": int(o["--depth"]), "fanout": int(o["--fanout"]),
                  "x0": float(o["--x0"]), "transform_ms": 1.5, "drop_ms": 0.5, "grad_ops": 7,
                  "run_ms": 0.1, "grad": 2.0 ** int(o["--depth"])}}))
"""

VALGRIND = f"""#!{sys.executable}
import os, subprocess, sys, time
with open(os.environ["FAKE_MARK"] + "/valgrind.log", "a") as f:
    f.write(sys.argv[1] + "\\n")
if sys.argv[1] == "--version":
    if os.environ.get("FAKE_VALGRIND") == "slow-version":
        time.sleep(1000)
    print("valgrind-3.99-stand-in")
    sys.exit(0)
if os.environ.get("FAKE_VALGRIND") == "hang":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", os.environ["FAKE_MARK"]])
    open(os.environ["FAKE_MARK"] + f"/started.{{os.getpid()}}", "w").close()
    time.sleep(1000)
o = dict(w.partition("=")[::2] for w in sys.argv[1:] if w.startswith("--"))
with open(o["--callgrind-out-file"], "w") as f:
    f.write("fn=(1) " + o["--toggle-collect"] + "\\ncfn=(2) " + {tenferro.KEY_EQ!r} + "\\ncalls=5 0\\n0 1\\n"
            "fn=(2)\\ncfn=(3) " + {tenferro.KEY_EQ!r} + "'2\\ncalls=7 0\\n0 1\\n")
"""


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """The stand-in program and valgrind, in this process and in the children it starts."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "tmp").mkdir()
    for path, text in ((tmp_path / "program", PROGRAM), (tmp_path / "bin" / "valgrind", VALGRIND)):
        path.write_text(text)
        path.chmod(0o755)
    monkeypatch.setenv("TRGAD_TENFERRO_BIN", str(tmp_path / "program"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MARK", str(tmp_path))
    monkeypatch.setenv("TRGAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


def left_running(mark, grace=3.0):
    """The processes ``ps`` lists whose command line holds ``mark`` (after ``grace`` s for
    init to reap the orphans), zombies left out."""
    deadline = time.monotonic() + grace
    while True:
        ps = subprocess.run(["ps", "-ww", "-eo", "pid=,stat=,args="], capture_output=True, text=True).stdout
        rows = [r for r in ps.splitlines() if mark in r and r.split(None, 2)[1][0] != "Z"]
        if not rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def callgrind_folders(tmp):
    return [p.name for p in (tmp / "tmp").iterdir() if p.name.startswith("trgad-callgrind-")]


def start(*args):
    """``python -m trgad *args`` as a real process, its output in pipes."""
    return subprocess.Popen([sys.executable, "-m", "trgad", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(predicate, seconds=120):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)


# ---- 1, 2: every way of stopping a command ends what it started -------------------------

@pytest.mark.parametrize("sig,status,words", [(signal.SIGTERM, 143, "stopped by SIGTERM"),
                                              (signal.SIGHUP, 129, "stopped by SIGHUP"),
                                              (signal.SIGINT, 130, "interrupted")])
def test_a_signal_ends_the_program_and_its_grandchild(stand_ins, monkeypatch, sig, status, words):
    monkeypatch.setenv("FAKE_HOW", "hang")
    proc = start("tenferro", "chain", "--depth", "40", "--fanout", "8", "--timeout", "600")
    wait_for(lambda: (stand_ins / "started").exists())
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 5 and proc.returncode == status, err
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err, err
    assert left_running(str(stand_ins)) == []


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_one_signal_stops_count_at_once(stand_ins, monkeypatch, sig, status):
    monkeypatch.setenv("FAKE_VALGRIND", "hang")
    proc = start("tenferro", "count", "--graph", "chain", "--depth", "3", "--timeout", "600")
    wait_for(lambda: len([p for p in stand_ins.iterdir() if p.name.startswith("started.")]) == 3)
    assert len(callgrind_folders(stand_ins)) == 3
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 5 and proc.returncode == status, err
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert left_running(str(stand_ins)) == [] and callgrind_folders(stand_ins) == []


def test_ctrl_c_pressed_three_times_is_still_one_line(stand_ins, monkeypatch):
    monkeypatch.setenv("FAKE_VALGRIND", "hang")
    proc = start("tenferro", "count", "--graph", "chain", "--depth", "3", "--timeout", "600")
    wait_for(lambda: len([p for p in stand_ins.iterdir() if p.name.startswith("started.")]) == 3)
    for _ in range(3):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.02)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert left_running(str(stand_ins)) == [] and callgrind_folders(stand_ins) == []


needs_program = pytest.mark.skipif(not tenferro.available(), reason="needs trgad-tenferro (pip install -r requirements.txt)")


@needs_program
def test_sigterm_ends_the_real_program(monkeypatch):
    # the case: `timeout 4 python -m trgad tenferro chain --depth 40 --fanout 8 --timeout 60`
    monkeypatch.delenv("TRGAD_TENFERRO_BIN", raising=False)
    x0 = 1.0 + 1e-9 * (os.getpid() % 1000 + 1)          # this run's program, by its arguments
    mark = f"trgad-tenferro chain --depth 40 --fanout 8 --x0 {x0!r}"     # the program's, not python's
    proc = start("tenferro", "chain", "--depth", "40", "--fanout", "8", "--x0", repr(x0), "--timeout", "60")
    wait_for(lambda: left_running(mark, grace=0))
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and len(err.strip().splitlines()) == 1, err
    assert left_running(mark) == []


@needs_program
@pytest.mark.skipif(not shutil.which("valgrind"), reason="needs valgrind")
def test_one_ctrl_c_stops_the_real_callgrind_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("TRGAD_TENFERRO_BIN", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))                # callgrind's folders, and a mark in ps
    monkeypatch.setenv("TRGAD_CACHE_DIR", str(tmp_path / "cache"))
    proc = start("tenferro", "count", "--graph", "chain", "--depth", "30", "--timeout", "600")
    wait_for(lambda: len(left_running(str(tmp_path), grace=0)) >= 3)
    time.sleep(1)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 5 and proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert left_running(str(tmp_path)) == []
    assert [p for p in tmp_path.iterdir() if p.name.startswith("trgad-callgrind-")] == []


@pytest.mark.parametrize("fake, timeout, message", [
    ("hang", "2", "did not return within 2 s"),                          # all three runs end
    ("slow-version", "1.5", "valgrind --version did not return within 1.5 s"),
])
def test_counts_own_timeout_ends_every_run(stand_ins, monkeypatch, cli, fake, timeout, message):
    monkeypatch.setenv("FAKE_VALGRIND", fake)
    t0 = time.monotonic()
    r = cli("tenferro", "count", "--graph", "chain", "--depth", "3", "--timeout", timeout)
    assert time.monotonic() - t0 < float(timeout) + 4
    assert_error(r, 3, message)
    assert left_running(str(stand_ins)) == [] and callgrind_folders(stand_ins) == []


# ---- 3: a kept count is checked before it is shown --------------------------------------

def test_count_of_the_stand_in_is_the_hand_written_one(stand_ins, cli):
    r = cli("tenferro", "count", "--graph", "chain", "--depth", "3", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["eq_calls_transform"] == 12 and out["eq_nested_transform"] == 7
    assert out["callers_drop"] == [["trgad_tenferro::release", 5]] and out["eq_nested_registry"] == 7
    assert callgrind_folders(stand_ins) == []


@pytest.mark.parametrize("bad", [None, {}, [], "hello", "negative", "other key", "other args", "bool", "not json"])
def test_a_spoiled_kept_count_is_counted_again(stand_ins, cli, bad):
    first = cli("tenferro", "count", "--graph", "chain", "--depth", "3", "--json")
    (entry,) = (stand_ins / "cache" / "callgrind").iterdir()
    kept = json.loads(entry.read_text())
    if bad == "negative":
        kept["count"]["eq_nested_drop"] = -7
    elif bad == "other key":
        kept["key"] = "0" * 64
    elif bad == "other args":
        kept["count"]["args"][2] = "4"
    elif bad == "bool":
        kept["count"]["eq_calls_drop"] = True
    else:
        kept = bad
    entry.write_text("{" if bad == "not json" else json.dumps(kept))
    runs = (stand_ins / "valgrind.log").read_text().count("--tool=callgrind")
    again = cli("tenferro", "count", "--graph", "chain", "--depth", "3", "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout)
    assert (stand_ins / "valgrind.log").read_text().count("--tool=callgrind") == runs + 3
    assert json.loads(entry.read_text())["count"] == json.loads(first.stdout)


def test_a_good_kept_count_is_not_counted_again(stand_ins, cli):
    cli("tenferro", "count", "--graph", "chain", "--depth", "3")
    runs = (stand_ins / "valgrind.log").read_text().count("--tool=callgrind")
    r = cli("tenferro", "count", "--graph", "chain", "--depth", "3")
    assert r.returncode == 0 and "eq_calls_transform=12" in r.stdout
    assert (stand_ins / "valgrind.log").read_text().count("--tool=callgrind") == runs


def test_an_eager_count_is_kept_and_checked_as_backwards_own(stand_ins):
    """count(eager=True) counts the one place backward(); kept, it passes the check, and
    spoiled (more calls nested than made) it is counted again."""
    first = tenferro.count("trg", steps=1, eager=True)
    assert first["eq_calls_backward"] == 12 and first["eq_nested_backward"] == 7
    assert first["callers_backward"] == [["trgad_tenferro::backward", 5]]
    assert first["args"][-1] == "--eager" and "eq_nested_transform" not in first
    log = stand_ins / "valgrind.log"
    runs = log.read_text().count("--tool=callgrind")
    assert runs == 1 and tenferro.count("trg", steps=1, eager=True) == first
    assert log.read_text().count("--tool=callgrind") == runs
    (entry,) = (stand_ins / "cache" / "callgrind").iterdir()
    kept = json.loads(entry.read_text())
    kept["count"]["eq_nested_backward"] = 13
    entry.write_text(json.dumps(kept))
    assert tenferro.count("trg", steps=1, eager=True) == first
    assert log.read_text().count("--tool=callgrind") == runs + 1


# ---- 4, 5, 11: one range in the help, the message and the program -----------------------

def help_text(capsys, *command):
    with pytest.raises(SystemExit):
        from trgad import cli as trgad_cli
        trgad_cli.main([*command, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("args,name", [(["--x0", "-2e6"], "x0"), (["--depth", "100001"], "depth"),
                                       (["--depth", "65"], "depth"), (["--fanout", "0"], "fanout"),
                                       (["--depth", "50000", "--fanout", "3"], "depth"),
                                       (["--x0", "1e-400"], "x0")])
def test_range_messages_say_the_range_the_help_states(stand_ins, cli, capsys, args, name):
    stated = tenferro.CHAIN_RANGES[name]
    assert stated in help_text(capsys, "tenferro", "chain")
    r = cli("tenferro", "chain", *(["--depth", "3"] if "--depth" not in args else []), *args)
    assert_error(r, 2, f"{name} must be {'an integer ' if name != 'x0' else ''}{stated}")


@pytest.mark.parametrize("args,grad", [(["--depth", "3", "--x0", "-1e6"], 8.0),
                                       (["--depth", "64", "--fanout", "8", "--x0", "1e6"], 2.0 ** 64),
                                       (["--depth", "1", "--x0", repr(X0_MIN)], 2.0)])
def test_the_ends_of_the_stated_ranges_are_accepted(stand_ins, cli, args, grad):
    r = cli("tenferro", "chain", *args, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["grad"] == grad


@pytest.mark.skipif(not tenferro.available(), reason="needs trgad-tenferro (pip install -r requirements.txt)")
@pytest.mark.parametrize("args,refused", [
    (["--depth", str(tenferro.CHAIN_DEPTH_MAX + 1)], True), (["--depth", "1", "--fanout", "9"], True),
    (["--depth", "1", "--fanout", "0"], True), (["--depth", "0"], True),
    (["--depth", "1", "--x0", "1000000.0000000001"], True), (["--depth", "1", "--x0", "-1e6"], False),
    (["--depth", "1", "--fanout", str(tenferro.CHAIN_FANOUT_MAX), "--x0", "1e6"], False)])
def test_the_program_takes_exactly_the_stated_chain_ranges(monkeypatch, args, refused):
    monkeypatch.delenv("TRGAD_TENFERRO_BIN", raising=False)
    r = subprocess.run([tenferro.binary(), "chain", *args], capture_output=True, text=True, timeout=60)
    assert (r.returncode == 2) == refused, (args, r.returncode, r.stderr)


@pytest.mark.parametrize("args,needle", [
    (["--graph", "trg", "--steps", "2", "--fanout", "banana"], "--graph trg takes no --fanout"),
    (["--graph", "trg", "--steps", "2", "--depth", "3"], "--graph trg takes no --depth"),
    (["--graph", "chain", "--depth", "3", "--beta", "banana", "--chi", "999"], "--graph chain takes no --beta"),
    (["--graph", "chain", "--depth", "3", "--chi", "999"], "--graph chain takes no --chi"),
    (["--graph", "trg", "--steps", "2", "--beta", "banana"], "beta='banana' is not a number"),
    (["--graph", "chain", "--depth", "3", "--fanout", "9"], "fanout must be an integer in [1, 8]")])
def test_count_refuses_a_value_it_does_not_use(stand_ins, cli, args, needle):
    assert_error(cli("tenferro", "count", *args), 2, needle)
    assert not (stand_ins / "valgrind.log").exists()           # refused before valgrind ran


def test_a_long_value_is_cut_and_a_long_integer_is_out_of_range(stand_ins, cli):
    r = cli("tenferro", "chain", "--depth", "x" * 100_000)
    assert_error(r, 2, "(100000 characters) is not an integer")
    assert len(r.stderr) < 300
    r = cli("tenferro", "chain", "--depth", "3", "y" * 100_000)
    assert_error(r, 2, "unrecognized arguments: yyy")
    assert len(r.stderr) < 300
    answers = {n: cli("tenferro", "chain", "--depth", "9" * n).stderr for n in (4000, 5000)}
    for n, err in answers.items():
        assert f"({n} characters) is out of range: depth must be an integer in [1, 64]" in err, err
        assert len(err) < 300


# ---- 6: a result that cannot be written -------------------------------------------------

@pytest.mark.parametrize("setup,why", [(">/dev/full", "No space left on device"),
                                       (">&-", "stdout is closed"),
                                       ("| (exec 0<&-; sleep 5)", "BrokenPipeError")])
def test_a_result_that_cannot_be_written_is_one_line_and_status_5(stand_ins, setup, why):
    script = stand_ins / "run.sh"
    script.write_text(f"{sys.executable} -m trgad tenferro chain --depth 3 --json {setup}\n"
                      f"echo \"status=${{PIPESTATUS[0]}}\" >&2\n")
    r = subprocess.run(["bash", str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert lines[-1] == "status=5", r.stderr
    assert len(lines) == 2 and lines[0].startswith("trgad: error: the result could not be written"), r.stderr
    assert why in lines[0] and "Traceback" not in r.stderr


# ---- 9, 10: the program's answer and how it failed --------------------------------------

@pytest.mark.parametrize("printed,needle", [
    ('{"grad": "12"}', "its mode is None"),
    ('{"mode": "chain", "depth": 3, "fanout": 2, "x0": 2.0, "transform_ms": 1, "drop_ms": 1, '
     '"grad_ops": 7, "run_ms": 1, "grad": "12"}', "its grad is '12', not a finite number or null"),
    ('{"mode": "chain", "depth": 3, "fanout": 2, "x0": 2.0, "transform_ms": -1, "drop_ms": 1, '
     '"grad_ops": 7, "run_ms": 1, "grad": 8}', "its transform_ms is -1, not a time >= 0"),
    ('{"mode": "chain", "depth": 4, "fanout": 2, "x0": 2.0, "transform_ms": 1, "drop_ms": 1, '
     '"grad_ops": 7, "run_ms": 1, "grad": 8}', "its depth is 4, but it was given 3"),
    ('{"mode": "chain", "depth": 3, "fanout": 2, "x0": 2.0, "transform_ms": NaN, "drop_ms": 1, '
     '"grad_ops": 7, "run_ms": 1, "grad": 8}', "NaN"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("[1, 2]", "not a JSON object"),
    ("hello", "not JSON"),
    ("", "printed nothing")])
def test_an_answer_of_the_wrong_shape_is_one_line_status_3(stand_ins, monkeypatch, cli, printed, needle):
    monkeypatch.setenv("FAKE_HOW", "print")
    (stand_ins / "print").write_text(printed)
    r = cli("tenferro", "chain", "--depth", "3", "--json")
    assert_error(r, 3, needle)
    assert len(r.stderr) < 400


def test_a_program_killed_by_a_signal_is_named(stand_ins, monkeypatch, cli):
    monkeypatch.setenv("FAKE_HOW", "kill")
    assert_error(cli("tenferro", "chain", "--depth", "3"), 3, "was killed by SIGKILL")


def test_a_program_without_its_execute_bit_is_not_called_missing(tmp_path, monkeypatch):
    import sysconfig

    monkeypatch.delenv("TRGAD_TENFERRO_BIN", raising=False)
    (tmp_path / "trgad-tenferro").write_text(PROGRAM)
    (tmp_path / "trgad-tenferro").chmod(0o644)
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(tenferro.TenferroError, match="installed but not executable"):
        tenferro.binary()


def test_a_callgrind_file_that_cannot_be_read_is_one_line(tmp_path):
    bad = tmp_path / "valgrind"
    bad.write_text(f"#!{sys.executable}\nimport sys\nout = [w for w in sys.argv if w.startswith('--callgrind-out')]"
                   f"[0].split('=', 1)[1]\nopen(out, 'w').write('cfn=(9)\\ncalls=1 0\\n')\n")
    bad.chmod(0o755)
    with pytest.raises(callgrind.CallgrindError, match=r"cannot read: .*name \(9\) used before"):
        callgrind.count_inside(str(bad), ["true"], {"transform": "f"}, "eq", 30, "true")
