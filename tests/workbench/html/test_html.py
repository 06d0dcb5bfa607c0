"""Issue 38: the records as HTML (workbench.html): self-contained, every recorded string
escaped (hostile names cannot break out), big sessions bounded, a plain-text fallback, and
found by the model through its entry point without the model importing the workbench."""
from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from transforms.model import (
    Call,
    Diagnostic,
    EqnRecord,
    ErrorRecord,
    JaxprRecord,
    Level,
    PairRow,
    Session,
    SourceLocation,
    Stage,
    Step,
    TreeNode,
    TreePair,
    TreeRecord,
    ValueRecord,
    diff_stages,
)
from workbench import html as wh

ATTACK = "</details><script>alert(1)</script>"
HOSTILE = [ATTACK, "<img src=x onerror=alert(1)>", "\"' onmouseover=alert(1) x='",
           "a&amp;b", "x\x1b]0;pwned\x07", "abc\u202edef", "t\udcff", "]]><!--", "f" * 20_000]


class Page(HTMLParser):
    """What a browser would make of the HTML: its elements, attributes and text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.open: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag not in ("meta", "br", "path", "polygon", "ellipse", "polyline", "img", "text"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        self.text.append(data)


def eqn(primitive: str, name: str) -> EqnRecord:
    return EqnRecord(primitive, params=(("name", name),), in_avals=("float32[]",),
                     out_avals=("float32[]",), in_vars=("a",), out_vars=("b",))


def hostile_session(name: str) -> Session:
    """Every record a view shows, with `name` in each string field it prints."""
    where = SourceLocation(f"/x/{name}.py", 3, name)
    level = Level(0, "grad", f"grad#1{name}", 1, None, f"Trace{name}", function=name)
    value = ValueRecord("array", name, "float32[]", value=name)
    step = Step(0, 0, name, inputs=(value,), outputs=(value,), source=where,
                params=(("name", name),))
    node = TreeNode(0, None, 0, "", "", "node", f"mod.{name}", aux=name,
                    static=(("tag", name),), children=(1,), note=name)
    leaf = TreeNode(1, 0, 1, f".{name}", f".{name}", "leaf", "jax.Array", aval="float32[]",
                    value=name)
    tree = TreeRecord("input", name, treedef=name, nodes=(node, leaf), note=name)
    grad = TreeRecord("gradient", name, nodes=(node, leaf))
    pair = TreePair("gradient", name, tree, grad,
                    rows=(PairRow("", 0, 0, "same"), PairRow(f".{name}", 1, 1, "differs", name)),
                    first_difference=f".{name}", summary=name)
    jaxpr = JaxprRecord(name, f"{{ lambda ; a:f32[]. let b:f32[] = sin a in ({name},) }}", 1,
                        ("float32[]",), ("float32[]",), ("sin",))
    f = Stage("f", name, jaxpr=jaxpr, role="f", method=name, note=name,
              eqns=(eqn("sin", name),), in_vars=("a",), out_vars=("b",))
    g = Stage("grad(f)", name, jaxpr=jaxpr, role="transformed", transform="grad",
              eqns=(eqn("cos", name), eqn("mul", name)), in_vars=("a",), out_vars=("b",))
    lost = Stage(f"hlo({name})", available=False, reason=name)
    error = ErrorRecord(f"Err{name}", f"{name}\nsecond line {name}", 0, 0, where, rule=name,
                        hint=name, level_label=name, transform=name, argument=name,
                        tracer=name, function=name, mismatch=pair)
    diagnostic = Diagnostic("flatten_error", name, name, path=name, function=name)
    call = Call(0, "grad", name, where, levels=(level,), steps=(step,), errors=(error,),
                stages=(f, g, lost), trees=(tree, grad), pairs=(pair,),
                diagnostics=(diagnostic,))
    return Session(calls=[call], jax_version=name, python_version="3", title=name,
                   metadata={"description": name})


def views(session: Session) -> dict[str, str]:
    call = session.calls[0]
    diff = diff_stages(call.stages[0], call.stages[1])
    return {"page": wh.page(session), "session": session._repr_html_(),
            "call": call._repr_html_(), "stage": call.stages[0]._repr_html_(),
            "unavailable stage": call.stages[2]._repr_html_(), "diff": diff._repr_html_(),
            "pair": call.pairs[0]._repr_html_(), "failure": call.errors[0]._repr_html_()}


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_names_cannot_break_out_of_the_html(name):
    for what, text in views(hostile_session(name)).items():
        page = Page(text)
        assert "script" not in page.tags, what
        assert not [a for a, _ in page.attrs if a.startswith("on")], what
        # Every element that opened was closed in order: the payload's </details> is text.
        assert [t for t in page.open if t not in ("html", "body", "head")] == [], what
        shown = "".join(page.text)
        expected = name if name.isprintable() and len(name) < 100 else None
        if expected is not None and what != "diff":  # a lone diff names stages only
            assert expected in shown, what  # shown as text, exactly


def test_the_escaping_is_the_safe_texts_for_controls_and_long_names():
    text = views(hostile_session("x\x1b]0;pwned\x07\u202e" + "f" * 20_000))["call"]
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b" in text
    assert "more characters" in text and len(text) < 400_000


def test_the_html_is_self_contained():
    for what, text in views(hostile_session("f")).items():
        page = Page(text)
        assert not {"script", "link", "iframe", "object", "embed"} & set(page.tags), what
        fetched = [v for a, v in page.attrs if a in ("src", "href", "xlink:href") and v]
        assert fetched == [], what
        assert "@import" not in text and "url(" not in text, what
    assert "Content-Security-Policy" in views(hostile_session("f"))["page"]


def big_session(calls: int, steps: int) -> Session:
    """`calls` calls of `steps` steps each, made as records (no JAX)."""
    value = ValueRecord("array", "ArrayImpl", "float32[3]", value="[1. 2. 3.]")
    out = []
    for c in range(calls):
        levels = (Level(0, "eval", "eval#0", 0, None, "EvalTrace"),
                  Level(1, "grad", "grad#1", 1, 0, "JVPTrace", function="f"))
        call_steps = tuple(Step(i, i % 2, "sin", inputs=(value,), outputs=(value,))
                           for i in range(steps))
        out.append(Call(c, "grad", "f", None, levels=levels, steps=call_steps))
    return Session(calls=out, title="big")


def test_a_big_session_is_bounded_and_says_what_it_left_out():
    text = big_session(1, 100_000)._repr_html_()
    assert len(text.encode()) < 1_000_000
    assert "99,900 more steps not shown" in text
    text = big_session(1_000, 100)._repr_html_()
    assert len(text.encode()) < 5_000_000
    assert "800 more calls not shown" in text and "990 more calls in detail" in text


def test_a_session_lists_its_calls_with_levels_steps_and_failures():
    text = wh.page(hostile_session("loss"))
    shown = "".join(Page(text).text)
    for expected in ("grad(loss)", "grad#1loss", "failed: Errloss", "hint", "f against grad(f)",
                     "flatten_error", "first difference", "unavailable"):
        assert expected in shown, expected


class Printer:
    def __init__(self):
        self.out = []

    def text(self, text):
        self.out.append(text)


def test_each_record_has_a_short_plain_text():
    session = hostile_session("loss")
    call = session.calls[0]
    records = [session, call, call.stages[0], call.pairs[0], call.errors[0],
               diff_stages(call.stages[0], call.stages[1])]
    for record in records:
        printer = Printer()
        record._repr_pretty_(printer, False)
        assert printer.out and 0 < len(printer.out[0]) < 5_000, type(record).__name__
    text = wh.record_text(big_session(100, 10))
    assert text.startswith("Session big: 100 calls, 1,000 steps") and "80 more calls" in text
    assert wh.record_text(object()) is None and wh.record_html(object()) is None


_PROBE = """
import json, sys
import transforms.model as m
before = sorted(x for x in ("workbench", "jax") if x in sys.modules)
html = m.Session(title="t<b>")._repr_html_()
print(json.dumps([before, "t&lt;b&gt;" in html, "workbench.html" in sys.modules,
                  "jax" in sys.modules]))
"""


def test_the_model_finds_the_html_through_its_entry_point_without_importing_it():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout) == [[], True, True, False]


def test_the_graph_is_inline_svg_when_graphviz_is_there():
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed")
    text = hostile_session("loss").calls[0]._repr_html_()
    assert text.count("<svg") == 1 and "<?xml" not in text and "<!DOCTYPE" not in text


def test_a_multi_process_run_shows_each_process():
    from transforms.model import ProcessInfo, ProcessRecord
    one = hostile_session("step")
    processes = tuple(ProcessRecord(ProcessInfo(i, 2), calls=tuple(one.calls), title=f"p{i}")
                      for i in range(2))
    shown = "".join(Page(Session(processes=processes, title="run")._repr_html_()).text)
    assert "process 0/2" in shown and "process 1/2" in shown and "grad(step)" in shown


def test_without_graphviz_the_call_says_how_to_install_it(monkeypatch):
    import shutil
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    text = hostile_session("loss").calls[0]._repr_html_()
    assert "<svg" not in text and "Graphviz is not installed" in text


def test_a_leaf_shows_its_values_as_the_terminal_does():
    from transforms.model import ValueSummary
    from workbench.html._trees import tree_html
    summary = ValueSummary((3,), "float32", "[0.  0.5 1. ]", origin="replayed")
    leaf = TreeNode(0, None, 0, "", "", "leaf", "jax.Array", aval="float32[3]", traced=True,
                    tracer="JitTracer(float32[3])", summary=summary)
    out = tree_html(TreeRecord("output", "x", nodes=(leaf,)))
    assert "= [0.  0.5 1. ]" in out and "(replayed)" in out
