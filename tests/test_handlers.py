"""Every broad exception handler (`except:`, `except Exception`, `except BaseException`) in
transforms/ and workbench/, each with why it may stay broad (ARCHITECTURE: nothing lost
silently). A new one fails here until it is listed with its reason; a listed one that is
gone fails too, so the list stays the code's.

Reasons, by what the handler does with what it caught:
- re-raises: it only cleans up or records, then raises what it caught;
- noted: a fault of the recorder, kept on the call as an `internal` Diagnostic (lost_diagnostic);
- in the record: what failed is written into the record itself (a failed stage's reason, a
  node's or a stage's note, "<repr-error ...>" text), so readers see it;
- the user's code: the user's objects (repr, flatten, __eq__, hash) may raise anything; what
  JAX does with them is JAX's, and the record says what we met;
- said: reported to the user (a status line, stderr, the exit code, a placeholder on screen);
- JAX's: a fact of a JAX release read in the door, with a documented "unknown" result.
"""
from __future__ import annotations

import ast
from collections import Counter

from repo_paths import ROOT

HANDLERS: list[tuple[str, str, str]] = [
    # (file, enclosing function, why it stays broad)
    ("transforms/_capture/_describe.py", "Describer._small_array",
     "in the record: a deleted or donated buffer is described as it is (no value)"),
    ("transforms/_capture/_jaxpr_records.py", "_safe_text_full",
     "in the record: a repr that raises becomes <repr-error T: message>"),
    ("transforms/_capture/_locations.py", "library_closure_of",
     "the user's code: a library's __wrapped__ that raises wraps nothing; the closure keeps its name"),
    ("transforms/_capture/_param_rules.py", "_shard_map_rule",
     "JAX's: out_specs is not known until JAX traces the body; JAX fills it later"),
    ("transforms/_capture/_sharding_text.py", "mesh_text",
     "in the record: an abstract or unfamiliar mesh is shown by its own safe repr"),
    ("transforms/_capture/_spec.py", "Options.has_aux",
     "the user's code: a has_aux whose truth raises; JAX refuses it itself"),
    ("transforms/_capture/_value_summary.py", "leaf_facts",
     "in the record: a deleted or donated buffer is <unavailable: T>"),
    ("transforms/_capture/_values.py", "_aval_text_uncached",
     "in the record: an aval kind without str_short keeps its type and the error's"),
    ("transforms/_capture/_values.py", "_array_summary",
     "in the record: a deleted or donated buffer is <unavailable: T>"),
    ("transforms/_capture/_values.py", "leaf_value",
     "in the record: a deleted or donated buffer is <unavailable: T>"),
    ("transforms/_common/_text.py", "_safe",
     "in the record: the user's repr that raises becomes <repr-error T>"),
    ("transforms/_common/_text.py", "message",
     "in the record: a message that cannot be printed names its type"),
    ("transforms/_devices/_call_shardings.py", "CallShardings._inputs",
     "noted: the inputs' shardings a fault of ours could not read"),
    ("transforms/_devices/_call_shardings.py", "CallShardings._outputs",
     "noted: the outputs' shardings a fault of ours could not read"),
    ("transforms/_devices/_call_shardings.py", "CallShardings.of_stages",
     "noted: the names the executable's shardings need"),
    ("transforms/_devices/_call_shardings.py", "CallShardings.of_stages.named",
     "noted: the executable's shardings (on the call, also when its stages come later)"),
    ("transforms/_devices/_sharding.py", "is_multi_device",
     "JAX's: a deleted or donated array has no layout to record; JAX reports its use"),
    ("transforms/_devices/_sharding.py", "sharding_record",
     "in the record: JAX refusing the layout (a shape it does not divide) is the note"),
    ("transforms/_devices/_sharding.py", "with_compiled_view",
     "in the record: executable shardings not read are said in the hlo stage's note"),
    ("transforms/_devices/_sharding.py", "with_compiled_view",
     "in the record: collectives not read are said in the hlo stage's note"),
    ("transforms/_jax/_custom_rules.py", "rule_identity",
     "JAX's: not a WrappedFun, or unhashable static arguments: no identity (None)"),
    ("transforms/_jax/_params.py", "custom_vjp_out_count",
     "JAX's: the fwd's stores empty or another layout: the count is unknown (None)"),
    ("transforms/_jax/_trace.py", "trace_has_ended",
     "JAX's: a trace type without is_valid has not ended"),
    ("transforms/_jax/_trace.py", "RecordingTrace.process_primitive",
     "re-raises: the failing step recorded, JAX's error raised as it was"),
    ("transforms/_jax/_trace.py", "RecordingTrace.process_call",
     "re-raises: the failing step recorded, JAX's error raised as it was"),
    ("transforms/_jax/_trace.py", "_recording_forwarder.forward",
     "re-raises: the failing step recorded, JAX's error raised as it was"),
    ("transforms/_jax/_tracebacks.py", "api_boundary.boundary",
     "re-raises: the traceback filtered as JAX filters it"),
    ("transforms/_common/_bracket.py", "PyBracket.__call__",
     "re-raises: the run's `raised` hook told (the C Bracket's twin)"),
    ("transforms/_recording/_call.py", "CallBuilder.__init__",
     "the user's code: inputs whose flatten raises; JAX raises it once tracing starts, "
     "and the record's in_tree says <unavailable: T: message>"),
    ("transforms/_recording/_call_stages.py", "CallStages.plan",
     "in the record: a fault of ours planning stages is the call's failed stage"),
    ("transforms/_recording/_calls.py", "invoke",
     "re-raises: the failed call recorded (open_invoke's run, as a Python call)"),
    ("transforms/_recording/_calls.py", "open_invoke",
     "re-raises: JAX's filtering switch put back, the traceback filtered as JAX filters it"),
    ("transforms/_recording/_calls.py", "open_call_level",
     "re-raises: the call finished as failed, the current call cleared"),
    ("transforms/_recording/_calls.py", "open_call_level.returned",
     "re-raises: the call finished as failed, the current call cleared"),
    ("transforms/_recording/_calls.py", "_OpenLevel.__init__",
     "re-raises: the level's tape abandoned, the enclosing level's phase set"),
    ("transforms/_recording/_calls.py", "_OpenLevel.returned",
     "re-raises: the level's tape abandoned, the enclosing level's phase set"),
    ("transforms/_recording/_calls.py", "_OpenCall.returned",
     "re-raises: the traceback filtered as JAX filters it"),
    ("transforms/_recording/_calls.py", "_OpenTop.__init__",
     "re-raises: the call finished as failed, the current call cleared"),
    ("transforms/_recording/_calls.py", "_OpenTop._returned",
     "re-raises: the call finished as failed"),
    ("transforms/_recording/_calls.py", "build",
     "re-raises: a creation error recorded as a failed call"),
    ("transforms/_recording/_levels.py", "run_level",
     "re-raises: the error recorded at its level"),
    ("transforms/_recording/_levels.py", "LevelRun.__init__",
     "re-raises: the level taken off the stack of open levels"),
    ("transforms/_recording/_call_stages.py", "CallStages._keep_jaxprs_of",
     "noted: the jaxprs find_nans replays, a fault of ours; the call keeps its stages"),
    ("transforms/_recording/_find_nans.py", "search_call",
     "in the record: a replay that fails is the finding's note"),
    ("transforms/_recording/_jit_values.py", "note_jit_values",
     "the user's code: an argument JAX itself refuses (a deleted buffer): JAX raises, the "
     "call keeps no argument values"),
    ("transforms/_recording/_jit_values.py", "JitReplay.__call__",
     "noted: the replay of a jit's results, a fault of ours (JitReplay.apply)"),
    ("transforms/_recording/_jit_values.py", "JitReplay.__call__",
     "in the record: the program's own failure when run again is the output tree's note"),
    ("transforms/_recording/_stage_values.py", "stage_values",
     "in the record: an equation that cannot be evaluated again is the StageValues' note"),
    ("transforms/_recording/_stage_values.py", "_evaluated",
     "in the record: deriving a stage's inputs (its forward pass evaluated) failed: the "
     "StageValues' note"),
    ("transforms/_stages/_autodiff.py", "ad_stages",
     "in the record: every autodiff stage unavailable with the reason"),
    ("transforms/_stages/_autodiff.py", "_Point.linearize_stages",
     "in the record: the linearized stage unavailable with the reason"),
    ("transforms/_stages/_autodiff.py", "_Point.transposed_stage",
     "in the record: the transposed stage unavailable with the reason"),
    ("transforms/_stages/_chain.py", "capture",
     "in the record: a fault of ours capturing stages is the call's failed stage"),
    ("transforms/_stages/_chain.py", "PendingStages.settle",
     "noted: on the pullback's call; the vjp call's stages stay as they were"),
    ("transforms/_stages/_chain.py", "_growth_point",
     "in the record: the growth point of this size holds the error"),
    ("transforms/_stages/_compiled.py", "DeferredJit.finish",
     "in the record: a fault of ours reading jit's stages is the call's failed stage"),
    ("transforms/_stages/_compiled.py", "DeferredJit.stages",
     "in the record: jit's trace failing makes its stages unavailable with the reason"),
    ("transforms/_stages/_compiled.py", "compiled_stages",
     "in the record: lowering failed: the stages unavailable with the reason"),
    ("transforms/_stages/_compiled.py", "compiled_stages",
     "in the record: compilation failed: the stages unavailable with the reason"),
    ("transforms/_stages/_compiled.py", "_metrics_stage",
     "in the record: a backend without this analysis: the stage unavailable with the reason"),
    ("transforms/_stages/_plan.py", "StagePlan.enter",
     "the user's code: arguments whose flatten raises; JAX raises it, the call records it"),
    ("transforms/_stages/_plan.py", "StagePlan.enter_outer",
     "the user's code: arguments whose flatten raises; JAX raises it, the call records it"),
    ("transforms/_stages/_plan.py", "signature",
     "the user's code: an unhashable or unflattenable argument: stages captured unshared"),
    ("transforms/_stages/_plan.py", "concrete_shardings",
     "the user's code: a node whose flatten raises; JAX reports it itself"),
    ("transforms/_stages/_plan.py", "mesh_context",
     "JAX's: inside a trace, or no mesh context on this JAX: none to re-enter"),
    ("transforms/_stages/_plan.py", "_current_mesh",
     "JAX's: inside a trace there is no mesh to read"),
    ("transforms/_stages/_records.py", "stage_of",
     "in the record: this stage unavailable with the reason; the others go on"),
    ("transforms/_stages/_records.py", "_literal_text_uncached",
     "in the record: an exotic literal shown by its type"),
    ("transforms/_stages/_records.py", "_sub_roles",
     "JAX's: params of another release: roles unknown, the edges still drawn"),
    ("transforms/_stages/_rule_tapes.py", "RuleTapes._key",
     "in the record: an argument with no signature: the stage needing the rule says it "
     "cannot be staged"),
    ("transforms/_trees/_call_trees.py", "CallTrees.__init__",
     "noted: describing the inputs"),
    ("transforms/_trees/_call_trees.py", "CallTrees.finish",
     "noted: reading a library's outputs"),
    ("transforms/_trees/_call_trees.py", "CallTrees.finish",
     "noted: describing the outputs"),
    ("transforms/_trees/_call_trees.py", "CallTrees.note_nested",
     "noted: a nested transformation's trees"),
    ("transforms/_trees/_call_trees.py", "CallTrees.note_function_output",
     "noted: the function's output"),
    ("transforms/_trees/_call_trees.py", "CallTrees.note_leaks",
     "noted: looking for leaked tracers"),
    ("transforms/_trees/_call_trees.py", "CallTrees.error_fields",
     "noted: diagnosing the error"),
    ("transforms/_trees/_diagnose.py", "diagnose",
     "in the record: the hint says the diagnosis is incomplete, and why"),
    ("transforms/_trees/_library_views.py", "library_values",
     "the user's code: a library's merge that raises: the trees show what JAX was given"),
    ("transforms/_trees/_precheck.py", "check_inputs",
     "the user's code: a flatten that raises, cycles, unhashable aux: walked node by node"),
    ("transforms/_trees/_precheck.py", "check_inputs",
     "in the record: the user's flatten that raises is a flatten_error Diagnostic"),
    ("transforms/_trees/_precheck.py", "check_inputs",
     "JAX's: no node data (a None, a future node kind): checked as a plain node"),
    ("transforms/_trees/_precheck.py", "non_array_argument_error",
     "the user's code: JAX's flatten raises its own error: nothing to add"),
    ("transforms/_trees/_precheck.py", "non_array_argument_error",
     "the user's code: another of JAX's checks refused them: not this failure"),
    ("transforms/_trees/_precheck.py", "_refused_leaf",
     "the user's code: jax.typeof of a user object that raises other than TypeError"),
    ("transforms/_trees/_precheck.py", "_keystr",
     "the user's code: a key whose text raises is [?]"),
    ("transforms/_trees/_precheck.py", "_CallCatcher._profile",
     "the user's code: a profile hook inside the user's flatten must never raise"),
    ("transforms/_trees/_precheck.py", "_check_node",
     "in the record: unhashable aux data is an unhashable_aux Diagnostic"),
    ("transforms/_trees/_precheck.py", "_check_node",
     "in the record: an unflatten that raises is an unflatten_error Diagnostic"),
    ("transforms/_trees/_precheck.py", "_check_node",
     "in the record: aux data whose == raises is a roundtrip Diagnostic"),
    ("transforms/_trees/_pytrees.py", "_qualified_name",
     "in the record: a metaclass whose __getattr__ raises: <type-error T>"),
    ("transforms/_trees/_pytrees.py", "_attributes",
     "the user's code: an attribute that raises: aux values named by position"),
    ("transforms/_trees/_pytrees.py", "_key_text",
     "in the record: a key whose text raises is [<key-error T>]"),
    ("transforms/_trees/_pytrees.py", "TreeBuilder.build",
     "the user's code: a flatten that raises, cycles, unhashable aux: walked node by node"),
    ("transforms/_trees/_pytrees.py", "TreeBuilder._fill_leaf",
     "in the record: a leaf not described says so in its note"),
    ("transforms/_trees/_pytrees.py", "TreeBuilder._node",
     "in the record: the user's flatten that raises is an error node with its message"),
    ("transforms/_trees/_pytrees.py", "TreeBuilder._node",
     "in the record: node data unavailable is said in the node's note"),
    ("transforms/_trees/_pytrees.py", "TreeBuilder._leaf",
     "in the record: a leaf not described says so in its note"),
    ("transforms/_trees/_pytrees.py", "_treedef_text",
     "in the record: a treedef that cannot be printed is <unavailable: T>"),
    ("transforms/_trees/_pytrees.py", "_static_field_names",
     "the user's code: odd dataclass metadata: aux named by attribute as for any node"),
    ("transforms/_trees/_pytrees.py", "treedef_tree",
     "in the record: a child that cannot be read is an error node with the message"),
    ("transforms/_wrappers/_jit.py", "_InBlock.returned",
     "re-raises: the traceback filtered as JAX filters it"),
    ("transforms/model/_files.py", "write_atomically",
     "re-raises: the temporary file removed"),
    ("workbench/_safe_text.py", "_str",
     "in the record: a value whose __str__ raises is shown as such"),
    ("workbench/export/_write.py", "_run_dot",
     "re-raises: our Graphviz child killed"),
    ("workbench/gallery/_registry.py", "run_example",
     "said: the example's error and traceback are its result"),
    ("workbench/render/_safe.py", "safe",
     "said: a renderer's failure is a <render-error> placeholder"),
    ("workbench/run/_distributed_launch.py", "_process_info",
     "said: on stderr; the launcher's facts about the process are kept"),
    ("workbench/run/_runner.py", "run_script",
     "said: the script's own failure, reported as Python would, with its exit code"),
    ("workbench/run/_watch.py", "Watch._record",
     "said: a dump the child could not finish is the watch's message"),
    ("workbench/tui/app.py", "WorkbenchApp._record_all",
     "said: a gallery example that failed to record says why in its session"),
    ("workbench/tui/app.py", "WorkbenchApp._load",
     "said: a corrupt dump says why on the way out (exit code 2)"),
    ("workbench/tui/guard.py", "Guarded.__rich_console__",
     "said: a renderer's failure is a placeholder"),
    ("workbench/tui/guard.py", "Guarded.__rich_measure__",
     "said: drawing shows the placeholder"),
    ("workbench/tui/guard.py", "guarded",
     "said: a renderer's failure is a placeholder"),
    ("workbench/tui/screens/session_export.py", "save_view",
     "said: the status line says why the view was not saved"),
    ("workbench/tui/screens/session_export.py", "_export.run",
     "said: the status line says why the export failed"),
    ("workbench/tui/widgets/common/line_list.py", "LineList.render_line",
     "said: a row that cannot be drawn is a <render-error> row"),
    ("workbench/tui/widgets/pytree/pytree_pane.py", "_diagnostic_lines",
     "said: diagnostics that cannot be drawn are a <render-error> line"),
    ("workbench/tui/widgets/stages/stages_pane.py", "StagesPane._compute_diff",
     "said: a diff that fails is a <diff-error> in the view"),
]

_BROAD = {"Exception", "BaseException"}


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _BROAD for n in names)


def broad_handlers() -> Counter[tuple[str, str]]:
    """(file, enclosing function) of each broad handler in transforms/ and workbench/."""
    found: Counter[tuple[str, str]] = Counter()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

    def walk(node: ast.AST, path: str, names: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ExceptHandler) and _is_broad(child):
                found[(path, ".".join(names) or "<module>")] += 1
            walk(child, path, names + (child.name,) if isinstance(child, scopes) else names)

    for package in ("transforms", "workbench"):
        for file in sorted((ROOT / package).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            walk(ast.parse(file.read_text(encoding="utf-8")), path, ())
    return found


def test_every_broad_handler_is_listed_with_its_reason():
    listed = Counter((path, function) for path, function, _ in HANDLERS)
    found = broad_handlers()
    new = {k: n - listed[k] for k, n in found.items() if n > listed[k]}
    gone = {k: n - found[k] for k, n in listed.items() if n > found[k]}
    assert not new, (f"broad handlers not listed in tests/test_handlers.py: {new}; narrow "
                     "them, or keep them broad with a reason (and record what they lose)")
    assert not gone, f"listed broad handlers that are gone (drop them from the list): {gone}"


def test_every_reason_says_what_happens_to_what_was_caught():
    kinds = ("re-raises", "noted", "in the record", "the user's code", "said", "JAX's")
    for path, function, reason in HANDLERS:
        assert reason.startswith(kinds), (path, function, reason)
