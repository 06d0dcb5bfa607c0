"""The gallery's recompile examples: each trap traces its step again for the reason it
teaches, and its fix beside it compiles once."""
from __future__ import annotations

from workbench import gallery
from workbench.analysis import compile_groups, reason_lines


def _groups(name: str) -> dict[str, tuple[int, list[str]]]:
    outcome = gallery.run_example(gallery.find(name))
    assert outcome.error is None, outcome.traceback
    return {g.function: (g.compiles, [text for text, _, _ in reason_lines(g)])
            for g in compile_groups(outcome.session) if not g.internal}


def test_the_last_smaller_batch_compiles_again_and_padding_does_not():
    assert _groups("last_batch_recompile") == {
        "train_step": (2, ["`batch['mask']` float32[32] -> float32[4] (the last, smaller batch)",
                           "`batch['x']` float32[32,8] -> float32[4,8] (the last, smaller batch)",
                           "`batch['y']` float32[32] -> float32[4] (the last, smaller batch)"]),
        "train_step_padded": (1, []),
    }


def test_a_python_float_learning_rate_that_becomes_an_array_compiles_again():
    assert _groups("python_float_learning_rate") == {
        "sgd": (2, ["`lr` was a Python scalar (weakly typed float32[]) and is now a float32[] "
                    "array"]),
        "sgd_fixed": (1, []),
    }
