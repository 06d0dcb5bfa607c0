"""What keeps recording cheap, asserted as mechanisms (nothing here is timed).

About half of the recording's overhead was Python's cyclic GC walking what the recording
kept alive: a weak reference per live tracer, and objects per step. So a step is a row of
numbers (`_step_core`), tracers are described by their facts in a table per JAX
trace, and the records are made when they are read.
"""
import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transforms as T
from transforms._capture import state as _state


def _chain(n):
    def f(x):
        for _ in range(n):
            x = jnp.tanh(x) * 2.0
        return jnp.sum(x)
    return f


def _tracked_growth(run) -> int:
    """GC-tracked objects alive after `run()` that were not before (none collected between)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        before = len(gc.get_objects())
        kept = run()
        after = len(gc.get_objects())
    finally:
        if was:
            gc.enable()
    del kept
    return after - before


@pytest.mark.slow
@pytest.mark.timeout(300)  # about 15 s quiet
def test_recorded_steps_add_no_gc_tracked_objects():
    x = jnp.ones(3)
    small, big = _chain(20), _chain(220)
    for f in (small, big):  # JAX's caches (tanh's jaxpr, the literals) warm
        jax.make_jaxpr(jax.grad(f))(x)
        with T.record(stages=False):
            jax.make_jaxpr(T.grad(f))(x)

    def recorded(f):
        def run():
            with T.record(stages=False) as session:
                jaxpr = jax.make_jaxpr(T.grad(f))(x)
            return session, jaxpr
        return run

    def plain(f):
        return lambda: jax.make_jaxpr(jax.grad(f))(x)

    def extra(f):  # the least of three: JAX's own caches (warmed by other tests) add noise
        return min(_tracked_growth(recorded(f)) - _tracked_growth(plain(f)) for _ in range(3))

    extra_small, extra_big = extra(small), extra(big)
    with T.record(stages=False) as session:
        jax.make_jaxpr(T.grad(big))(x)
    more_steps = session.step_count - _steps_of(small, x)
    assert more_steps > 1000
    # NB: each step's row is numbers in an array: what recording keeps does not grow with
    # the steps (a tuple per step, or a record per step, would add more_steps objects).
    assert extra_big - extra_small < more_steps * 0.25, (extra_small, extra_big, more_steps)


def _steps_of(f, x) -> int:
    with T.record(stages=False) as session:
        jax.make_jaxpr(T.grad(f))(x)
    return session.step_count


def test_steps_are_rows_in_an_array_until_read():
    with T.record(stages=False) as session:
        T.grad(_chain(5))(jnp.ones(3))
    steps = session.calls[0].steps
    assert not steps.decoded, "a finished call's steps are made when first read"
    assert steps[0].title == "jit[name=tanh]" and steps.decoded
    assert len(steps) == session.step_count


def test_the_describer_keeps_nothing_per_tracer():
    """While a trace runs, the describer's tables hold one entry per JAX trace and one
    record per distinct description: not one per live tracer."""
    sizes = []

    def f(x):
        values = [x]
        for _ in range(200):
            values.append(jnp.sin(values[-1]))
            if len(values) in (21, 201):  # 20 and then 200 tracers alive
                sizes.append(_describer_size(_state.call.steps.describer))
        return sum(v.sum() for v in values)

    with T.record(stages=False):
        T.vmap(T.grad(f))(jnp.ones((2, 30)))  # big enough that values are not kept
    assert len(sizes) == 2
    assert sizes[1] == sizes[0], sizes


def _describer_size(describer) -> int:
    """Entries in the describer's tables (and in the tables they hold)."""
    size = 0
    for table in vars(describer).values():
        if isinstance(table, (dict, list)):
            size += len(table)
            values = table.values() if isinstance(table, dict) else table
            size += sum(len(getattr(v, "records", ())) for v in values)
    return size


def test_equal_facts_share_one_record():
    seen = []

    def f(x):
        a, b = jnp.sin(x), jnp.sin(x)  # two tracers, the same facts at every level
        describer = _state.call.steps.describer
        seen.append((describer.describe(a), describer.describe(b), describer.describe(a)))
        return (a + b).sum()

    with T.record(stages=False) as session:
        T.vmap(T.grad(f))(jnp.ones((2, 3)))
    (first, second, again), = seen
    assert first is second is again
    assert first.is_tracer and [name for name, _ in first.children] == ["primal", "tangent"]
    assert first.children[0][1].kind == "batched"
    steps = session.calls[0].steps
    sins = [s for s in steps if "sin" in s.title and s.level == 2]
    assert len(sins) == 2 and sins[0].outputs[0] is sins[1].outputs[0]


def test_small_concrete_values_keep_their_value_by_their_bytes():
    with T.record(stages=False) as session:
        T.grad(lambda x: (x * jnp.arange(3.0)).sum() * jnp.array(2.0))(jnp.ones(3))
    values = {rec.value for s in session.calls[0].steps for rec in s.inputs if rec.kind == "array"}
    assert "[0., 1., 2.]" in values and "2." in values
    with T.record(stages=False) as session:
        T.grad(lambda x: (x * jnp.array([0.0, 1.0, 3.0])).sum())(jnp.ones(3))
    values = {rec.value for s in session.calls[0].steps for rec in s.inputs if rec.kind == "array"}
    assert "[0., 1., 3.]" in values and "[0., 1., 2.]" not in values
    assert np.asarray(jnp.ones(3)).tobytes()  # the key: bytes (of equal dtype and shape)
