"""The pytree records: a tree kept flat (its nodes in preorder, children by index), two
trees paired node by node, and the findings of the pre-trace check of custom nodes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ._display import Displayed
from ._source_location import SourceLocation


class ValueSummary(NamedTuple):
    """A concrete array's values as data, made on the host after the call: NumPy's own
    print of it when small (`text`), and for any size its statistics over the finite
    values (min ... std; None where there is none) with counts of NaN, Inf and zeros."""
    shape: tuple[int, ...]
    dtype: str
    text: str = ""            # as NumPy prints it (np.array2string), "" when too big
    min: float | None = None  # of the finite values
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    nan: int = 0
    inf: int = 0
    zeros: int = 0
    origin: str = ""          # "" the value itself; "replayed": the call's recorded jaxpr
                              # evaluated on host copies of its arguments (a jit's results)

    @property
    def size(self) -> int:
        size = 1
        for d in self.shape:
            size *= d
        return size

    @property
    def finite(self) -> bool:
        return not (self.nan or self.inf)

    def describe(self) -> str:
        """One line: NumPy's print when small, else `≈mean ±std [≥min, ≤max]` then the
        counts of NaN, Inf and zeros that are not 0 (`nan:2 zeros:10`), or `true: 3 of 80`."""
        if self.text:
            return self.text.replace("\n", "")  # NaN, Inf and zeros show themselves
        if self.dtype == "bool":  # the zeros are the Falses
            return f"true: {self.size - self.zeros:,} of {self.size:,}"
        if self.mean is not None and self.std is not None:
            head = f"≈{_g(self.mean)} ±{_g(self.std)} [≥{_g(self.min)}, ≤{_g(self.max)}]"
        else:
            head = "no finite values" if self.size else "[]"
        counts = [f"{name}:{n:,}" for name, n in (("nan", self.nan), ("inf", self.inf),
                                                   ("zeros", self.zeros)) if n]
        return " ".join([head] + counts)


def _g(v: float | None) -> str:
    return "?" if v is None else f"{v:.3g}"


# Trees are kept flat (nodes in preorder, children by index) so that deep
# structures stay shallow in memory and in JSON.

class TreeNode(NamedTuple):
    """One node of a pytree: a container with its static aux data, or a leaf.

    NB: a NamedTuple, as Step is: trees are built on every recorded call.
    """
    # NB: the field `index` shadows tuple.index, which mypy reports; the name stays.
    index: int  # type: ignore[assignment]
    parent: int | None
    depth: int
    key: str                  # its entry in the parent: ".array", "[0]", "['W']"; "" at the root
    path: str                 # key path from the root, e.g. "['layers'][0].w"
    kind: str                 # node | leaf | none | error | cycle | truncated
    type_name: str            # qualified, e.g. "corpus.NTContainer", "dict", "jax.Array"
    aux: str = ""             # static aux data as text (custom nodes)
    static: tuple[tuple[str, str], ...] = ()  # aux values named by the attribute holding them
    children: tuple[int, ...] = ()
    aval: str = ""            # leaves: "float32[3,2]"
    value: str | None = None  # small concrete leaves, summarised
    traced: bool = False      # a tracer (a traced value), not a concrete one
    tracer: str = ""          # the tracer described: "VmapTracer(aval=..., batch_dim=0)"
    note: str = ""            # why the node could not be described further
    static_leaf: bool = False  # a leaf a library's wrapper kept static, not traced
                               # (eqx.filter_jit's non-array leaves: an activation function)
    summary: ValueSummary | None = None  # a concrete leaf's values, or a traced leaf's
                                         # concrete argument (jit); None where not known

    @property
    def is_leaf(self) -> bool:
        return self.kind == "leaf"


@dataclass(frozen=True, slots=True)
class TreeRecord:
    """A pytree as data: an input argument, an output, a gradient, a rule's output."""
    role: str                 # input | output | gradient | tangent | cotangent | jacobian
                              # | hessian | primal_out | tangent_out | expected ...
    name: str                 # the root as the user names it: "container", "args[1]", "grad"
    treedef: str = ""         # str(PyTreeDef), "" when unavailable
    nodes: tuple[TreeNode, ...] = ()
    argnum: int | None = None
    note: str = ""            # e.g. "truncated at 2000 nodes"

    @property
    def root(self) -> TreeNode | None:
        return self.nodes[0] if self.nodes else None

    @property
    def leaves(self) -> tuple[TreeNode, ...]:
        return tuple(n for n in self.nodes if n.kind == "leaf")

    def node(self, path: str) -> TreeNode | None:
        for n in self.nodes:
            if n.path == path:
                return n
        return None

    def full_path(self, node: TreeNode) -> str:
        """`container.array`: the root's name then the key path."""
        return self.name + node.path


@dataclass(frozen=True, slots=True)
class PairRow:
    """One key path of two trees side by side."""
    path: str
    left: int | None          # node index in the left tree, None where it has none
    right: int | None
    status: str               # same | differs | left_only | right_only
    note: str = ""            # what differs, e.g. "float32[3] vs float32[]"


@dataclass(frozen=True, slots=True)
class TreePair(Displayed):
    """Two trees paired node by node: inputs and gradients, or a structure mismatch."""
    kind: str                 # gradient | tangent | cotangent | jacobian | hessian | custom_jvp
                              # | custom_vjp | cond | scan | vmap_in_axes | vmap_out_axes
    title: str
    left: TreeRecord
    right: TreeRecord
    rows: tuple[PairRow, ...] = ()
    first_difference: str | None = None  # key path of the first structural difference
    left_has: str = ""        # what each side has there
    right_has: str = ""
    summary: str = ""

    @property
    def same_structure(self) -> bool:
        return self.first_difference is None


# The Diagnostic kind of what the recorder failed to record for a call (its message says
# what and why): a fault of ours, kept on the call rather than raised into the user's program.
LOST = "internal"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A finding of the pre-trace check of a custom pytree node, or (kind LOST) what the
    recorder could not record for the call, and why."""
    kind: str                 # undefined_name | flatten_error | unflatten_error | roundtrip
                              # | unhashable_aux | cycle | too_deep | leaked_tracer | internal
    message: str
    node_type: str            # the registered type, qualified
    path: str = ""            # where it was met in the inputs: "container"
    function: str = ""        # the flatten/unflatten function, e.g. "repack_NTC"
    source: SourceLocation | None = None  # the line using the undefined name, or the def line
    names: tuple[str, ...] = ()           # the undefined names
