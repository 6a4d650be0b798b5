"""The Chinese editions stay in step with the English pages (:mod:`trgad.pages.editions`).

The pairs in the book are checked as they are; then copies in ``tmp_path`` are changed on
one side only, one thing at a time, to show that each check fails, naming what changed:
a code cell's source, tags or hidden input, an inline value, a label, the code in the
prose, and an English prose block (whose hash the Chinese block records), while a
re-wrapped English paragraph and a translation brought up to date pass again.  Also: each
edition links to the other, both are in the table of contents, and the ten-minute page
reads in ten minutes at an honest pace.
"""
import hashlib
import re
import shutil
from pathlib import Path

import pytest
import yaml

from trgad.pages import editions, lessons

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
#: English page -> its Chinese edition.
PAIRS = {"tenminutes.md": "tenminutes-zh.md", "cheatsheet.md": "cheatsheet-zh.md"}
#: The ten-minute page's budget: minutes at 100 words a minute (half the book's pace, which
#: a physicist reading it found twice too fast) plus a minute per code cell shown.
TEN_MINUTES, HONEST_WORDS_PER_MINUTE = 10.0, 100


@pytest.mark.parametrize("english", PAIRS)
def test_the_editions_in_the_book_are_in_step(english):
    assert editions.problems(BOOK / english, BOOK / PAIRS[english]) == []


@pytest.mark.parametrize("english", PAIRS)
def test_each_edition_links_to_the_other_before_its_first_cell(english):
    for page, other in ((english, PAIRS[english]), (PAIRS[english], english)):
        first = lessons.cells(BOOK / page)[0]
        assert first.kind == "markdown" and f"]({other})" in first.source, page


def test_both_languages_are_in_the_toc_and_the_ten_minute_page_comes_first():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert files[0] == "book/tenminutes", "right after the introduction"
    for english, chinese in PAIRS.items():
        assert f"book/{Path(english).stem}" in files and f"book/{Path(chinese).stem}" in files


@pytest.mark.parametrize("page", ["tenminutes.md", "tenminutes-zh.md"])
def test_the_ten_minute_page_reads_in_ten_minutes(page):
    reading = lessons.reading_time([BOOK / page], words_per_minute=HONEST_WORDS_PER_MINUTE)
    assert reading["cells"] >= 3, reading                 # the table, the figure, the fix
    assert reading["minutes"] <= TEN_MINUTES, reading


def test_the_chinese_pages_use_the_source_reports_terms():
    text = "".join((BOOK / p).read_text(encoding="utf-8") for p in PAIRS.values())
    for term in ("分段", "余切", "变换", "内能", "截断", "整张图", "叶子"):
        assert term in text, term
    glossary = (BOOK / "glossary.md").read_text(encoding="utf-8")
    for term in ("分段", "余切", "变换", "内能", "截断"):
        assert term in glossary, f"{term}: the glossary names the report's word"


# ---- the pieces, against independent oracles ----------------------------------------------

def test_fingerprint_is_the_sha256_of_the_words_without_comments():
    text = "One  block,\nre-wrapped\n% a comment\n\n{eval}`x` stays."
    words = "One block, re-wrapped {eval}`x` stays."
    assert editions.fingerprint(text) == hashlib.sha256(words.encode()).hexdigest()[:12]
    assert editions.fingerprint("One block, re-wrapped {eval}`x`\nstays.") == \
        editions.fingerprint(text)


PAGE = """\
---
kernelspec: {name: python3}
---

(top)=
# Title
% en a1a1a1a1a1a1

Intro with {eval}`a` and [a link](other.md).

```{code-cell} ipython3
a = 1
```

## Second
% en b2b2b2b2b2b2

Prose, then code in the prose:

```rust
let x = 1;  // # not a heading
```

```{code-cell} ipython3
---
tags: [remove-input]
jupyter:
  source_hidden: true
---
b = a + 1
```

Then {eval}`b`.
% en c3c3c3c3c3c3
"""


def test_blocks_cut_at_headings_but_not_inside_fences_and_keep_labels_with_them():
    found = editions.blocks(PAGE)
    assert [b.text.splitlines()[0] for b in found] == ["(top)=", "## Second", "Then {eval}`b`."]
    assert [b.line for b in found] == [5, 15, 33]
    assert "# not a heading" in found[1].text
    assert found[0].recorded == ["a1a1a1a1a1a1"] and found[2].recorded == ["c3c3c3c3c3c3"]


def test_prose_words_skip_comments_and_han_characters_are_counted_apart():
    assert lessons.prose_words("% a comment of five words\nTwo words.") == 2
    assert lessons.han_characters("% 注释不算\n分段求导 `vjp`。") == 4
    assert lessons.prose_words("分段求导 with `vjp`。") == 2


# ---- a pair in step, then changed on one side ---------------------------------------------

def _pair(tmp_path):
    """A copy of the ten-minute pair in ``tmp_path``: (English path, Chinese path)."""
    en, zh = tmp_path / "tenminutes.md", tmp_path / "tenminutes-zh.md"
    shutil.copy(BOOK / "tenminutes.md", en)
    shutil.copy(BOOK / "tenminutes-zh.md", zh)
    assert editions.problems(en, zh) == []
    return en, zh


def _edit(path, old, new, count=1):
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= count, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


@pytest.mark.parametrize("side", ["english", "chinese"])
def test_a_code_cell_changed_on_one_side_fails_naming_the_cell(tmp_path, side):
    en, zh = _pair(tmp_path)
    _edit(en if side == "english" else zh, "for n in (10, 20)}", "for n in (10, 30)}")
    found = editions.problems(en, zh)
    assert len(found) == 1 and re.match(r"code cell \d+ .* differs in source$", found[0]), found


def test_tags_and_hidden_input_are_compared(tmp_path):
    en, zh = _pair(tmp_path)
    _edit(zh, "tags: [hide-input]", "tags: [remove-input]")
    assert any("differs in tags, metadata" in p for p in editions.problems(en, zh))
    en, zh = _pair(tmp_path)
    _edit(zh, "  source_hidden: true", "  source_hidden: false")
    assert any("differs in source_hidden, metadata" in p for p in editions.problems(en, zh))


def test_an_inline_value_missing_or_out_of_order_fails(tmp_path):
    en, zh = _pair(tmp_path)
    _edit(zh, "{eval}`fixed_ms`", "几")
    found = editions.problems(en, zh)
    assert any(p.startswith("inline values differ") and "fixed_ms" in p for p in found), found
    en, zh = _pair(tmp_path)
    _edit(en, "{eval}`detect_ratio`", "{eval}`ratios`")
    assert any(p.startswith("inline values differ") for p in editions.problems(en, zh))


def test_a_label_not_mirrored_fails(tmp_path):
    en, zh = _pair(tmp_path)
    _edit(zh, "(tenminutes-zh)=", "(tenminutes)=")
    assert any(p.startswith("labels:") for p in editions.problems(en, zh))


def test_code_in_the_prose_changed_on_one_side_fails(tmp_path):
    en, zh = _pair(tmp_path)
    _edit(zh, '"// [book: detect call]"', '"// [book: trg loop]"')   # a literalinclude's option
    found = editions.problems(en, zh)
    assert any(p.startswith("code or math in the prose differs at its 1th block") for p in found)


def test_a_changed_english_block_fails_naming_it_until_the_translation_follows(tmp_path):
    en, zh = _pair(tmp_path)
    before = {b.number: editions.fingerprint(b.text) for b in editions.blocks(en)}
    _edit(en, "More threads or a faster machine", "More threads, or a faster machine,")
    found = editions.problems(en, zh)
    last = editions.blocks(en)[-1]
    assert len(found) == 1, found
    assert found[0].startswith(f"English block {last.number} (line {last.line}: '- **Eager")
    assert before[last.number] in found[0]               # what the Chinese block recorded
    new = editions.fingerprint(last.text)
    assert new != before[last.number] and new in found[0]
    _edit(zh, f"% en {before[last.number]}", f"% en {new}")  # the translation follows
    assert editions.problems(en, zh) == []


def test_a_rewrapped_english_paragraph_needs_no_new_translation(tmp_path):
    en, zh = _pair(tmp_path)
    _edit(en, "Your loss is a loop of tensor steps", "Your loss is a loop of\ntensor steps")
    assert editions.problems(en, zh) == []


def test_a_chinese_block_without_its_hash_fails(tmp_path):
    en, zh = _pair(tmp_path)
    first = editions.blocks(zh)[0].recorded[0]
    _edit(zh, f"% en {first}\n", "")
    found = editions.problems(en, zh)
    assert len(found) == 1 and "has no `% en <hash>` line" in found[0], found


def test_the_command_line_exits_1_on_problems_2_on_a_wrong_call(tmp_path, capsys):
    en, zh = _pair(tmp_path)
    assert editions.main([str(en), str(zh)]) == 0
    hashes = re.findall(r"^% en ([0-9a-f]{12})", capsys.readouterr().out, re.M)
    assert hashes == [editions.fingerprint(b.text) for b in editions.blocks(en)]
    _edit(en, "Your loss", "The loss")
    assert editions.main([str(en), str(zh)]) == 1
    assert editions.main([str(en)]) == 2
    assert "usage:" in capsys.readouterr().err
