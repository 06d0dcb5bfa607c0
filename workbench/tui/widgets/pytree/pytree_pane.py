"""The pytree view: a call's input and output trees, leaves paired, mismatches marked.

Uses `workbench.render.pytree` when it is there; otherwise a plain pairing of
the recorded leaves (for grad, outputs are the gradients of the inputs).
"""
from __future__ import annotations

import importlib

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from transforms.record import Call, ValueRecord

from ...guard import Guarded, guarded


class PytreePane(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    PytreePane { padding: 0 1; }
    """

    def compose(self):
        yield Static(id="pytree-body")

    def show(self, call: Call) -> None:
        self.query_one("#pytree-body", Static).update(guarded(lambda: pytree_view(call), "pytree"))


def pytree_view(call: Call) -> RenderableType:
    view = _external_view(call)
    return view if view is not None else plain_pytree_view(call)


def _external_view(call: Call) -> RenderableType | None:
    """The pytree renderable of workbench.render.pytree, if that module offers one for a call."""
    try:
        module = importlib.import_module("workbench.render.pytree")
    except ImportError:
        return None
    for name in ("CallTreesView", "CallPytreeView", "PytreeCallView"):
        cls = getattr(module, name, None)
        if cls is not None:
            return Guarded(cls(call), "pytree")
    return None


def _leaf(v: ValueRecord) -> str:
    text = v.aval
    if not v.is_tracer and v.value is not None:
        text += f" = {v.value}"
    return text[:120]


def plain_pytree_view(call: Call) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("inputs", call.in_tree or "(not recorded)")
    head.add_row("outputs", call.out_tree or "(not recorded)")
    ins, outs = call.inputs, call.outputs
    out_word = "gradient" if call.transform in ("grad", "value_and_grad") else "output"
    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("input leaf")
    table.add_column("")
    table.add_column(f"{out_word} leaf")
    paired = len(ins) == len(outs)
    for i in range(max(len(ins), len(outs))):
        a = ins[i] if i < len(ins) else None
        b = outs[i] if i < len(outs) else None
        same = a is not None and b is not None and a.aval == b.aval
        mark = Text("=" if same else ("≠" if paired and a and b else ""),
                    style="green" if same else "yellow")
        table.add_row(str(i), _leaf(a) if a else "", mark, _leaf(b) if b else "")
    parts: list[RenderableType] = [head, Text("")]
    if ins or outs:
        note = ("leaves paired by position; ≠ marks a different aval" if paired else
                f"{len(ins)} input leaves, {len(outs)} {out_word} leaves: paired by position")
        parts += [Text(note, style="dim"), table]
    else:
        parts.append(Text("no leaves recorded", style="dim"))
    return Group(*parts)
