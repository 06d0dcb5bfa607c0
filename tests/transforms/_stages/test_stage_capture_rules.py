"""Stages by default, continued: custom_jvp / custom_vjp bodies and rules replayed from what the
call traced, never run again, and JAX's own jaxprs staged from them; a Python float the
transformation does not trace, a noted literal; a dropped jit's stages (the rest:
test_stage_capture.py).
"""
from __future__ import annotations

import collections
import weakref

import jax
import jax.numpy as jnp
import pytest

import transforms
from transforms.model import find_stage, load

X, Y = jnp.arange(3.0), jnp.ones(3)
XS, YS = jnp.ones((2, 3)), jnp.ones((2, 3))


# --- custom_jvp / custom_vjp: bodies and rules replayed, never run again ------------

def custom_loss(with_vjp=True):
    """A loss through custom rules, each body and rule counting its runs: `f`'s rule
    calls `f` (as jax.nn.relu's does), `h`'s and `g`'s never run their bodies."""
    runs = collections.Counter()

    @jax.custom_jvp
    def f(x):
        runs["f"] += 1
        return jnp.sin(x) * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        runs["f_jvp"] += 1
        return f(primals[0]), jnp.cos(primals[0]) * 2.0 * tangents[0]

    @jax.custom_jvp
    def h(x):
        runs["h"] += 1
        return jnp.tanh(x)

    @h.defjvp
    def h_jvp(primals, tangents):
        runs["h_jvp"] += 1
        y = jnp.tanh(primals[0])
        return y, (1 - y ** 2) * tangents[0]

    @jax.custom_vjp
    def g(x):
        runs["g"] += 1
        return jnp.sin(x)

    def g_fwd(x):
        runs["g_fwd"] += 1
        return jnp.sin(x), jnp.cos(x)

    def g_bwd(cos_x, t):
        runs["g_bwd"] += 1
        return (cos_x * t,)
    g.defvjp(g_fwd, g_bwd)

    def loss(x, y):
        out = jnp.sum(f(x) * y) + jnp.sum(h(x)) + jnp.sum(jax.nn.relu(x))
        return out + jnp.sum(g(x)) if with_vjp else out  # no jvp of a custom_vjp in JAX
    return loss, runs


# (case, whether the loss has a custom_vjp, the program)
CUSTOM_CALLS = [
    ("grad", True, lambda T, f: T.grad(f)(X, Y)),
    ("value_and_grad", True, lambda T, f: T.value_and_grad(f, argnums=(0, 1))(X, Y)),
    ("jit_grad", True, lambda T, f: T.jit(T.grad(f))(X, Y)),
    ("vmap_grad", True, lambda T, f: T.vmap(T.grad(f))(XS, YS)),
    ("grad_jit", True, lambda T, f: T.grad(T.jit(f))(X, Y)),
    ("jit_vmap_grad", True, lambda T, f: T.jit(T.vmap(T.grad(f)))(XS, YS)),
    ("vmap", True, lambda T, f: T.vmap(f)(XS, YS)),
    ("jacrev", True, lambda T, f: T.jacrev(f)(X, Y)),
    ("jacfwd", False, lambda T, f: T.jacfwd(f)(X, Y)),
    ("hessian", False, lambda T, f: T.hessian(f)(X, Y)),
    ("jvp", False, lambda T, f: T.jvp(f, (X, Y), (Y, X))),
    ("vjp_and_pullback", True, lambda T, f: T.vjp(f, X, Y)[1](1.0)),
    ("linearize_and_push", False, lambda T, f: T.linearize(f, X, Y)[1](X, Y)),
]


@pytest.mark.parametrize("with_vjp, program", [c[1:] for c in CUSTOM_CALLS],
                         ids=[c[0] for c in CUSTOM_CALLS])
def test_custom_bodies_and_rules_run_as_often_as_without_the_workbench(with_vjp, program):
    plain_loss, plain = custom_loss(with_vjp)
    program(jax, plain_loss)
    loss, ours = custom_loss(with_vjp)
    with transforms.record() as session:
        program(transforms, loss)
    assert session.calls and all(c.stages for c in session.calls)
    assert plain["f"] >= 1 and plain["h"] + plain["h_jvp"] >= 1  # the counters count
    assert ours == plain


def _grad_oracle(loss, held: bool) -> dict:
    """JAX's own jaxprs of grad's stages of loss(x, Y) in x; `held`: y is an input
    (under jit it is traced), else a constant (an eager call's value)."""
    mj = jax.make_jaxpr
    if held:
        def jvp(p, t, y):
            return jax.jvp(lambda x: loss(x, y), p, t)
        jvp_jaxpr = mj(jvp)((X,), (X,), Y)
        linearized = mj(lambda p, y: jax.linearize(lambda x: loss(x, y), p))(X, Y)
    else:
        def at(x):
            return loss(x, Y)
        jvp_jaxpr = mj(lambda p, t: jax.jvp(at, p, t))((X,), (X,))
        linearized = mj(lambda p: jax.linearize(at, p))(X)

    def at_y(x):
        return loss(x, Y)
    return {"f": mj(loss)(X, Y), "jvp(f)": jvp_jaxpr, "linearize(f)": linearized,
            "linear(f)": mj(jax.linearize(at_y, X)[1])(X),
            "transpose(linear(f))": mj(jax.vjp(at_y, X)[1])(jnp.float32(1.0)),
            "grad(f)": mj(jax.grad(loss))(X, Y)}


def _linear_oracle(loss, tangents) -> dict:
    mj = jax.make_jaxpr
    return {"f": mj(loss)(X, Y),
            "jvp(f)": mj(lambda p, t: jax.jvp(loss, p, t))((X, Y), tangents),
            "linearize(f)": mj(lambda *p: jax.linearize(loss, *p))(X, Y),
            "linear(f)": mj(jax.linearize(loss, X, Y)[1])(X, Y),
            "transpose(linear(f))": mj(jax.vjp(loss, X, Y)[1])(jnp.float32(1.0))}


CUSTOM_ORACLES = [
    # (case, with_vjp, program, oracle of the stages it must have)
    ("grad", True, lambda T, f: T.grad(f)(X, Y), lambda f: _grad_oracle(f, held=False)),
    ("jit_grad", True, lambda T, f: T.jit(T.grad(f))(X, Y), lambda f: _grad_oracle(f, held=True)),
    ("vmap_grad", True, lambda T, f: T.vmap(T.grad(f))(XS, YS), lambda f: {
        "f": jax.make_jaxpr(f)(X, Y), "grad(f)": jax.make_jaxpr(jax.grad(f))(X, Y),
        "vmap(grad(f))": jax.make_jaxpr(jax.vmap(jax.grad(f)))(XS, YS)}),
    ("jvp", False, lambda T, f: T.jvp(f, (X, Y), (Y, X)), lambda f: {
        k: v for k, v in _linear_oracle(f, (Y, X)).items() if k in ("f", "jvp(f)")}),
    ("vjp", False, lambda T, f: T.vjp(f, X, Y), lambda f: {
        k: v for k, v in _linear_oracle(f, (X, Y)).items() if k != "linearize(f)"}),
    ("linearize", False, lambda T, f: T.linearize(f, X, Y), lambda f: {
        k: v for k, v in _linear_oracle(f, (X, Y)).items() if k != "transpose(linear(f))"}),
]


@pytest.mark.parametrize("with_vjp, program, oracle", [c[1:] for c in CUSTOM_ORACLES],
                         ids=[c[0] for c in CUSTOM_ORACLES])
def test_replayed_custom_rules_stage_jaxs_own_jaxprs(with_vjp, program, oracle):
    loss, runs = custom_loss(with_vjp)
    with transforms.record() as session:
        program(transforms, loss)
    stages = session.calls[0].stages
    expected = oracle(custom_loss(with_vjp)[0])
    for name, closed in expected.items():
        stage = find_stage(stages, name)
        assert stage.available, (name, stage.reason)
        assert stage.jaxpr.text == str(closed), name
    assert "custom_jvp_call" in find_stage(stages, "f").jaxpr.text


def test_a_body_that_never_ran_is_staged_from_its_rule_and_the_stage_says_so():
    loss, runs = custom_loss()
    with transforms.record() as session:
        transforms.grad(loss)(X, Y)
    assert runs["g"] == 0 and runs["h"] == 0  # grad ran g_fwd and h_jvp, never g or h
    stages = session.calls[0].stages
    note = find_stage(stages, "f").note
    assert ("custom_loss.<locals>.g's body did not run at this call "
            "(custom_loss.<locals>.g_fwd, its custom_vjp fwd rule, ran instead), and stages "
            "never run your Python again: the custom_vjp_call body shown here is the part of "
            "custom_loss.<locals>.g_fwd that computes custom_loss.<locals>.g's outputs.") in note
    assert "custom_loss.<locals>.h's body did not run" in note
    assert not find_stage(stages, "jvp(f)").note  # the stages that hold only rules: no note


def test_a_rule_that_did_not_run_is_not_run_for_a_stage():
    """vjp's pullback runs g_bwd after the vjp call's stages are captured."""
    loss, runs = custom_loss()
    with transforms.record() as session:
        transforms.vjp(loss, X, Y)
    assert runs["g_bwd"] == 0
    stage = find_stage(session.calls[0].stages, "transpose(linear(f))")
    assert not stage.available
    assert stage.reason == (
        "RuleNotRun: custom_loss.<locals>.g_bwd (a custom_vjp bwd rule) cannot be staged: it "
        "did not run at this call at these argument types (a bwd rule runs in the backward "
        "pass: after jax.vjp, when its pullback is called, later than the vjp call's stages "
        "are made), and stages never run the user's Python again")


def _pullback_stages(session) -> list:
    return [find_stage(c.stages, "transpose(linear(f))") for c in session.calls]


@pytest.mark.parametrize("cotangent", [1.0, jnp.float32(1.0)], ids=["python_float", "array"])
def test_a_bwd_rule_its_pullback_ran_completes_the_vjp_calls_stages(tmp_path, cotangent):
    """The bwd runs when the pullback is called, after the vjp call's stages were made:
    its run, kept as a tape, completes them (as JAX's own jaxprs, at the cotangent the
    pullback was given), in the vjp call, in the pullback's call and in a dump."""
    loss, runs = custom_loss()
    with transforms.record() as session:
        _, pullback = transforms.vjp(loss, X, Y)
        pullback(cotangent)
    assert runs["g_bwd"] == 1  # once, by JAX's pullback; no stage ran it
    forward, backward = session.calls
    assert backward.transform == "vjp_backward" and forward.stages is backward.stages
    expected = {k: v for k, v in _linear_oracle(custom_loss()[0], (X, Y)).items()
                if k != "linearize(f)"}
    expected["transpose(linear(f))"] = jax.make_jaxpr(
        jax.vjp(custom_loss()[0], X, Y)[1])(cotangent)
    note = ("staged at the cotangent the pullback was called with (float32[] weakly typed), "
            "the types its custom rules ran at, not at the outputs' types")
    assert find_stage(forward.stages, "transpose(linear(f))").note == (
        note if isinstance(cotangent, float) else "")
    path = tmp_path / "session.json"
    session.save(path)
    for calls in (session.calls, load(path).calls):
        for call in calls:
            for name, closed in expected.items():
                stage = find_stage(call.stages, name)
                assert stage.available, (name, stage.reason)
                assert stage.jaxpr.text == str(closed), name
    assert "custom_vjp_bwd" in {level.kind for level in backward.levels}


def test_completing_the_vjp_calls_stages_that_fails_is_noted_on_the_pullbacks_call(
        monkeypatch):
    """A fault of ours while the pullback's rules complete the vjp call's stages: the stages
    stay as they were, and the pullback's call says what was lost (nothing silent)."""
    from transforms._stages import _chain

    def broken(*args, **kwargs):
        raise RuntimeError("no stages today")

    loss, _ = custom_loss()
    with transforms.record() as session:
        _, pullback = transforms.vjp(loss, X, Y)
        monkeypatch.setattr(_chain, "_capture_group", broken)
        pullback(1.0)
    forward, backward = session.calls
    assert not find_stage(forward.stages, "transpose(linear(f))").available
    assert forward.diagnostics == ()
    assert [(d.kind, d.message) for d in backward.diagnostics] == [(
        "internal", "the workbench failed completing the forward call's stages with the "
        "pullback's rules: RuntimeError: no stages today")]


def test_the_issue_repro_every_stage_of_vjp_and_its_pullback_is_available():
    @jax.custom_vjp
    def g(x):
        return jnp.sin(x)

    def g_fwd(x):
        return jnp.sin(x), jnp.cos(x)

    def g_bwd(c, t):
        return (c * t,)
    g.defvjp(g_fwd, g_bwd)

    def loss(x):
        return jnp.sum(g(x) * 2)
    with transforms.record() as session:
        _, pullback = transforms.vjp(loss, X)
        pullback(1.0)
    assert [s.name for s in session.calls[0].stages if not s.available] == []
    assert session.calls[1].stages is session.calls[0].stages
    stage = find_stage(session.calls[0].stages, "transpose(linear(f))")
    assert stage.jaxpr.text == str(jax.make_jaxpr(jax.vjp(loss, X)[1])(1.0))
    # the bwd's equation (the last) names no step of the vjp call: its steps are the pullback's
    assert stage.jaxpr.text.splitlines()[-2].strip().startswith("f:f32[3] = mul b e")
    assert stage.eqn_steps[-1] == -1 and all(0 <= n for n in stage.eqn_steps[:-1])


def test_a_pullback_completes_the_stages_every_call_of_its_signature_holds():
    """Two vjp calls of one signature share their stages, captured by the first: its
    pullback completes them for every call holding them, and for later calls."""
    loss, runs = custom_loss()
    with transforms.record() as session:
        _, first = transforms.vjp(loss, X, Y)
        _, second = transforms.vjp(loss, X + 1, Y)
        second(1.0)  # its bwd is not the one the first call's stages replay (JAX's own
        # WrappedFun for each vjp call): nothing is completed by it
        assert not any(s.available for s in _pullback_stages(session))
        first(1.0)
        transforms.vjp(loss, X, Y)  # a later call shares the completed ones
    assert runs["g_bwd"] == 2
    assert [c.parent for c in session.calls] == [None, None, 1, 0, None]
    assert len({id(c.stages) for c in session.calls}) == 1
    expected = str(jax.make_jaxpr(jax.vjp(custom_loss()[0], X, Y)[1])(1.0))
    assert all(s.available and s.jaxpr.text == expected for s in _pullback_stages(session))


def test_a_pullback_that_fails_leaves_the_stage_waiting():
    @jax.custom_vjp
    def g(x):
        return jnp.sin(x)
    calls = []

    def g_bwd(c, t):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("bwd failed")
        return (c * t,)
    g.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), g_bwd)
    with transforms.record() as session:
        _, pullback = transforms.vjp(lambda x: jnp.sum(g(x)), X)
        with pytest.raises(ValueError, match="bwd failed"):
            pullback(1.0)
        assert not any(s.available for s in _pullback_stages(session))
        pullback(1.0)
    assert len(calls) == 2
    forward, failed, backward = session.calls
    assert failed.errors and not backward.errors
    stage = find_stage(forward.stages, "transpose(linear(f))")
    assert stage.available and stage.jaxpr.text == str(jax.make_jaxpr(
        jax.vjp(lambda x: jnp.sum(g(x)), X)[1])(1.0))
    assert backward.stages is forward.stages is failed.stages  # one tuple for the signature


def test_a_rule_given_one_array_twice_is_not_replayed():
    loss, runs = custom_loss(with_vjp=False)
    with transforms.record() as session:
        transforms.jvp(loss, (X, Y), (X, Y))  # X is both a primal and a tangent of f_jvp
    assert runs["f_jvp"] == 1
    stage = find_stage(session.calls[0].stages, "jvp(f)")
    assert not stage.available and "was given one array as two of its arguments" in stage.reason



@jax.custom_vjp
def _scaled_sin(x, y):
    return x * jnp.sin(y)


_scaled_sin.defvjp(lambda x, y: (x * jnp.sin(y), (x, y)),
                   lambda r, g: (g * jnp.sin(r[1]), g * r[0] * jnp.cos(r[1])))


def test_a_rule_given_one_array_twice_replays_where_the_replay_gives_it_one_array():
    """`_scaled_sin(x, x)` under grad: its fwd rule ran with one array as both arguments, and
    the stages' replay binds it so again: which argument each step read does not matter."""
    def loss(x):
        return jnp.sum(_scaled_sin(x, x))

    with transforms.record() as session:
        transforms.grad(loss)(X)
    stages = session.calls[0].stages
    for name in ("jvp(f)", "linearize(f)", "transpose(linear(f))", "grad(f)"):
        assert find_stage(stages, name).available, find_stage(stages, name).reason
    assert find_stage(stages, "grad(f)").jaxpr.text == str(jax.make_jaxpr(jax.grad(loss))(X))
    # its body never ran (grad runs the fwd rule), and the fwd cannot stand for it there:
    # JAX traces the body with two inputs
    body = find_stage(stages, "f")
    assert not body.available and ("did not run at this call (<lambda>, its custom_vjp fwd "
                                    "rule, ran instead, and cannot stand for it: it was given "
                                    "one array as two of its arguments") in body.reason


def test_a_rule_whose_step_returns_its_input_itself_is_replayed():
    """From jax 0.12.1 jnp.real of a real array returns its input itself (an identity jit
    inlined as it is traced), as logsumexp's custom_jvp body does: the body is staged."""
    def loss(x):
        return jnp.sum(jax.nn.logsumexp(x.reshape(3, 1) * Y, axis=-1))

    with transforms.record() as session:
        transforms.jit(transforms.value_and_grad(loss))(X)
    for name in ("f", "value_and_grad(f)"):
        stage = find_stage(session.calls[0].stages, name)
        assert stage.available, stage.reason
    assert find_stage(session.calls[0].stages, "value_and_grad(f)").jaxpr.text == str(
        jax.make_jaxpr(jax.value_and_grad(loss))(X))


@jax.custom_vjp
def _sin_stopped_times(x):
    return jnp.sin(jax.lax.stop_gradient(x)) * x


def _stopped_fwd(x):
    return jnp.sin(jax.lax.stop_gradient(x)) * x, x


_sin_stopped_times.defvjp(_stopped_fwd, lambda x, g: (g * x,))


def test_a_rule_whose_eager_step_returned_its_input_itself_says_which_step():
    """An eager grad runs the fwd on concrete arrays: its stop_gradient returned x itself, and
    `sin` read the result where `mul` read x (one object both times), so the fwd cannot be
    replayed: each stage needing it names that step and its line."""
    with transforms.record() as session:
        transforms.grad(_sin_stopped_times)(1.0)
    line = _stopped_fwd.__code__.co_firstlineno + 1
    why = (f"its step `stop_gradient` at {__file__}:{line} ran on concrete arrays and returned "
           f"its input array itself (as an identity's impl does), so which of the two, the "
           f"input or the step's result, each later step read is not known")
    for stage in session.calls[0].stages:
        assert not stage.available and why in stage.reason, stage.name


@jax.custom_vjp
def _times(x, n):
    return x * n


_times.defvjp(lambda x, n: (x * n, n), lambda n, g: (g * n, None))


def test_a_custom_call_bound_from_a_jaxpr_stages_its_body_as_that_jaxpr():
    """A custom_vjp in a closure-converted function (as equinox's checkpointed loops under
    diffrax): evaluating the jaxpr binds it with a fresh body, JAX's function of the jaxpr
    it holds. Under grad only its fwd ran, given the jaxpr's literal `3` (a Python int) where
    the f stage traces the body at an int tracer, so the fwd cannot stand for it: the body is
    the jaxpr, evaluated (no Python of the user's runs), and f is JAX's own."""
    body, consts = jax.closure_convert(lambda x: jnp.sin(_times(x, 3)), 1.0)

    def loss(x):
        return body(x, *consts)

    with transforms.record() as session:
        transforms.grad(loss)(1.0)
    stages = session.calls[0].stages
    assert [s.name for s in stages if not s.available] == []
    f = find_stage(stages, "f")
    assert f.jaxpr.text == str(jax.make_jaxpr(loss)(1.0)) and f.note == ""
    assert find_stage(stages, "grad(f)").jaxpr.text == str(jax.make_jaxpr(jax.grad(loss))(1.0))


# --- a custom_jvp with non-differentiated arguments: lax.custom_root -----------------

def newton_sqrt(a):
    """sqrt(a) by Newton's method, differentiated implicitly (lax.custom_root passes its
    jaxprs to a custom_jvp as non-differentiated arguments, which JAX holds unhashed)."""
    def f(x):
        return x * x - a

    def solve(g, x0):
        return jax.lax.while_loop(lambda x: jnp.abs(g(x)) > 1e-6,
                                  lambda x: x - g(x) / jax.grad(g)(x), x0)
    return jax.lax.custom_root(f, 1.0, solve, lambda g, y: y / g(1.0))


def newton_loss(a):
    return newton_sqrt(a) ** 2


# JAX 0.10's lax.custom_root is a custom_jvp; from 0.11 a primitive of its own.
CUSTOM_JVP_ROOT = "custom_jvp_call" in str(jax.make_jaxpr(newton_loss)(2.0))


def test_custom_root_stages_replay_the_rules_that_ran():
    """The body and _root_jvp ran (levels custom_jvp_fun#3, custom_jvp_rule#3): every
    jaxpr stage is JAX's own, none says a rule did not run."""
    jax.clear_caches()  # JAX runs the rules again only when it traces again
    with transforms.record() as session:
        transforms.grad(transforms.jit(newton_loss))(2.0)
    call = session.calls[0]
    if CUSTOM_JVP_ROOT:
        assert {lv.kind for lv in call.levels} >= {"custom_jvp_fun", "custom_jvp_rule"}
    stages = call.stages
    assert find_stage(stages, "f").jaxpr.text == str(jax.make_jaxpr(newton_loss)(2.0))
    assert find_stage(stages, "grad(jit(f))").jaxpr.text == str(
        jax.make_jaxpr(jax.grad(jax.jit(newton_loss)))(2.0))
    assert all(s.available for s in stages if s.role not in ("stablehlo", "hlo", "cost",
                                                             "memory")), \
        [(s.name, s.reason) for s in stages if not s.available]


@pytest.mark.skipif(not CUSTOM_JVP_ROOT, reason="this JAX's lax.custom_root has no custom rule")
def test_a_rule_the_recorder_could_not_key_is_not_said_not_to_have_run(monkeypatch):
    monkeypatch.setattr("transforms._stages._rule_tapes._i.rule_identity", lambda fun: None)
    with transforms.record() as session:
        transforms.grad(newton_loss)(2.0)
    stage = find_stage(session.calls[0].stages, "grad(f)")
    assert stage.reason == (
        "RuleNotRun: _root_jvp (a custom_jvp rule) cannot be staged: its "
        "function could not be told apart from others (a static argument of it that will not "
        "hash), so what it bound when it ran was not kept, and stages never run the user's "
        "Python again")

# --- a Python float the transformation does not trace: a literal, and said so -----------

def scaled_sin(x, y):
    return jnp.sum(jnp.sin(x) * y)


def sin_only(x, y):
    return jnp.sum(jnp.sin(x))


FLOAT_NOTE = ("y=2.0 is a Python float that {kind} does not trace: scaled_sin ran with it as "
              "a constant, so these stages hold it as a literal, not an input (jax.make_jaxpr "
              "traces a float argument as an input)")


@pytest.mark.parametrize("kind, program", [
    ("grad", lambda T: T.grad(scaled_sin)(X, 2.0)),
    ("vmap", lambda T: T.vmap(scaled_sin, in_axes=(0, None))(XS, 2.0)),
    ("grad", lambda T: T.vmap(T.grad(scaled_sin), in_axes=(0, None))(XS, 2.0)),
], ids=["grad", "vmap", "vmap_grad"])
def test_a_python_float_the_transformation_does_not_trace_is_a_noted_literal(kind, program):
    seen = []
    jax.grad(lambda x, y: seen.append(type(y)) or scaled_sin(x, y))(X, 2.0)
    assert seen == [float]  # JAX itself runs f with the float, not a tracer of it
    with transforms.record() as session:
        program(transforms)
    jaxpr_stages = [s for s in session.calls[0].stages if s.jaxpr is not None]
    assert jaxpr_stages and all(s.note == FLOAT_NOTE.format(kind=kind) for s in jaxpr_stages)
    assert "mul c 2.0:f32[]" in find_stage(session.calls[0].stages, "f").jaxpr.text


@pytest.mark.parametrize("program", [
    lambda T: T.grad(scaled_sin, argnums=(0, 1))(X, 2.0),  # traced: an input
    lambda T: T.jit(scaled_sin)(X, 2.0),
    lambda T: T.grad(sin_only)(X, 2.0),  # not used at all: nothing baked in
], ids=["differentiated", "jit", "unused"])
def test_a_traced_or_unused_float_has_no_note(program):
    with transforms.record() as session:
        program(transforms)
    assert not any(s.note for s in session.calls[0].stages)
def test_a_jit_the_program_drops_inside_the_block_keeps_its_stages_and_frees_at_once():
    """Its stages are read when the program drops it: what JAX frees then is freed then."""
    x = jnp.ones(10)
    f = (lambda x: lambda: x * 2)(x)  # x lives in f's closure
    x_ref = weakref.ref(x)
    del x
    with transforms.record() as session:
        g = transforms.jit(f)
        g()
        del f, g
        assert x_ref() is None  # JAX's cache of the trace (x among its constants) is gone
        transforms.jit(lambda y: jnp.sin(y))(1.0)  # a temporary, dropped at once
    for call in session.calls:
        roles = {s.role: s.available for s in call.stages}
        assert roles["f"] and roles["hlo"], [(s.name, s.reason) for s in call.stages]
