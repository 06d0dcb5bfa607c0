"""A real Jupyter kernel (nbclient, ipykernel) runs docs/notebook.ipynb, the gallery's examples
as a user writes them: each record as a cell's value renders as HTML (issue 38), with its
plain text beside it, and nothing in it is a script."""
from __future__ import annotations

import os

import pytest
from repo_paths import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"

# What each output cell shows (in its HTML), in the notebook's order.
EXPECTED = [
    ("session", ["1 call, ", "vmap(grad(loss))", "levels", "<svg"]),
    ("call", ["call 0", "vmap(grad(loss))", "<code>f</code> against <code>vmap(grad(f))</code>", "<svg",
              "x (input)"]),
    ("stage", ["<code>f</code>", "equations", "tanh"]),
    ("diff", ["<code>f</code> → <code>vmap(grad(f))</code>", "added"]),
    ("pair", ["W vs its gradient", "W (gradient)"]),
    ("failure", ["TracerBoolConversionError", "hint", "jnp.where"]),
    ("gallery session", ["2 calls", "vmap(absolute_if)", "vmap(absolute_where)", "1 failed"]),
]


@pytest.mark.timeout(600)
def test_a_jupyter_kernel_renders_the_records_inline(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    client.execute(env=env)
    results = [out for cell in notebook.cells if cell.cell_type == "code"
               for out in cell.outputs if out.output_type == "execute_result"]
    errors = [out for cell in notebook.cells if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert errors == []
    # Nothing displayed beside the values (rich, drawing the plain text, must not print to it).
    assert [o for cell in notebook.cells for o in cell.get("outputs", ())
            if o.output_type == "display_data"] == []
    assert len(results) == len(EXPECTED)
    for out, (what, needles) in zip(results, EXPECTED):
        html, text = out.data.get("text/html", ""), out.data.get("text/plain", "")
        assert html.startswith("<style>") and '<div class="wb">' in html, what
        assert "<script" not in html.lower(), what
        assert [n for n in needles if n not in html] == [], what
        assert text and len(text) < 5_000, what  # the fallback: short, not the record's repr
