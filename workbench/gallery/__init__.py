"""The gallery: every seed example, recorded live with `transforms`, one Session each.

    from workbench.gallery import EXAMPLES, run_example
    outcome = run_example(EXAMPLES[0])   # its session, what it printed, failures shown
"""
# Importing registers the examples, in gallery order: seed 003's grad and vmap (the main page)
# first, then seed 000's pytree containers, seed 002's custom_jvp structures, sharding,
# libraries, then NaN hunting (issue 33), then recompiles (issue 34).
from . import _grad_and_vmap  # noqa: F401, I001
from . import _pytree_containers  # noqa: F401
from . import _custom_jvp_structures  # noqa: F401
from . import _sharded_training  # noqa: F401
from . import _libraries  # noqa: F401
from . import _nan_hunting  # noqa: F401
from . import _recompiles  # noqa: F401
from ._registry import EXAMPLES as EXAMPLES
from ._registry import Example as Example
from ._registry import Outcome as Outcome
from ._registry import expect_failure as expect_failure
from ._registry import run_example as run_example


def find(name: str) -> Example:
    """The example called name; KeyError naming the known ones."""
    for ex in EXAMPLES:
        if ex.name == name:
            return ex
    raise KeyError(f"no gallery example {name!r}; known: {', '.join(e.name for e in EXAMPLES)}")


__all__ = ["EXAMPLES", "Example", "Outcome", "expect_failure", "find", "run_example"]
