"""Recorded sessions in a notebook and as a standalone page: HTML views of a Session, a Call, a
Stage, a stage diff, a pytree pair and a failure, read from the data model only.

    import workbench.html            # (found by itself through the `transforms.display` entry
    session                          #  point: a record as a cell's value renders inline)
    workbench.html.page(session)     # the whole session as one HTML document
    workbench html trace.json -o report.html

Self-contained: one inline stylesheet, no script, nothing from the network, <details> to fold;
every recorded string escaped (workbench/_safe_text.py); large sessions bounded (`Budget`).
"""
from __future__ import annotations

from ._blocks import Budget as Budget
from ._call import call_html as call_html
from ._cli import main as main
from ._failure import failure_html as failure_html
from ._page import (
    HtmlDisplay as HtmlDisplay,
    install as install,
    page as page,
    record_html as record_html,
    write_page as write_page,
)
from ._session import session_html as session_html
from ._stages import diff_html as diff_html, stage_html as stage_html
from ._text import record_text as record_text
from ._trees import pair_html as pair_html, tree_html as tree_html

install()
