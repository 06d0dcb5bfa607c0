"""Render the seed examples' graphs for the README: screenshots/graphs/*.png and *.svg.

    .venv/bin/python scripts/graphs.py [OUT_DIR]

Records the seed examples live (seed 003's logistic loss and convolve, seed
000's NTContainer, seed 002's primal/tangent mismatch) and draws each view.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the seed examples live in tests/corpus.py

import corpus as C  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import transforms as T  # noqa: E402
from workbench import export  # noqa: E402


def manually_batched_convolve(xs, ws):
    """Seed 003's Python loop over the batch: one copy of convolve per element."""
    return jnp.stack([C.convolve(xs[i], ws[i]) for i in range(xs.shape[0])])


def record():
    with T.record(stages=True) as session:
        T.grad(C.loss, (0, 1))(C.W, C.B)                                          # call 0
        T.vmap(C.convolve)(C.XS, C.WS)                                            # call 1
        T.vmap(T.grad(C.example_loss, (0, 1)),
               in_axes=(None, None, 0, 0))(C.W, C.B, C.INPUTS, C.TARGETS)         # call 2
        T.grad(C.test_func)(C.CONTAINER)                                          # call 3
        T.grad(C.scan_fn)(jnp.arange(3.0))                                        # call 4
        T.grad(C.cond_fn)(1.0)                                                    # call 5
        try:
            T.grad(C.primal_tangent_program)(1.0)                                 # call 6
        except TypeError:  # seed 002: the rule's primal and tangent trees differ
            pass
    with T.record(stages=True) as loop:
        T.jit(manually_batched_convolve)(jnp.stack([C.X] * 4), jnp.stack([C.WK] * 4))
    return session, loop


# (file stem, session key, view, call, stage, options)
GRAPHS = [
    ("grad_loss_jaxpr", "main", "jaxpr", 0, "grad(f)", {}),
    ("grad_loss_backward", "main", "jaxpr", 0, "transpose(linear(f))", {}),
    ("vmap_convolve_stages", "main", "stages", 1, None, {}),
    ("vmap_grad_loss_tower", "main", "tower", 2, None, {}),
    ("ntcontainer_pytree", "main", "pytree", 3, None, {}),
    ("grad_scan_jaxpr", "main", "jaxpr", 4, "grad(f)", {}),
    ("grad_cond_jaxpr", "main", "jaxpr", 5, "grad(f)", {}),
    ("primal_tangent_mismatch", "main", "pytree", 6, None, {}),
    ("python_loop_convolve_collapsed", "loop", "jaxpr", 0, "f", {"collapse_repeats": True}),
]


def main(out_dir: str | None = None) -> int:
    out_dir = out_dir or os.path.join(ROOT, "screenshots", "graphs")
    os.makedirs(out_dir, exist_ok=True)
    main_session, loop = record()
    sessions = {"main": main_session, "loop": loop}
    failed = 0
    for stem, key, view, call, stage, options in GRAPHS:
        for suffix in (".png", ".svg"):
            out = os.path.join(out_dir, stem + suffix)
            try:
                export.graph(sessions[key], view, call, stage, out=out, quiet=True, **options)
            except export.ExportError as e:
                print(f"{stem}{suffix}: {e}", file=sys.stderr)
                failed += 1
                break
        else:
            print(f"wrote {os.path.relpath(out, ROOT)[:-4]}.png/.svg")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
