"""Text from a recording made safe for the place it is shown: a terminal, SVG/XML/HTML, or DOT.

Every string in a dump is untrusted: a session title, a function or type name, an
error message, a static aux value. Shown raw, `\\x1b]0;pwned\\x07` retitles the
user's terminal, `\\x1b]8;;file:///etc/passwd\\x07` is a link, U+202E reverses
what follows, a lone surrogate (`\\udcff`, from a file name Python could not
decode) makes writing UTF-8 fail, and a 100,000-character name fills the screen.
One rule for all of them, then one escaping per destination:

    terminal(text)   control, format (bidi, zero-width) and surrogate characters as
                     visible escapes (`\\x1b`, `\\u202e`, `\\udcff`); cut to `limit`
    svg(text)        terminal(text), then XML's `& < > " '` as entities
    html(text)       the same for an HTML text node or quoted attribute (lines kept if asked)
    dot(text)        terminal(text), then a DOT double-quoted string in pure ASCII

`terminal` is what show, diff, the TUI and the renderers print; `dot` is every
Graphviz label; `svg` is text written into SVG by hand. Newlines are kept where
a caller asks for lines (`lines=True`), else shown as `\\n`.
"""
from __future__ import annotations

import re

# What a terminal or a reader could take for something else: C0 and C1 controls, DEL,
# the soft hyphen, Arabic letter mark, Mongolian vowel separator, zero-width and bidi
# marks, line/paragraph separators, bidi embeddings and isolates, invisible operators,
# the BOM, interlinear annotations, and lone surrogates (never valid UTF-8).
_UNSAFE_REST = (r"\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
                r"\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff")
_UNSAFE_ONE_LINE = re.compile("[\x00-\x1f" + _UNSAFE_REST + "]")
_UNSAFE_LINES = re.compile("[\x00-\x08\x0b-\x1f" + _UNSAFE_REST + "]")  # tabs, newlines kept

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}

# Long enough for any real name or message line; a 100,000-character name is cut.
DEFAULT_LIMIT = 2000
# Graphviz refuses a label over 16,384 characters; escaping can make one character
# into nine (`&#65533;`), so labels are cut well before that.
DOT_LIMIT = 1500


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    named = _NAMED.get(c)
    if named is not None:
        return named
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shorten(text: str, width: int) -> str:
    """`text`, or its first `width - 1` characters and an ellipsis (a label, a note).

    NB: as transforms/_common/_text.py's `cut`, not imported from it: `import transforms` loads the
    record model, which the CLI's start does without (tests/test_read_only_imports.py)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def cut(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def terminal(text: object, limit: int = DEFAULT_LIMIT, *, lines: bool = False) -> str:
    """Text safe to print on a terminal: nothing in it is a control sequence or invisible.

    With `lines=True` newlines and tabs are kept (the limit is then per line)."""
    s = text if isinstance(text, str) else _str(text)
    if lines:
        return "\n".join(_UNSAFE_LINES.sub(_escape, cut(line, limit))
                         for line in s.split("\n"))
    if s.isascii() and s.isprintable():  # nothing to escape (most text): no regex pass
        return cut(s, limit)
    return _UNSAFE_ONE_LINE.sub(_escape, cut(s, limit))


def has_unsafe(text: str) -> bool:
    """Does `text` hold anything terminal() would escape?"""
    return _UNSAFE_ONE_LINE.search(text) is not None


def first_line(text: object, limit: int = DEFAULT_LIMIT) -> str:
    """The first line of a message, made safe; "" for an empty one (`raise ValueError()`)."""
    s = text if isinstance(text, str) else _str(text)
    return terminal(s.split("\n", 1)[0].rstrip("\r"), limit)


_XML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
_XML_SPECIAL = re.compile(r"[&<>\"']")


def svg(text: object, limit: int = DEFAULT_LIMIT) -> str:
    """Text for an SVG/XML text node or attribute: escaped, valid XML 1.0, writable as UTF-8."""
    return _XML_SPECIAL.sub(lambda m: _XML[m.group(0)], terminal(text, limit))


def html(text: object, limit: int = DEFAULT_LIMIT, *, lines: bool = False) -> str:
    """Text for an HTML text node or a quoted attribute: nothing in it is markup, a control
    or invisible (`lines=True` keeps newlines and tabs, for a <pre>; the limit is per line)."""
    return _XML_SPECIAL.sub(lambda m: _XML[m.group(0)], terminal(text, limit, lines=lines))


_DOT_SPECIAL = {"\\": "\\\\", '"': '\\"', "&": "&amp;", "<": "&lt;", ">": "&gt;",
                "{": "&#123;", "}": "&#125;", "|": "&#124;", "\n": "\\n"}
_DOT_NEEDS_ESCAPE = re.compile(r'[\\"&<>{}|\n\x80-\U0010ffff]')


def _dot_char(m: re.Match[str]) -> str:
    c = m.group(0)
    return _DOT_SPECIAL.get(c) or f"&#{ord(c)};"


def dot(text: object, limit: int = DOT_LIMIT) -> str:
    """A DOT double-quoted string whose label shows `text` safely (see dot_escape)."""
    return '"' + dot_escape(text, limit) + '"'


def dot_escape(text: object, limit: int = DOT_LIMIT) -> str:
    """The inside of a DOT double-quoted string whose label shows `text` safely, in pure ASCII.

    Lines are kept (`\\n` is DOT's line break); the whole label is cut to `limit`.
    Backslashes and quotes are escaped for DOT; `& < > { } |` and non-ASCII become
    HTML character references (Graphviz decodes them in every label, record shapes
    included, and writes them into SVG as valid XML: no control character is left).
    """
    s = text if isinstance(text, str) else _str(text)
    s = cut(s.replace("\r\n", "\n").replace("\t", " "), limit)
    return _DOT_NEEDS_ESCAPE.sub(_dot_char, terminal(s, limit + 64, lines=True))


def _str(value: object) -> str:
    try:
        return str(value)
    except Exception as e:  # a value whose __str__ raises is still shown
        return f"<{type(value).__name__}: str() raised {type(e).__name__}>"


__all__ = ["DEFAULT_LIMIT", "DOT_LIMIT", "cut", "dot", "dot_escape", "first_line", "has_unsafe",
           "html", "shorten", "svg", "terminal"]
