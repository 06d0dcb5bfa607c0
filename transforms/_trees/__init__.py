"""Pytrees: live trees as TreeRecords, paired leaf by leaf (inputs with gradients, primal
with tangent), a call's trees as its kind lays them out (CallTrees), the pre-trace check of
custom pytree nodes, and the diagnosis of a failure. One subject a module:

  _call_trees    CallTrees: the one module here that reads the call's function
  _derivatives   input trees and the output rules (one per TransformKind.outputs, a table)
  _pytrees       live pytrees and PyTreeDefs as TreeRecords (TreeBuilder)
  _tree_pairs    trees paired node by node; argument tuples, Jacobians' nesting
  _library_views the user's arguments behind a library's wrapper
  _precheck      the pre-trace check of custom pytree nodes
  _diagnose      what an exception in a recorded call means
  _nonfinite     what made a NaN or Inf: the table of known causes, with their hints
"""
from __future__ import annotations

from ._call_trees import CallTrees as CallTrees
from ._nonfinite import (
    INPUTS_RULE as INPUTS_RULE,
    NonFiniteFacts as NonFiniteFacts,
    explain_nonfinite as explain_nonfinite,
)
from ._precheck import check_inputs as check_inputs, non_array_argument_error as non_array_argument_error
from ._pytrees import tree_text as tree_text
