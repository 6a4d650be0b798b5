"""A chapter read in JupyterLab, as README tells readers to: the numbers appear in the prose.

The chapters show computed numbers with MyST's ``{eval}`name`` role.  In JupyterLab the
``jupyterlab-myst`` extension renders it once the Markdown cell runs (it asks the kernel
for ``name``); without the extension, or before the cells run, the reader sees the raw
role or the bare variable name.  This check does what a reader does and looks at the
result in a real browser:

1. starts JupyterLab (headless, on a free port on 127.0.0.1, no token; ``--allow-root``
   for CI, which runs as root) on a temporary copy of the chapter, with
   ``TRGAD_PREVIEW=1`` in the server's environment so the kernel uses the preview caps,
   autosave off and the news prompt off (fresh settings and workspace folders);
2. opens JupyterLab in headless Chromium (Debian's ``/usr/bin/chromium``, driven by the
   Python ``playwright`` package, fresh user-data dir; never ``playwright install``),
   right-clicks the chapter and chooses *Open With -> Jupytext Notebook*, then
   *Run -> Run All Cells*, and waits until every code cell has run;
3. asserts that the rendered prose holds no raw role text (``{eval}``, ``{glue``), no
   unevaluated expression (jupyterlab-myst shows those as the variable name in code
   font), no expression error and no raw NumPy/JAX repr; that Onsager's lnZ/N and u at
   beta = 0.3, computed here independently with SciPy's elliptic integral, appear in the
   prose with the digits the chapter prints; that no cell failed; and that the figure
   cell shows its image.  A screenshot goes to ``_build/screenshots/``.

The chapter is ``book/trg.md`` (the TRG: u and c from the gradient): its prose has numbers with
an independent oracle, and it runs in well under a minute with the preview caps.  With ``CI=true`` a missing
prerequisite (Chromium, playwright, jupyterlab-myst) is a failure, not a skip.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from bookpaths import ROOT, build_dir, skip_or_fail

CHAPTER = ROOT / "book" / "trg.md"
BETA = 0.3
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
START_TIMEOUT = 90      # seconds for the server to answer
RUN_TIMEOUT = 900       # seconds for Run All (as execute.timeout in _config.yml)
ROLE = re.compile(r"\{eval\}`([^`]+)`")
RAW_REPR = re.compile(r"np\.(float|int)\d*\(|Array\(|dtype=|<function |object at 0x")
SETTINGS = {  # JupyterLab user settings: never write the chapter back, never fetch news
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
    # every cell attached and rendered, as in a short notebook: with the default windowing
    # ("contentVisibility") Markdown cells far below the viewport were left unevaluated
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def onsager(beta):
    """lnZ/N and u of the infinite square-lattice Ising model (J = 1): Onsager, Phys. Rev.
    65, 117 (1944), in its one-integral form.

    lnZ/N = ln(2 cosh 2b) + (1/2pi) int_0^pi ln[(1 + sqrt(1 - k^2 sin^2 t)) / 2] dt and
    u = -coth(2b) [1 + (2/pi)(2 tanh^2(2b) - 1) K(k)], k = 2 sinh(2b) / cosh^2(2b), with K
    the complete elliptic integral of the first kind (SciPy's ellipk takes m = k^2).
    """
    from scipy.integrate import quad
    from scipy.special import ellipk

    k = 2 * math.sinh(2 * beta) / math.cosh(2 * beta) ** 2
    integral, _ = quad(lambda t: math.log((1 + math.sqrt(1 - (k * math.sin(t)) ** 2)) / 2), 0, math.pi,
                       epsabs=1e-14, epsrel=1e-14)
    lnz = math.log(2 * math.cosh(2 * beta)) + integral / (2 * math.pi)
    u = -(1 / math.tanh(2 * beta)) * (1 + (2 / math.pi) * (2 * math.tanh(2 * beta) ** 2 - 1) * ellipk(k * k))
    return lnz, u


def _prerequisites():
    if not Path(CHROMIUM).exists():
        skip_or_fail(f"{CHROMIUM} not found (apt-get install -y chromium)")
    for module, pip_name in (("playwright", "playwright"), ("jupyterlab", "jupyterlab"),
                             ("jupyterlab_myst", "jupyterlab-myst"), ("jupytext", "jupytext")):
        try:
            __import__(module)
        except ImportError:
            skip_or_fail(f"the Python package {pip_name} is not installed "
                         f"(pip install -r requirements-dev.txt)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url, proc, log):
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited with status {proc.returncode}:\n{log.read_text()[-3000:]}",
                        pytrace=False)
        try:
            with urllib.request.urlopen(url + "api/status", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within {START_TIMEOUT} s:\n{log.read_text()[-3000:]}",
                pytrace=False)


@pytest.fixture(scope="module")
def lab():
    """A JupyterLab server on a temporary copy of the chapter; yields its base URL."""
    _prerequisites()
    with tempfile.TemporaryDirectory(prefix="trgad-lab-") as tmp:
        tmp = Path(tmp)
        root, settings, workspaces = tmp / "book", tmp / "settings", tmp / "workspaces"
        root.mkdir()
        workspaces.mkdir()
        shutil.copy(CHAPTER, root / CHAPTER.name)
        for rel, value in SETTINGS.items():
            path = settings / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env = dict(os.environ, TRGAD_PREVIEW="1", JUPYTER_CONFIG_DIR=str(tmp / "config"))
        env.pop("MPLBACKEND", None)   # the reader's default inline backend
        port = _free_port()
        log = tmp / "lab.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                 "--ServerApp.token=", "--ServerApp.password=", "--allow-root",
                 f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={settings}",
                 f"--LabApp.workspaces_dir={workspaces}"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        url = f"http://127.0.0.1:{port}/"
        try:
            _wait_for_server(url, proc, log)
            yield url, root / CHAPTER.name, log
        finally:
            proc.terminate()                       # shuts its kernels down
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the server's own process group
                proc.wait(timeout=10)


_PROGRESS_JS = r"""
() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return null;
  const code = Array.from(panel.querySelectorAll('.jp-CodeCell'));
  // textContent, not innerText: JupyterLab skips rendering cells outside the viewport
  const prompts = code.map(c => (c.querySelector('.jp-InputPrompt') || {}).textContent || '');
  // a claims cell's input is hidden (source_hidden), and with it its prompt: no count shown
  const status = (document.querySelector('#jp-main-statusbar') || {}).innerText || '';
  return {n: code.length, hidden: prompts.filter(p => !p.trim()).length,
          done: prompts.filter(p => /\[\d+\]/.test(p)).length,
          busy: prompts.filter(p => p.includes('*')).length, idle: /\|\s*Idle/.test(status)};
}
"""

_INSPECT_JS = r"""
() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const md = Array.from(panel.querySelectorAll('.jp-MarkdownCell .jp-Cell-inputWrapper .myst'));
  const text = md.map(e => e.textContent).join('\n');   // (innerText is empty off screen)
  const codes = md.flatMap(e => Array.from(e.querySelectorAll('code')).map(c => c.textContent.trim()));
  const exprErrors = md.flatMap(e => Array.from(e.querySelectorAll(
      '.myst-RenderedExpressionError, [data-mime-type="application/vnd.jupyter.stderr"]'))
      .map(x => x.textContent.slice(0, 200)));
  const outputs = Array.from(panel.querySelectorAll('.jp-CodeCell .jp-OutputArea-output'));
  const imgs = Array.from(panel.querySelectorAll('.jp-CodeCell .jp-OutputArea-output img')).map(i => ({
      src: (i.src || '').slice(0, 40), w: i.naturalWidth, h: i.naturalHeight}));
  return {text, codes, exprErrors, nMarkdown: md.length, imgs,
          outputText: outputs.map(o => o.textContent).join('\n')};
}
"""


def _open_with_jupytext(page, name):
    item = page.locator(".jp-DirListing-item", has_text=name)
    item.wait_for(timeout=60_000)
    item.click(button="right")
    page.get_by_text("Open With", exact=True).hover()
    page.locator(".lm-Menu-item", has_text="Jupytext Notebook").click()
    page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell", timeout=60_000, state="attached")


def _run_all_and_wait(page):
    # the kernel must be up before Run All: the status bar then reads "... | Idle"
    page.wait_for_function("() => /\\|\\s*Idle/.test((document.querySelector('#jp-main-statusbar') || {}).innerText || '')",
                           timeout=120_000)
    page.get_by_text("Run", exact=True).click()
    page.locator("li[data-command='runmenu:run-all']").click()
    deadline = time.monotonic() + RUN_TIMEOUT
    state, idle_polls = None, 0
    while time.monotonic() < deadline:
        state = page.evaluate(_PROGRESS_JS)
        # every shown cell has its count and the kernel has stayed idle for two polls: the
        # hidden claims cells, which show no count, have run too
        finished = (state and state["n"] and state["done"] == state["n"] - state["hidden"]
                    and not state["busy"] and state["idle"])
        idle_polls = idle_polls + 1 if finished else 0
        if idle_polls >= 2:
            return state
        time.sleep(2)
    pytest.fail(f"Run All did not finish within {RUN_TIMEOUT} s (code cells done/total: {state})",
                pytrace=False)


def test_chapter_numbers_render_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    url, chapter, log = lab
    source = chapter.read_text()
    names = sorted(set(ROLE.findall(source)))
    assert names, f"{CHAPTER.name} has no {{eval}} role: pick a chapter whose prose shows numbers"
    lnz, u = onsager(BETA)
    expected = {"Onsager's lnZ/N": f"{lnz:.12f}", "Onsager's u": f"{u:.10f}",
                "the truncation schedule": "[2, 4, 4, 16, 16, ...]"}
    shots = build_dir() / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="trgad-chromium-",
                                                               ignore_cleanup_errors=True) as profile:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 1000})
        try:
            page = context.new_page()
            page.goto(url + "lab", wait_until="load", timeout=60_000)
            _open_with_jupytext(page, chapter.name)
            state = _run_all_and_wait(page)
            # the Markdown cells ask the kernel for their expressions after the cells above ran
            deadline = time.monotonic() + 60
            while True:
                info = page.evaluate(_INSPECT_JS)
                if not set(info["codes"]) & set(names) or time.monotonic() > deadline:
                    break
                page.wait_for_timeout(1000)
            page.evaluate("""() => {   // show the Onsager comparison in the screenshot
                const cells = Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell'));
                const cell = cells.find(c => c.textContent.includes('against Onsager'));
                if (cell) cell.scrollIntoView({block: 'center'});
            }""")
            page.wait_for_timeout(1000)
            page.screenshot(path=str(shots / f"jupyterlab-{CHAPTER.stem}.png"))
        finally:
            context.close()

    problems = []
    text = info["text"]
    if not info["nMarkdown"]:
        problems.append("no rendered Markdown cell found (is jupyterlab-myst enabled?)")
    for raw in ("{eval}", "{glue"):
        if raw in text:
            problems.append(f"raw role text {raw!r} in the rendered prose")
    unevaluated = sorted(set(info["codes"]) & set(names))
    if unevaluated:
        problems.append(f"expressions shown unevaluated (as code): {unevaluated}")
    for err in info["exprErrors"]:
        problems.append(f"an expression failed: {err!r}")
    if RAW_REPR.search(text):
        problems.append(f"raw repr in the prose: {RAW_REPR.search(text).group(0)!r}")
    for what, digits in expected.items():
        if digits not in text:
            problems.append(f"{what} ({digits}) is not in the rendered prose")
    if "Traceback (most recent call last)" in info["outputText"]:
        problems.append("a code cell failed (traceback in its output)")
    if not any(i["w"] and i["h"] for i in info["imgs"]):
        problems.append(f"no figure image rendered in the cell outputs: {info['imgs']}")
    assert not problems, (f"{CHAPTER.name} in JupyterLab ({state['done']} code cells run):\n  "
                          + "\n  ".join(problems) + f"\nserver log tail:\n{log.read_text()[-1500:]}")
