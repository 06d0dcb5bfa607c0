"""The one stylesheet: scoped under `.wb` so that a notebook's own styles are left alone, and
inline in every view (no network, no CDN); light and dark themes by the reader's preference."""
from __future__ import annotations

STYLE = """<style>
.wb{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:13px;line-height:1.4;
color:var(--wb-fg);--wb-fg:#1f2328;--wb-dim:#656d76;--wb-bg2:#f6f8fa;--wb-line:#d0d7de;
--wb-ok:#1a7f37;--wb-bad:#cf222e;--wb-warn:#9a6700;--wb-add:#dafbe1;--wb-del:#ffebe9;
--wb-chg:#fff8c5}
@media (prefers-color-scheme:dark){.wb{--wb-fg:#e6edf3;--wb-dim:#8d96a0;--wb-bg2:#161b22;
--wb-line:#30363d;--wb-ok:#3fb950;--wb-bad:#f85149;--wb-warn:#d29922;--wb-add:#12361f;
--wb-del:#4a1b1b;--wb-chg:#3b2e05}}
.wb h3{font-size:15px;margin:4px 0}.wb h4{font-size:13px;margin:8px 0 4px}
.wb details{margin:3px 0 3px 2px;padding-left:6px;border-left:2px solid var(--wb-line)}
.wb summary{cursor:pointer}.wb code,.wb pre{font-family:ui-monospace,Menlo,Consolas,monospace;
font-size:12px}
.wb pre{background:var(--wb-bg2);padding:6px;margin:4px 0;overflow:auto;max-height:32em;
white-space:pre}
.wb table{border-collapse:collapse;margin:4px 0}.wb th,.wb td{border-bottom:1px solid
var(--wb-line);padding:2px 8px;text-align:left;vertical-align:top}
.wb td{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.wb .dim,.wb .more{color:var(--wb-dim)}.wb .more{font-style:italic;margin:2px 0}
.wb .badge{border-radius:8px;padding:0 6px;font-size:11px;border:1px solid currentColor}
.wb .ok{color:var(--wb-ok)}.wb .failed,.wb .removed,.wb .left_only{color:var(--wb-bad)}
.wb .changed,.wb .differs{color:var(--wb-warn)}.wb .added,.wb .right_only{color:var(--wb-ok)}
.wb tr.added td{background:var(--wb-add)}.wb tr.removed td{background:var(--wb-del)}
.wb tr.changed td,.wb tr.differs td{background:var(--wb-chg)}
.wb tr.left_only td{background:var(--wb-del)}.wb tr.right_only td{background:var(--wb-add)}
.wb .side{display:flex;gap:8px;flex-wrap:wrap}.wb .side>div{flex:1 1 380px;min-width:0}
.wb .failure{border:1px solid var(--wb-bad);border-radius:4px;padding:4px 8px;margin:4px 0}
.wb .hint{color:var(--wb-ok)}.wb .graph svg{max-width:100%;height:auto}
</style>"""


def wrap(body: str) -> str:
    """A view as a notebook output: the stylesheet, then the body inside `.wb`."""
    return f'{STYLE}<div class="wb">{body}</div>'
