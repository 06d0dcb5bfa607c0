"""JAX behind one door (issue 13, item 4): every fact about JAX that a release may change is a
named function of the transforms/_jax package, tested here on the installed JAX (the suite runs
on jax 0.10.2 and on jax 0.12), and no other module states one (a scan of the sources)."""
from __future__ import annotations

import ast
import functools
import inspect
import re

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from repo_paths import ROOT

import transforms as T
from transforms import _jax as _i

DOOR = ROOT / "transforms" / "_jax"  # a package: each part one subject
# The gallery's examples are user code: a seed peeks at `.val` on purpose (its lesson).
SCANNED = [p for pkg in ("transforms", "workbench") for p in sorted((ROOT / pkg).rglob("*.py"))
           if DOOR not in p.parents and "gallery" not in p.parts]

# Attributes of JAX's tracers and traces that have no public accessor. (`val` and
# `batch_dim` are also fields of our own records: _i.batched_parts reads them off a tracer.)
PRIVATE_ATTRIBUTES = {"_trace", "primal", "tangent", "tangent_trace", "parent_trace"}
# Names inside JAX: its functions and their locals read from traceback frames, the parts of the
# objects jax.vjp / jax.linearize return, an enum member of jit's params.
JAX_NAMES = ({site.function for site in _i._MISMATCH_SITES.values()}
             | {n for site in _i._MISMATCH_SITES.values() for n in (site.left, site.right)}
             | {n for site in _i._MISMATCH_SITES.values() for n in site.names or ()}
             | {"_vjp3_callable", "_HashableCallableShim", "_lift_linearized", "JAX_EARLY"})
# Primitives' parameters whose layout changed between releases (scan's groups: num_consts and
# num_carry on 0.10, ft_in on 0.12), when they are read: `params["ft_in"]`, `.get`, `in`.
# (Tables that only choose which params a view prints may name them.)
PARAM_NAMES = {"num_consts", "num_carry", "ft_in", "cond_nconsts", "body_nconsts"}
_GETTERS = {"getattr", "hasattr", "setattr"}
# workbench's runner replaces these on the `jax` module: ours must call JAX's own (_i.jax_own).
PATCHED = {"grad", "value_and_grad", "vmap", "jit", "jvp", "vjp", "linearize", "jacfwd",
           "jacrev", "hessian"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            found.add(id(body[0].value))
    return found


def _param_reads(node: ast.AST) -> list[str]:
    """Param names read by `node`: x["name"], x.get("name", ...), "name" in x."""
    keys: list[ast.AST] = []
    if isinstance(node, ast.Subscript):
        keys = [node.slice]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "get" and node.args:
        keys = [node.args[0]]
    elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn))
                                                for op in node.ops):
        keys = [node.left]
    return [k.value for k in keys if isinstance(k, ast.Constant) and k.value in PARAM_NAMES]


def jax_facts(source: str, in_transforms: bool = True) -> list[tuple[int, str]]:
    """(line, what) for each JAX-version fact stated in `source` (comments and docstrings
    are not facts the code relies on)."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        found += [(node.lineno, f"JAX's parameter {name!r} read")  # type: ignore[attr-defined]
                  for name in _param_reads(node)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _GETTERS and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in PRIVATE_ATTRIBUTES:
            found.append((node.lineno, f"the attribute .{node.args[1].value}"))
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.startswith("jax._src")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jax._src"):
            found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Attribute):
            if node.attr == "_src" and isinstance(node.value, ast.Name) and node.value.id == "jax":
                found.append((node.lineno, "jax._src"))
            elif node.attr in PRIVATE_ATTRIBUTES:
                found.append((node.lineno, f"the attribute .{node.attr}"))
            elif in_transforms and isinstance(node.value, ast.Name) and node.value.id == "jax" \
                    and node.attr in PATCHED:
                found.append((node.lineno, f"jax.{node.attr} (patched by workbench run: "
                                           f"use _i.jax_own.{node.attr})"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            if "jax._src" in node.value:
                found.append((node.lineno, f"the string {node.value!r}"))
            elif node.value in JAX_NAMES:
                found.append((node.lineno, f"JAX's internal name {node.value!r}"))
    return sorted(found)


def test_no_module_but_the_door_states_a_jax_version_fact():
    found = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in SCANNED
             for line, what in jax_facts(p.read_text(), p.parts[-2] == "transforms")]
    assert found == []


C_CORE = sorted((ROOT / "transforms" / "_capture").glob("_core*.[ch]"))
_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_C_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def c_jax_names(source: str) -> list[tuple[int, str]]:
    """(line, name) for each JAX name a C source spells in a string literal outside comments:
    the C step core receives them from the door (`configure`), it never spells them."""
    code = _C_COMMENT.sub(lambda m: "\n" * m.group().count("\n"), source)
    names = (JAX_NAMES | PARAM_NAMES | PRIVATE_ATTRIBUTES | set(_i.JIT_SUMMARY_PARAMS)
             | set(_i.JIT_PRIMITIVE_NAMES) | {_i.PRIMITIVE_NAME_ATTRIBUTE})
    return [(code.count("\n", 0, m.start()) + 1, m.group(1)) for m in _C_STRING.finditer(code)
            if m.group(1) in names or m.group(1).startswith(("jax.", "jaxlib"))]


def test_the_c_step_core_spells_no_jax_name():
    assert C_CORE, "the C step core's sources are not where the scan looks"
    found = [f"{p.relative_to(ROOT)}:{line}: {name!r}" for p in C_CORE
             for line, name in c_jax_names(p.read_text())]
    assert found == []


def test_the_c_scan_finds_names_in_code_not_in_comments():
    source = '/* "jaxpr" in a comment */\nx = "donated_invars"; // "pjit"\ny = "jit";\n'
    assert c_jax_names(source) == [(2, "donated_invars"), (3, "jit")]


def test_the_scan_finds_each_kind_of_fact():
    source = '''
"""A docstring may say jax._src, and .primal."""
import jax._src.core
from jax._src import util
import jax
x = jax._src.api.vjp
def f(t, frame, params, tb):
    """_flatten_jvp in a docstring is prose."""
    # jax._src in a comment is prose too
    t._trace
    getattr(t, "primal")
    frame.f_code.co_name == "_flatten_jvp"
    params["ft_in"]
    jax.grad(f)
    module.startswith("jax._src")
    params.get("num_carry"), "cond_nconsts" in params
    shown = {"scan": ("num_consts",)}  # a view's choice of params: not a read
    getattr(t, "_trace", None), t.batch_dim
'''
    found = jax_facts(source)
    assert [line for line, _ in found] == [3, 4, 6, 10, 11, 12, 13, 14, 15, 16, 16, 18]
    assert jax_facts("import jax\njax.grad(f)\n", in_transforms=False) == []


def test_the_door_still_holds_the_facts_the_scan_looks_for():
    """The scan would pass vacuously if the names it looks for were nowhere: they are in the door."""
    facts = {what for part in sorted(DOOR.glob("*.py"))
             for _, what in jax_facts(part.read_text(), in_transforms=False)}
    assert any("jax._src" in what for what in facts)
    assert "JAX's parameter 'ft_in' read" in facts
    assert "JAX's internal name '_flatten_jvp'" in facts
    assert "JAX's internal name 'JAX_EARLY'" in facts


# --- each fact, on the installed JAX ------------------------------------------------------

def test_jax_own_holds_jax_s_functions_while_jax_star_is_patched(monkeypatch):
    for name in PATCHED:
        assert getattr(_i.jax_own, name) is getattr(jax, name)
    monkeypatch.setattr(jax, "grad", T.grad)
    monkeypatch.setattr(jax, "vjp", T.vjp)
    with T.record() as session:
        assert float(jax.grad(jnp.sin)(0.0)) == 1.0
        out, pullback = jax.vjp(jnp.sin, 0.0)
        assert float(pullback(1.0)[0]) == 1.0
    assert [c.transform for c in session.calls][:2] == ["grad", "vjp"]


def test_tracer_shapes_and_parts():
    seen = {}

    def probe(name):
        def f(x):
            trace = _i.trace_of(x)
            seen[name] = (_i.tracer_shape(type(x), type(trace)), x)
            return x * 2.0
        return f

    jax.vmap(probe("vmap"))(jnp.arange(3.0))
    jax.jvp(probe("jvp"), (1.0,), (1.0,))
    jax.grad(probe("grad"))(1.0)
    jax.make_jaxpr(probe("jit"))(1.0)
    assert {k: v[0] for k, v in seen.items()} == {
        "vmap": "batched", "jvp": "jvp", "grad": "linearize", "jit": "jaxpr"}
    val, bdim = _i.batched_parts(seen["vmap"][1])
    assert bdim == 0 and val.shape == (3,)
    primal, tangent = _i.autodiff_parts(seen["jvp"][1])
    assert float(primal) == 1.0 and float(tangent) == 1.0


def _raised(fun, *args):
    """What fun raised, with the whole traceback (as the recorder sees it, inside
    _i.api_boundary: JAX's own filtering off)."""
    mode = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", "off")
    try:
        fun(*args)
    except Exception as e:  # noqa: BLE001 - whatever JAX raises
        return e
    finally:
        jax.config.update("jax_traceback_filtering", mode)
    raise AssertionError("JAX raised nothing")


def _bad_custom_jvp():
    @jax.custom_jvp
    def f(x):
        return x

    @f.defjvp
    def f_jvp(primals, tangents):
        return (primals[0], primals[0]), tangents[0]
    return lambda: jax.jvp(f, (1.0,), (1.0,))


def _bad_custom_vjp():
    @jax.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))
    return lambda: jax.grad(f)(1.0, 2.0)


MISMATCHES = {
    "custom_jvp": _bad_custom_jvp,
    "custom_vjp": _bad_custom_vjp,
    "cond": lambda: lambda: lax.cond(True, lambda: (1.0, 2.0), lambda: [1.0, 2.0]),
    "scan": lambda: lambda: lax.scan(lambda c, x: ((c, c), x), 0.0, jnp.arange(2.0)),
    "vmap_in_axes": lambda: lambda: jax.vmap(lambda a: a, in_axes=((0, 0),))(jnp.ones(2)),
    "vmap_out_axes": lambda: lambda: jax.vmap(lambda a: (a, a), out_axes=(0, 0, 0))(jnp.ones(2)),
}


@pytest.mark.parametrize("kind", _i.MISMATCH_KINDS)
def test_mismatch_sides_finds_both_trees_in_jax_s_frames(kind):
    error = _raised(MISMATCHES[kind]())
    sides = _i.mismatch_sides(error, kind)
    assert sides is not None, f"{kind}: {error}"
    assert sides.left is not None and sides.right is not None
    if kind == "cond":
        assert (sides.left_name, sides.right_name) == ("true_fun", "false_fun")
    else:
        assert (sides.left_name, sides.right_name) == (None, None)


def test_mismatch_sides_is_none_for_an_error_jax_raised_elsewhere():
    assert _i.mismatch_sides(ValueError("no frames"), "scan") is None


def test_trace_has_ended_for_the_traces_jax_invalidates():
    """Which traces JAX invalidates when their transformation returns (a leak is told by it)."""
    leaked: dict[str, object] = {}

    def keep(name):
        def f(x):
            leaked[name] = x
            return x
        return f

    jax.vmap(keep("vmap"))(jnp.ones(2))
    jax.grad(keep("grad"))(1.0)
    jax.jit(keep("jit"))(1.0)
    ended = {name: _i.trace_has_ended(_i.trace_of(x)) for name, x in leaked.items()}
    # jax 0.11 and later invalidate grad's LinearizeTrace too (0.11.2 measured); none invalidates jit's.
    assert ended == {"vmap": True, "grad": jax.__version_info__ >= (0, 11), "jit": False}


def test_ended_tracer_in_traceback_finds_the_leaked_tracer():
    leaked = []
    jax.vmap(lambda x: leaked.append(x) or x)(jnp.ones(2))
    error = _raised(lambda: jnp.sin(leaked[0]))
    assert isinstance(error, jax.errors.UnexpectedTracerError)
    assert _i.ended_tracer_in_traceback(error) is leaked[0]


def test_public_error_name(monkeypatch):
    """JAX's errors say `jax.errors` as their module (0.10.2 and 0.12); one defined in jax._src
    and exported there is still named by its public home."""
    error = jax.errors.UnexpectedTracerError
    assert error.__module__ == "jax.errors"
    assert _i.public_error_name(error) is None  # its own module name is the public one
    monkeypatch.setattr(error, "__module__", "jax._src.errors")
    assert _i.public_error_name(error) == "jax.errors.UnexpectedTracerError"
    lookalike = type("UnexpectedTracerError", (Exception,), {"__module__": "jax._src.errors"})
    assert _i.public_error_name(lookalike) is None
    assert _i.public_error_name(ValueError) is None


def test_swap_vjp_and_linear_functions_keep_jax_s_results():
    seen = []

    def swap_linear(kind):
        def swap(partial, consts):
            seen.append((kind, type(partial), consts))
            return functools.partial(partial.func, *partial.args, **partial.keywords)
        return swap

    class Spy(functools.partial):
        """The VJP's inner function: what it returns (the backward function) swapped too."""
        def __call__(self, *args, **kwargs):
            backward = super().__call__(*args, **kwargs)
            assert _i.swap_linear_function(backward, swap_linear("backward"))
            return backward

    def swap_vjp(partial):
        seen.append(("vjp", type(partial), None))
        return Spy(partial.func, *partial.args, **partial.keywords)

    _, pullback = jax.vjp(jnp.sin, 0.5)
    assert _i.swap_vjp_function(pullback, swap_vjp)
    assert pullback(1.0) == jax.vjp(jnp.sin, 0.5)[1](1.0)
    _, f_jvp = jax.linearize(jnp.sin, 0.5)
    assert _i.swap_linear_function(f_jvp, swap_linear("linearize"))
    assert f_jvp(1.0) == jnp.cos(0.5)
    assert [(k, t) for k, t, _ in seen] == [("vjp", functools.partial),
                                          ("backward", functools.partial),
                                          ("linearize", functools.partial)]
    assert all(isinstance(consts, int) for kind, _, consts in seen if kind != "vjp")
    assert not _i.swap_vjp_function(lambda ct: ct, swap_vjp)
    assert not _i.swap_linear_function(jnp.sin, swap_linear("other"))


def test_cache_miss_signature_runs_its_hook_on_each_jit_cache_miss_only():
    misses = []

    def f(x, y=1.0):
        return x * y

    f.__signature__ = _i.cache_miss_signature(f, lambda args, kwargs: misses.append(len(args)))
    assert isinstance(f.__signature__, inspect.Signature)
    jitted = jax.jit(f)
    jitted(1.0)
    jitted(2.0)                # cached: no bind
    jitted(jnp.ones(3))       # a new shape: a miss
    assert misses == [1, 1]
    assert _i.cache_miss_signature(functools.partial(max, 1), lambda a, k: None) is None


def _eqn(jaxpr, primitive):
    return next(e for e in jaxpr.eqns if e.primitive.name == primitive)


def test_scan_while_and_custom_call_constants():
    def scanned(xs, w):  # one constant (w), two carries, one xs
        return lax.scan(lambda c, x: ((c[0] * w + x, c[1] + c[0]), x), (1.0, 2.0), xs)

    scan = _eqn(jax.make_jaxpr(scanned)(jnp.arange(4.0), 2.0), "scan")
    assert _i.scan_groups(scan.params) == (1, 2) and len(scan.invars) == 4

    def loop(n, k):  # the cond closes over n, the body over k
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + k, c[1] * k), (0.0, 1.0))

    assert _i.while_consts(_eqn(jax.make_jaxpr(loop)(3.0, 1.0), "while").params) == (1, 1)

    def outer(x, w):  # a custom_jvp function closing over a traced value: a constant
        @jax.custom_jvp
        def g(x):
            return x * w
        g.defjvp(lambda p, t: (g(p[0]), t[0] * w))
        return g(x)

    assert _i.call_consts(_eqn(jax.make_jaxpr(outer)(1.0, 2.0), "custom_jvp_call").params) == 1


def test_inline_jit_params_say_whether_a_staged_jaxpr_holds_the_jit():
    """jnp's wrappers are inlined when staged (`inline=True` on jax 0.10, Inline.JAX_EARLY on
    0.12); a user's jit is not; a user's jit(inline=True) is on 0.10 only (0.12 binds it as
    Inline.JAX_LATE, inlined when lowering: a staged jaxpr holds its jit equation)."""
    def user_inline(y):
        return y * 2.0

    with T.record() as session:
        T.vmap(lambda x: jnp.multiply(jax.jit(user_inline, inline=True)(x), jax.jit(jnp.sin)(x)))(
            jnp.ones(2))
    seen = {(step.title, step.inline) for step in session.calls[0].steps if step.primitive != "mul"}
    staged = [e.primitive.name for e in jax.make_jaxpr(jax.jit(user_inline, inline=True))(1.0).eqns]
    user_inlined = staged == ["mul"]
    assert user_inlined is (jax.__version_info__ < (0, 11))  # 0.11.2 measured as 0.12
    assert seen == {("jit[name=multiply]", True), ("jit[name=sin]", False),
                    ("jit[name=user_inline]", user_inlined)}
    assert not _i.is_inline_jit_params({})


def test_library_jit_params_say_whether_the_jitted_function_is_jaxs_own():
    """jnp's wrappers, inline (`multiply`) or not (`_take`), jit a function of JAX's package;
    a user's jit does not. (A jax.jit of jnp.arctan jits JAX's function: it is one too, where
    the user never jitted it with transforms.jit: see test_library_views.)"""
    def user_fn(y):
        return y * 2.0

    with T.record() as session:
        T.grad(lambda x: jnp.take(jax.jit(user_fn)(x) * jax.jit(jnp.arctan)(x), 0))(jnp.ones(2))
    seen = {(step.title, step.library) for step in session.calls[0].steps
            if step.primitive in _i.JIT_PRIMITIVE_NAMES}
    assert seen == {("jit[name=multiply]", True), ("jit[name=arctan]", True),
                    ("jit[name=_take]", True), ("jit[name=user_fn]", False)}
    assert not _i.is_library_jit_params({})
    assert not _i.is_library_jit_params({"jaxpr": object()})


def test_a_jits_function_source_is_named_as_jax_names_it():
    """The name a jit's jaxpr gives its function (`sin at .../ufuncs.py:N`) is the one
    jax_function_source gives a function of JAX's package, through partials; the user's
    functions have none there."""
    def user_fn(y):
        return y * 2.0

    (eqn,) = jax.make_jaxpr(jax.jit(jnp.sin))(1.0).eqns
    source = _i.jit_function_source(eqn.params)
    assert source is not None and source.startswith("sin at ")
    assert source == _i.jax_function_source(jnp.sin)
    assert source == _i.jax_function_source(functools.partial(jnp.sin))
    assert _i.jax_function_source(jax.nn.softmax).startswith("softmax at ")
    assert _i.jax_function_source(user_fn) is None and _i.jax_function_source(len) is None
    assert _i.jit_function_source({}) is None


def test_defjvps_rules_are_told_from_the_users_rules():
    @jax.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvps(lambda t, out, x: jnp.cos(x) * t)

    def own_jvp(primals, tangents):
        return f(primals[0]), tangents[0]

    assert _i.is_defjvps_rule(f.jvp) and _i.is_defjvps_rule(jax.nn.relu.jvp)
    assert not _i.is_defjvps_rule(own_jvp) and not _i.is_defjvps_rule(object())


def test_wrapped_python_function():
    from jax.extend import linear_util as lu

    def f(x):
        return x
    debug = jax.api_util.debug_info("test", f, (1.0,), {}) if hasattr(jax, "api_util") else None
    assert _i.wrapped_python_function(lu.wrap_init(f, debug_info=debug)) is f
    assert _i.wrapped_python_function(f) is f



def test_rule_identity_of_a_custom_jvp_with_non_differentiated_arguments():
    """custom_jvp holds nondiff_argnums values unhashed (lax.custom_root's jaxprs), as
    argnums_partial(require_static_args_hashable=False) does: keyed all the same, equal
    values as one, an unhashable one by its object."""
    from jax._src.api_util import argnums_partial
    from jax.extend import linear_util as lu

    def f(s, x):
        return x

    debug = jax.api_util.debug_info("test", f, (0, 1.0), {}) if hasattr(jax, "api_util") else None

    def key(static: object) -> object:
        wrapped, _ = argnums_partial(lu.wrap_init(f, debug_info=debug), (1,), (static, 1.0),
                                     require_static_args_hashable=False)
        return _i.rule_identity(wrapped)

    values = [3]
    assert key((1, 2)) is not None and key(values) is not None
    assert key((1, 2)) == key((1, 2)) and key((1, 2)) != key((1, 3))
    assert key(values) == key(values) and key(values) != key([3])

def test_rule_identity_of_a_custom_vjp_bwd_holding_its_constants_avals():
    """A closure-converted custom_vjp's bwd holds its constants' avals as a plain list
    (_handle_consts_in_bwd; equinox's checkpointed loop under diffrax): keyed, equal
    avals as one program."""
    from jax._src.custom_derivatives import _handle_consts_in_bwd
    from jax.extend import linear_util as lu

    def bwd(residuals, g):
        return (g,)

    debug = jax.api_util.debug_info("test", bwd, (0, 1.0), {}) if hasattr(jax, "api_util") else None

    def key(avals: list) -> object:
        return _i.rule_identity(_handle_consts_in_bwd(lu.wrap_init(bwd, debug_info=debug), avals))

    aval = jnp.ones(2).aval
    assert key([]) is not None and key([aval]) is not None
    assert key([]) == key([]) and key([aval]) == key([jnp.zeros(2).aval]) != key([])


def test_staged_var_is_the_variable_of_the_equation_jax_staged():
    seen = []

    def f(x):
        y = jnp.sin(x)
        seen.append(_i.staged_var(y))
        return y * 2.0

    closed = jax.make_jaxpr(f)(1.0)
    (var,) = seen
    assert var is not None and var is closed.jaxpr.eqns[0].outvars[0]
    assert _i.staged_var(1.0) is None and _i.staged_var(jnp.ones(2)) is None
    jax.vmap(lambda x: seen.append(_i.staged_var(x)) or x)(jnp.ones(2))
    assert seen[-1] is None  # a batched tracer: not a jaxpr's variable


def test_other_modules_import_the_door_not_its_parts():
    """The door is one module to the others (`from .. import _jax as _i`): its parts
    (each one subject) may move between releases without another module changing."""
    found = []
    for p in SCANNED + sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{p.relative_to(ROOT)}:{node.lineno}" for n in names  # type: ignore[attr-defined]
                      if "_jax." in n]
    assert found == []


def test_compile_events_name_each_step_of_a_jit_and_its_function():
    seen: list[tuple[str, str]] = []

    def heard(event, seconds, **kwargs):
        phase = _i.event_phase(event)
        if phase is not None:
            seen.append((phase, _i.event_function(kwargs)))

    _i.listen_to_compiles(heard)

    def door_probe(x):
        return x * 3

    jitted = jax.jit(door_probe)
    jitted(jnp.ones(7))
    jitted(jnp.ones(7))  # cached: no event
    assert [s for s in seen if s[1] == "door_probe"] == [
        ("trace", "door_probe"), ("lower", "door_probe"), ("compile", "door_probe")]
    assert _i.event_phase("/jax/core/compile/something_else") is None
    assert _i.jit_cache_size(jitted) == 1 and _i.jit_cache_size(object()) is None


def test_key_leaves_tree_text_and_cache_config():
    seen = {}

    def f(batch, lr):
        seen["x"] = _i.key_leaves(batch)
        seen["lr"] = _i.key_leaves(lr)
        seen["tree"] = _i.tree_text(batch)
        seen["def"] = _i.tree_def(batch)
        return lr

    jax.jit(f)({"x": jnp.ones((2, 3), jnp.int32)}, 0.5)
    [leaf] = seen["x"]
    assert (_i.path_text(leaf.path), leaf.dtype, leaf.shape, leaf.weak_type, leaf.sharding) == (
        "['x']", "int32", (2, 3), False, "")
    assert [(leaf.dtype, leaf.shape, leaf.weak_type) for leaf in seen["lr"]] == [
        ("float32", (), True)]
    assert seen["tree"] == "PyTreeDef({'x': *})"
    # a traced argument's tree equals (and hashes as) the concrete one's, another differs
    assert {seen["def"]: 1}.get(_i.tree_def({"x": jnp.ones(2)})) == 1
    assert seen["def"] != _i.tree_def({"y": jnp.ones(2)})
    assert dict(_i.cache_config()) == {"jax_enable_x64": "False", "jax_default_device": "None",
                                       "mesh": ""}
