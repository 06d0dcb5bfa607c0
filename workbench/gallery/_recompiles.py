"""Why a jitted training step compiles again: the last, smaller batch and a learning rate
that starts as a Python float, each beside its fix (issue 34). The compiles view (7) names
every retrace's reason, its line and the fix."""
from __future__ import annotations

import numpy as np

import transforms as T

from ._registry import example

FEATURES = 8
BATCH = 32
# 100 examples: three batches of 32, then one of 4. Host arrays: slicing them compiles nothing.
DATA = np.linspace(-1.0, 1.0, 100 * FEATURES, dtype=np.float32).reshape(100, FEATURES)
TARGETS = DATA @ np.arange(FEATURES, dtype=np.float32) / FEATURES


def _loss(w, x, y, mask):
    err = (x @ w - y) * mask
    return (err ** 2).sum() / mask.sum()


def _batches(pad: bool):
    """The data in batches of 32; with `pad`, the last filled up to 32 and masked."""
    for start in range(0, len(DATA), BATCH):
        x, y = DATA[start:start + BATCH], TARGETS[start:start + BATCH]
        mask = np.ones(len(x), np.float32)
        if pad and len(x) < BATCH:
            fill = BATCH - len(x)
            x, y = np.pad(x, ((0, fill), (0, 0))), np.pad(y, (0, fill))
            mask = np.pad(mask, (0, fill))
        yield {"x": x, "y": y, "mask": mask}


@example("Recompiles: the last, smaller batch, and the padded fix", "recompiles")
def last_batch_recompile():
    """A jitted training step over 100 examples in batches of 32: the last batch holds 4, a
    new shape, so JAX traces and compiles the step again (a second full compile, every epoch's
    end in a real run). The compiles view (7) and `workbench show` name it: `batch['x']`
    float32[32,8] -> float32[4,8] (the last, smaller batch), at the line that called the step.
    The fix beside it pads the last batch to 32 and masks the padding out of the loss: one
    trace, one compile, the same gradient."""
    @T.jit
    def train_step(w, batch):
        grads = T.grad(_loss)(w, batch["x"], batch["y"], batch["mask"])
        return w - 0.1 * grads

    w = np.zeros(FEATURES, np.float32)
    for batch in _batches(pad=False):
        w = train_step(w, batch)  # the 4th batch: traced and compiled again

    @T.jit
    def train_step_padded(w, batch):
        grads = T.grad(_loss)(w, batch["x"], batch["y"], batch["mask"])
        return w - 0.1 * grads

    w_fixed = np.zeros(FEATURES, np.float32)
    for batch in _batches(pad=True):
        w_fixed = train_step_padded(w_fixed, batch)  # one shape: one compile
    print("same weights:", np.allclose(w, w_fixed, atol=1e-6))  # the mask: the same gradient


@example("Recompiles: a Python-float learning rate that becomes an array", "recompiles")
def python_float_learning_rate():
    """The first epoch's learning rate is a Python float, later ones come from a schedule as
    float32 arrays. A Python float is weakly typed, an array is not: the jit's key changes
    and the step compiles again. The compiles view (7) says `lr` was a Python scalar (weakly
    typed float32[]) and is now a float32[] array. Later arrays share the new key, so it
    happens once, but every such change is a full compile. The fix beside it passes the
    rate as a float32 array from the start: one compile."""
    def sgd(w, batch, lr):
        grads = T.grad(_loss)(w, batch["x"], batch["y"], batch["mask"])
        return w - lr * grads

    train_step = T.jit(sgd)
    batch = next(_batches(pad=False))
    w = np.zeros(FEATURES, np.float32)
    for epoch in range(3):
        lr = 0.1 if epoch == 0 else np.float32(0.1 * 0.5 ** epoch)  # warm-up, then a schedule
        w = train_step(w, batch, lr)

    def sgd_fixed(w, batch, lr):
        grads = T.grad(_loss)(w, batch["x"], batch["y"], batch["mask"])
        return w - lr * grads

    train_step_fixed = T.jit(sgd_fixed)
    w_fixed = np.zeros(FEATURES, np.float32)
    for epoch in range(3):
        lr = np.float32(0.1 if epoch == 0 else 0.1 * 0.5 ** epoch)  # always a float32 array
        w_fixed = train_step_fixed(w_fixed, batch, lr)
    print("same weights:", np.allclose(w, w_fixed))
