"""Pytrees: live trees as TreeRecords, paired leaf by leaf (inputs with gradients, primal
with tangent), a call's trees as its kind lays them out (CallTrees), the pre-trace check of
custom pytree nodes, and the diagnosis of a failure."""
from __future__ import annotations

from ._call_trees import CallTrees as CallTrees
from ._precheck import check_inputs as check_inputs, non_array_argument_error as non_array_argument_error
from ._pytrees import tree_text as tree_text
