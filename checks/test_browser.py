"""The built book in a real browser: headless Chromium over every page of _build/html.

Run after a build:  ``jupyter-book build . && pytest checks/test_browser.py``.

Chromium is Debian's ``/usr/bin/chromium`` (``apt-get install chromium``), driven by the
Python ``playwright`` package; no browser is ever downloaded (never ``playwright install``).
The HTML is served by a local ``http.server`` on 127.0.0.1, as a reader's browser would
load it.  Each page is opened in a fresh browser context (empty storage, as on a first
visit), and for each page the check asserts:

* no console errors and no uncaught JavaScript exceptions;
* every value the prose computes is present: the page shows one value for each ``{eval}``
  role in the chapter's source, no literal role (``{eval}``, ``{glue``), no empty value,
  no ``nan``/``inf`` (unless listed in ``ALLOWED_NONFINITE``), no raw
  ``np.float64(...)``/``Array(...)`` repr;
* every image in the page loads with a non-zero natural size, every figure has a caption,
  and every figure the source declares (a code cell's ``mystnb: figure: name:``) is on the
  page as a numbered figure ("Fig. N") under that name, with its image;
* no output cell shows a traceback or an error, no Markdown table is left as raw text;
* every table fits the text column in a ``VIEWPORT``-wide window (1300 px, a laptop): it is
  no wider than the article's content box, and no scroll container around it has to
  scroll (the theme wraps tables in one, so a wide table is cut off behind a scroll bar);
* no printed output, code cell or code block scrolls sideways in that window, on any page:
  its longest line fits the column (tests/test_lessons.py keeps code cells to 90 characters;
  a bash block's box is narrower, about 80);
* every formula is typeset by MathJax, which the book serves itself (sphinx-mathjax-offline):
  no formula left as raw TeX (in a math element or as ``$...$`` text), no MathJax TeX
  error (e.g. an unknown macro);

and over the whole book, that following the links from the introduction reaches every
chapter of _toc.yml (the sidebar lists them all, and "next" walks them in order).
A full-page screenshot of each page is saved under ``_build/screenshots/``.
"""
from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

from bookpaths import build_dir, chapter_source, skip_or_fail, toc_docnames

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--no-first-run",
    "--disable-sync", "--disable-default-apps", "--disable-extensions",
    "--metrics-recording-only", "--mute-audio", "--no-default-browser-check",
]
#: page (relative path) -> reason; computed values there may legitimately read nan/inf.
ALLOWED_NONFINITE: dict[str, str] = {}
#: Console errors that are the browser's, not the book's (substring of text or URL):
#: Chromium asks every site for /favicon.ico, and the book has none.
IGNORED_CONSOLE = ("/favicon.ico",)
NAV_TIMEOUT_MS = 60_000
#: The window every page is checked (and photographed) in: a laptop screen, where the theme
#: shows both sidebars and the text column is narrowest.
VIEWPORT = {"width": 1300, "height": 900}

HTML = build_dir() / "html"


def _pages() -> list[str]:
    """The front door, every chapter of _toc.yml (in order), the index and search pages.

    Other HTML files in the build folder (left over from a renamed or removed chapter in an
    incremental build) are not the book's and are not checked.
    """
    if not (HTML / "index.html").is_file():
        return ["<no build>"]
    pages = ["index.html"] + [d + ".html" for d in toc_docnames()]
    pages += [p for p in ("genindex.html", "search.html") if (HTML / p).is_file()]
    return pages


PAGES = _pages()


def _require_build():
    if not (HTML / "index.html").is_file():
        skip_or_fail(f"no built book at {HTML} (run `jupyter-book build .` first, or set "
                     f"TRGAD_BUILD_DIR to the _build folder of a build elsewhere)")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output readable
        pass


@pytest.fixture(scope="module")
def server():
    _require_build()
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    _require_build()
    if not Path(CHROMIUM).exists():
        skip_or_fail(f"{CHROMIUM} not found (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("the Python package playwright is not installed (pip install -r requirements-dev.txt)")
    with sync_playwright() as p:
        # launch() gives the browser a fresh temporary user-data dir, removed on close.
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def screenshots():
    out = build_dir() / "screenshots"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def _is_local(url: str) -> bool:
    host = urlparse(url).hostname
    return host in ("127.0.0.1", "localhost") or url.startswith(("data:", "blob:", "about:"))


_INSPECT_JS = r"""
() => {
  const main = document.querySelector('main') || document.body;
  const text = (el) => (el ? el.innerText : '');
  const imgs = Array.from(main.querySelectorAll('img')).map(i => ({
    src: i.currentSrc || i.src, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}));
  const figures = Array.from(main.querySelectorAll('figure')).map(f => ({
    id: f.id, img: (f.querySelector('img') || {}).src || '',
    imgOk: !!(f.querySelector('img') && f.querySelector('img').naturalWidth),
    caption: text(f.querySelector('figcaption')).trim()}));
  // inline values: {eval} (text/plain) -> span.output.text_plain; {glue:text} -> .pasted-text
  const pasted = Array.from(main.querySelectorAll('.pasted-text, .pasted-inline, span.output'))
    .filter(e => !e.closest('.cell_output'))
    .map(e => e.textContent);   // textContent: a value inside a closed solution dropdown is not rendered, yet there
  const outputs = Array.from(main.querySelectorAll('.cell_output, .output'));
  const errorOutputs = Array.from(main.querySelectorAll(
      '.cell_output .traceback, .output.traceback, .output.error, .cell_output .error'))
    .map(e => e.innerText.slice(0, 300));
  const outputText = outputs.map(e => e.innerText).join('\n');
  // a Markdown table that was not rendered as a table (e.g. commonmark output rendering)
  const rawTables = Array.from(main.querySelectorAll('p'))
    .map(e => e.innerText).filter(t => /\|\s*:?(-{3,}|[\u2013\u2014]+):?\s*\|/.test(t))
    .map(t => t.slice(0, 120));
  const math = Array.from(main.querySelectorAll('.math'));
  const rawMath = math.filter(e => !e.querySelector('mjx-container'))
    .map(e => e.textContent.trim().slice(0, 80));
  // $...$ that reached the page as text (e.g. a Markdown output parsed without dollarmath)
  const rawDollar = Array.from(main.querySelectorAll('p, li, td, figcaption'))
    .filter(e => !e.closest('.cell_output, pre, code'))
    .map(e => e.innerText).map(s => (s.match(/\$[^$\s][^$]*\$/) || [''])[0]).filter(s => s).map(s => s.slice(0, 120));
  const mathErrors = Array.from(main.querySelectorAll('mjx-merror'))
    .map(e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 120));
  // tables wider than the text column: the article's content box, and any scroll
  // container between the table and the article (the theme wraps each table in one)
  const article = main.querySelector('article') || main;
  const acs = getComputedStyle(article);
  const aRect = article.getBoundingClientRect();
  const colLeft = aRect.left + parseFloat(acs.paddingLeft) + parseFloat(acs.borderLeftWidth);
  const colRight = aRect.right - parseFloat(acs.paddingRight) - parseFloat(acs.borderRightWidth);
  const headings = Array.from(main.querySelectorAll('h1, h2, h3'));
  const tables = Array.from(main.querySelectorAll('table')).map((t, i) => {
    const r = t.getBoundingClientRect();
    let clipped = null;
    for (let e = t.parentElement; e && e !== article.parentElement; e = e.parentElement) {
      const ox = getComputedStyle(e).overflowX;
      if (['auto', 'scroll', 'hidden', 'clip'].includes(ox) && e.scrollWidth > e.clientWidth + 1) {
        clipped = {scrollWidth: e.scrollWidth, clientWidth: e.clientWidth};
        break;
      }
    }
    const before = headings.filter(h => h.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING);
    const heading = before.length ? before[before.length - 1].innerText.replace(/#$/, '').trim() : '';
    const firstRow = t.querySelector('tr');
    const header = firstRow ? Array.from(firstRow.children).map(c => c.innerText.trim()) : [];
    return {index: i + 1, heading, header, width: Math.round(r.width),
            column: Math.round(colRight - colLeft),
            overflowsColumn: r.left < colLeft - 1 || r.right > colRight + 1, clipped};
  });
  // code that scrolls sideways: a cell's source or printed output wider than its box
  const scrolledCode = Array.from(new Set(main.querySelectorAll(
      '.cell_input pre, .cell_output pre, div.highlight pre')))
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => ({kind: e.closest('.cell_output') ? 'output' : 'code',
                scrollWidth: e.scrollWidth, clientWidth: e.clientWidth,
                line: e.innerText.split('\n').reduce((a, b) => (b.length > a.length ? b : a), '')
                  .slice(0, 100)}));
  return {
    title: document.title, h1: text(main.querySelector('h1')).trim(),
    mainText: text(main), imgs, figures, pasted, errorOutputs, outputText, rawTables,
    nMath: math.length, rawMath, mathErrors, rawDollar, tables, scrolledCode,
  };
}
"""


def _inspect(browser, url, screenshot_path):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    console, external = [], []

    def on_console(msg):
        if msg.type != "error":
            return
        where = (msg.location or {}).get("url", "")
        if where and not _is_local(where):
            external.append(f"{msg.text} ({where})")
        elif not any(s in msg.text or s in where for s in IGNORED_CONSOLE):
            console.append(f"console error: {msg.text} ({where})")

    def on_failed(request):
        if any(s in request.url for s in IGNORED_CONSOLE):
            return
        line = f"request failed: {request.url} ({request.failure})"
        (console if _is_local(request.url) else external).append(line)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: console.append(f"uncaught exception: {exc}"))
    page.on("requestfailed", on_failed)
    try:
        response = page.goto(url, wait_until="load", timeout=NAV_TIMEOUT_MS)
        try:
            page.wait_for_load_state("networkidle", timeout=15_000)
        except Exception:  # a slow resource is not fatal; the checks below say what is missing
            pass
        # MathJax typesets after "load"; its startup promise resolves when it has finished.
        if page.query_selector(".math"):
            try:
                page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                       timeout=15_000)
                page.evaluate("() => MathJax.startup.promise")
            except Exception:  # MathJax never started: reported below as raw TeX
                pass
        # images are decoded by the time "load" fires; wait for any still pending
        page.wait_for_function(
            "() => Array.from(document.images).every(i => i.complete)", timeout=15_000)
        info = page.evaluate(_INSPECT_JS)
        info["status"] = response.status if response else None
        page.screenshot(path=str(screenshot_path), full_page=True)
    finally:
        context.close()
    info["console"], info["external"] = console, external
    return info


_ROLE_LITERAL = re.compile(r"\{glue|glue:(text|md|figure|math|any)|\{eval")
_NONFINITE = re.compile(r"(?<![\w.])[-+]?(nan|inf|infinity)(?![\w])", re.IGNORECASE)
_RAW_REPR = re.compile(r"np\.(float|int)\d*\(|Array\(|dtype=|<function |object at 0x")


_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
_INLINE_VALUE = re.compile(r"\{(eval|glue(?::text|:any|:)?)\}`[^`]+`")


def _source(rel):
    docname = rel.removesuffix(".html")
    return chapter_source(docname) if docname in toc_docnames() else None


def _inline_value_count(rel):
    """Inline {eval} (and any {glue}) roles in a page's source, outside code blocks."""
    path = _source(rel)
    if path is None:
        return 0
    return len(_INLINE_VALUE.findall(_FENCE.sub("", path.read_text())))


def _declared_figures(rel):
    """Names of the figures a page's code cells declare (``mystnb: figure: name:``)."""
    path = _source(rel)
    if path is None or path.suffix != ".md":
        return []
    import jupytext

    cells = jupytext.read(path).cells
    figs = [c.metadata.get("mystnb", {}).get("figure", {}) for c in cells if c.cell_type == "code"]
    return [f["name"] for f in figs if f.get("name")]


def _problems(rel, info):
    problems = list(info["console"])
    expected = _inline_value_count(rel)
    if len(info["pasted"]) < expected:
        problems.append(
            f"computed values missing: the source has {expected} inline {{eval}} roles, the "
            f"page shows {len(info['pasted'])} (an expression that failed renders as nothing; "
            f"see the build's mystnb.eval warnings)")
    by_id = {f["id"]: f for f in info["figures"] if f["id"]}
    for name in _declared_figures(rel):
        fig = by_id.get(name)
        if fig is None:
            problems.append(f"figure {name!r} declared in the source is not on the page")
        elif not fig["imgOk"] or not fig["caption"].startswith("Fig."):
            problems.append(f"figure {name!r}: image loaded {fig['imgOk']}, caption {fig['caption'][:40]!r} "
                            f"(expected a numbered caption 'Fig. N ...')")
    if info["status"] != 200:
        problems.append(f"HTTP status {info['status']}")
    text = info["mainText"]
    if _ROLE_LITERAL.search(text):
        problems.append("literal eval/glue role in the page text: "
                        + repr(_ROLE_LITERAL.search(text).group(0)))
    for value in info["pasted"]:
        if not value.strip():
            problems.append("an empty computed value")
        elif _NONFINITE.search(value) and rel not in ALLOWED_NONFINITE:
            problems.append(f"computed value is not a finite number: {value!r}")
        elif _RAW_REPR.search(value):
            problems.append(f"computed value shows a raw repr (use trgad.pages.show.num): {value!r}")
    for img in info["imgs"]:
        if not img["complete"] or not img["w"] or not img["h"]:
            problems.append(f"image did not load: {img['src']} ({img['w']}x{img['h']})")
    for fig in info["figures"]:
        if not fig["caption"]:
            problems.append(f"figure without caption: {fig['img']}")
    for err in info["errorOutputs"]:
        problems.append(f"error output cell: {err!r}")
    for t in info["rawTables"]:
        problems.append(f"Markdown table shown as text, not as a table: {t!r}")
    if info["rawMath"]:
        problems.append(f"{len(info['rawMath'])} of {info['nMath']} formulas not typeset by "
                        f"MathJax, e.g. {info['rawMath'][0]!r}")
    for s in info["rawDollar"]:
        problems.append(f"TeX left as $...$ text (not typeset): {s!r}")
    for err in info["mathErrors"]:
        problems.append(f"MathJax error: {err!r}")
    if "Traceback (most recent call last)" in info["outputText"]:
        problems.append("an output cell shows a Python traceback")
    problems += _wide_tables(info["tables"])
    for c in info["scrolledCode"]:
        problems.append(f"{c['kind']} scrolls sideways ({c['scrollWidth']} px in {c['clientWidth']} px "
                        f"at {VIEWPORT['width']} px); its longest line: {c['line']!r}")
    return problems


def _wide_tables(tables):
    """One line per table wider than the text column (see ``_INSPECT_JS``), naming it."""
    lines = []
    for t in tables:
        if not (t["overflowsColumn"] or t["clipped"]):
            continue
        cols = " | ".join(h[:24] for h in t["header"])
        where = f" under {t['heading']!r}" if t["heading"] else ""
        if t["clipped"]:
            size = (f"{t['clipped']['scrollWidth']} px of content in {t['clipped']['clientWidth']} px, "
                    f"cut off behind a scroll bar")
        else:
            size = f"{t['width']} px wide in a {t['column']} px text column"
        lines.append(f"table {t['index']}{where} ({len(t['header'])} columns: {cols}) is wider than the "
                     f"text column at {VIEWPORT['width']} px: {size}; transpose, split or narrow it")
    return lines


_TABLES_HTML = """<!doctype html><html><body style="margin:0"><main>
<article style="width: 600px; padding: 0 20px; border: 1px solid #ccc">
<h2>Narrow</h2>
<div style="overflow-x: auto"><table><tr><th>steps</th><th>time</th></tr><tr><td>1</td><td>2 ms</td></tr></table></div>
<h2>Scrolled</h2>
<div style="overflow-x: auto"><table><tr>%s</tr></table></div>
<h3>Loose</h3>
<table style="width: 900px"><tr><th>x</th></tr></table>
</article></main></body></html>""" % "".join(f"<th>column_heading_{i}</th>" for i in range(12))


def test_table_width_check_flags_exactly_the_wide_tables(browser):
    """The width check on a page built to measure: a 600 px text column holding a two-column
    table (fits), a twelve-column table in a scroll container (cut off) and a 900 px table
    with no container (sticks out)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.set_content(_TABLES_HTML)
        tables = page.evaluate(_INSPECT_JS)["tables"]
    finally:
        context.close()
    assert [t["column"] for t in tables] == [600] * 3
    lines = _wide_tables(tables)
    assert len(lines) == 2, lines
    assert lines[0].startswith("table 2 under 'Scrolled' (12 columns: column_heading_0 |")
    assert "cut off behind a scroll bar" in lines[0]
    assert lines[1].startswith("table 3 under 'Loose' (1 columns: x)")
    assert "900 px wide in a 600 px text column" in lines[1]


@pytest.mark.parametrize("rel", PAGES)
def test_page(rel, server, browser, screenshots):
    """One page: console, computed values, images, figures, math, tracebacks; saves a screenshot."""
    shot = screenshots / (rel.replace("/", "__").removesuffix(".html") + ".png")
    info = _inspect(browser, urljoin(server, rel), shot)
    for line in info["external"]:
        print(f"note ({rel}): external resource: {line}")
    problems = _problems(rel, info)
    assert not problems, f"{rel} ({info['h1'] or info['title']}):\n  " + "\n  ".join(problems)


def test_every_chapter_built():
    _require_build()
    missing = [d for d in toc_docnames() if not (HTML / (d + ".html")).is_file()]
    assert not missing, f"chapters in _toc.yml without a page in {HTML}: {missing}"


def test_navigation_from_introduction(server, browser):
    """From the introduction a reader reaches every chapter: sidebar links and "next"."""
    docs = toc_docnames()
    expected = [urljoin(server, d + ".html") for d in docs]
    context = browser.new_context()
    page = context.new_page()
    try:
        # The site's front door redirects to the introduction.
        page.goto(server, wait_until="load", timeout=NAV_TIMEOUT_MS)
        page.wait_for_url(re.compile(re.escape(expected[0]) + r"(#.*)?$"), timeout=15_000)
        sidebar = page.eval_on_selector_all(
            "nav.bd-docs-nav a.reference", "els => els.map(a => a.href)")
        sidebar = {h.split("#")[0] for h in sidebar}
        not_linked = [d for d, u in zip(docs[1:], expected[1:]) if u not in sidebar]
        assert not not_linked, f"chapters missing from the introduction's sidebar: {not_linked}"

        visited = [page.url.split("#")[0]]
        for _ in range(len(docs) + 5):
            nxt = page.query_selector("a.right-next")
            if nxt is None:
                break
            nxt.click()
            page.wait_for_load_state("load")
            visited.append(page.url.split("#")[0])
        assert visited == expected, (
            "following 'next' from the introduction does not walk the chapters of _toc.yml "
            f"in order:\n  visited:  {visited}\n  expected: {expected}")
    finally:
        context.close()
