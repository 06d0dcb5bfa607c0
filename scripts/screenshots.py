"""Regenerate screenshots/: the TUI on the seed examples, as SVG (Textual) and PNG (rsvg-convert).

    .venv/bin/python scripts/screenshots.py [--out screenshots]

The seed examples are recorded here, from the seed document "Transformations:
grad and vmap": per-example gradients (vmap of grad of the logistic loss), a
Python `if` failing under vmap, and vmap(convolve) keeping the program's size.
The Devices view of a multi-process run comes from a real run of two
jax.distributed processes on 127.0.0.1 (tests/data/processes/train_step.py, 2 CPU
devices each). PNGs need `rsvg-convert` (librsvg); without it only the SVGs are
written. `--only NAME` (repeatable) regenerates only those screenshots.
"""
from __future__ import annotations

from workbench.cli import ask_for_demo_devices

ask_for_demo_devices()  # the sharded example's 8 CPU devices: before JAX starts its backend

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp

import transforms as T
from transforms.model import Session
from workbench import gallery
from workbench.gallery._registry import run_example
from workbench.tui import build_app
from workbench.tui.export import portable_svg

ROOT = Path(__file__).resolve().parent.parent
SIZE = (110, 32)


# --- the seed examples ----------------------------------------------------------------

def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)


def predict(W, b, inputs):
    return sigmoid(jnp.dot(inputs, W) + b)


def example_loss(W, b, x, y):
    pred = predict(W, b, x)
    label_prob = pred * y + (1 - pred) * (1 - y)
    return -jnp.log(label_prob)


def absolute(x):
    if x > 0:  # needs one answer, but x stands for a whole batch of values
        return x
    else:
        return -x


def convolve(x, w):
    output = []
    for i in range(1, len(x) - 1):
        output.append(jnp.dot(x[i - 1:i + 2], w))
    return jnp.array(output)


def record_seeds() -> list[tuple[str, Session]]:
    inputs = jnp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15],
                        [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    targets = jnp.array([True, True, False, True])
    W, b = jnp.array([0.1, 0.4, -0.3]), 0.5
    with T.record(stages=True, inline_jnp=True) as grads:
        T.vmap(T.grad(example_loss, (0, 1)), in_axes=(None, None, 0, 0))(W, b, inputs, targets)
    with T.record(stages=True, inline_jnp=True) as failing:
        try:
            T.vmap(absolute)(jnp.arange(-2.0, 3.0))
        except Exception:  # noqa: BLE001 - the failure is what this example records
            pass
    x, w = jnp.arange(5.0), jnp.array([2., 3., 4.])
    with T.record(stages=True, inline_jnp=True) as conv:
        T.vmap(convolve)(jnp.stack([x, x]), jnp.stack([w, w]))
    sharded = run_example(gallery.find("sharded_training_step")).session
    growth = run_example(gallery.find("loop_vs_vmap")).session
    container = run_example(gallery.find("ntcontainer_fixed")).session
    tracers = run_example(gallery.find("print_tracers")).session
    return [("vmap(grad(example_loss))", grads), ("vmap(absolute) fails", failing),
            ("vmap(convolve)", conv), ("data-parallel training step, 8 devices", sharded),
            ("Python loop vs vmap", growth), (container.title, container),
            (tracers.title, tracers)]


def gallery_picker() -> list[tuple[str, Session]]:
    """The picker as `workbench demo` shows it: the gallery's first examples, recorded."""
    return [(ex.title, run_example(ex).session) for ex in gallery.EXAMPLES[:8]]


def record_processes() -> list[tuple[str, Session]]:
    """`workbench run --processes 2 --devices-per-process 2 --stages train_step.py`."""
    from workbench.run import _distributed_launch as launch
    script = ROOT / "tests" / "data" / "processes" / "train_step.py"
    result = launch.launch(str(script), [], 2, devices=2, stages=True, timeout=120)
    if result.exit_code != 0:
        raise SystemExit(f"the two-process run failed (exit {result.exit_code})")
    return [("train_step.py, 2 processes", result.session)]


def record_flax_gpt() -> list[tuple[str, Session]]:
    """`workbench run tests/data/libraries/flax_gpt.py`: a flax linen GPT's adamw step."""
    from workbench.run._runner import run_script
    result = run_script(str(ROOT / "tests" / "data" / "libraries" / "flax_gpt.py"))
    if result.exit_code != 0:
        raise SystemExit(f"the flax GPT script failed (exit {result.exit_code})")
    return [("flax GPT, one adamw step", result.session)]


def record_flax_nnx() -> list[tuple[str, Session]]:
    """The gallery's flax nnx example: an MLP's optimizer step under nnx.jit."""
    outcome = run_example(gallery.find("flax_nnx_optimizer_step"))
    if not outcome.ok:
        raise SystemExit(f"the flax nnx example failed: {outcome.error}")
    return [("flax nnx MLP, one optimizer step", outcome.session)]


# (file name, gallery entry, keys pressed) for each screenshot
SHOTS = (
    ("tui-step-tower", 0, ["slash", *"grad", "enter", "slash", *"tanh", "enter"]),
    ("tui-stages-side-by-side", 2, ["2", "z"]),
    ("tui-stages-aligned-diff", 0, ["2", "d"]),
    ("tui-failure", 1, ["4"]),
    ("tui-devices", 3, ["5"]),
    ("tui-growth", 4, ["end", "2", "w"]),  # the last call, vmap(convolve), keeps the growth
    ("tui-pytree-ntcontainer", 5, ["end", "3"]),  # grad's NTContainer: the ones of .array
    ("tui-story", 6, ["6"]),  # the description, and the VmapTracer the seed prints
    ("tui-sessions", None, ["down"]),
)
# Process 1 of the two-process run, its Devices view.
PROCESS_SHOTS = (("tui-processes", 0, ["p", "5"]),)
# The flax GPT's navigator, grouped by module: the attention of block 1, found by search,
# and its einsum (jnp's own jit, one step at the user's line).
GPT_SHOTS = (("tui-flax-gpt-modules", 0, ["slash", *"blocks", "underscore", "1", "slash",
                                           *"attn", "enter", *["down"] * 10]),)
# The nnx MLP's navigator, grouped by the modules on Python's stack (nnx pushes no scopes):
# a step of MLP/l2 selected, the step view naming its module.
NNX_SHOTS = (("tui-flax-nnx-modules", 0, ["slash", *"l2", "enter", "escape", "down"]),)


async def shoot(gallery, name: str, entry: int | None, keys: list[str], out: Path) -> Path:
    app = build_app(gallery_picker() if entry is None else [gallery[entry]])
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        for key in keys:
            await pilot.press(key)
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        svg = app.export_screenshot(title=f"workbench: {name}")
    path = out / f"{name}.svg"
    path.write_text(svg, encoding="utf-8")
    return path


def to_png(svg: Path) -> Path | None:
    """PNG via rsvg-convert, with the SVG's spaces kept (portable_svg)."""
    if shutil.which("rsvg-convert") is None:
        return None
    text = portable_svg(svg.read_text(encoding="utf-8"))
    png = svg.with_suffix(".png")
    subprocess.run(["rsvg-convert", "--zoom", "0.8", "-o", str(png)], input=text.encode(),
                   check=True)
    return png


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="only this screenshot (repeatable), e.g. tui-processes")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)  # source paths show relative to the repository
    wanted = set(args.only or [n for n, _, _ in SHOTS + PROCESS_SHOTS + GPT_SHOTS + NNX_SHOTS])
    shots = [(record_seeds, SHOTS), (record_processes, PROCESS_SHOTS),
             (record_flax_gpt, GPT_SHOTS), (record_flax_nnx, NNX_SHOTS)]
    for record, entries in shots:
        entries = tuple(e for e in entries if e[0] in wanted)
        if entries:
            _shoot_all(record(), entries, args.out)
    return 0


def _shoot_all(gallery: list[tuple[str, Session]], entries: tuple, out: Path) -> None:
    for name, entry, keys in entries:
        svg = asyncio.run(shoot(gallery, name, entry, keys, out))
        png = to_png(svg)
        print(f"wrote {svg.relative_to(ROOT) if svg.is_relative_to(ROOT) else svg}"
              + (f" and {png.name}" if png else " (no rsvg-convert: no PNG)"))


if __name__ == "__main__":
    sys.exit(main())
