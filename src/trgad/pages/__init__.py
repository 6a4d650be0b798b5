"""The book's support: what a chapter shows and what it quotes.

:mod:`~trgad.pages.show` (numbers and tables in the chapters), :mod:`~trgad.pages.recorded`
(figures recorded elsewhere, labelled), :mod:`~trgad.pages.report` (the machine and software
table), :mod:`~trgad.pages.flowchart` (the diagnosis flowchart), :mod:`~trgad.pages.lessons`
(a chapter's cells and Part I's reading time), :mod:`~trgad.pages.editions` (a page's
Chinese edition kept in step with its English one), :mod:`~trgad.pages.caps` (every
demonstration's sizes and limits).  Imports the runtime only.
"""
