#!/usr/bin/env python3
"""Recording overhead against plain JAX, three gates in one run (step recording, stages=False):

1. `jax.make_jaxpr` of `vmap(grad(loss))` of an 8-layer MLP (width 64, tanh), the function
   built afresh each repetition (so no cache hides the cost);
2. `jax.make_jaxpr` of `grad(loss)` of a residual GELU MLP of 500 layers: 33 equations per
   layer, 16.5k in all;
3. the same grad called eagerly (op by op; results waited for).

Each compares `with transforms.record(stages=False):` plus `transforms.<transform>` against `jax.<transform>`.
The variants alternate; each figure is a median of CPU time (the cyclic GC on, as users run it:
its passes over what the recording keeps alive are part of the cost); the ratio is
median(recorded) / median(plain), target <= 1.15 each. Also prints the eager MLP ratio for
information.

    .venv/bin/python bench/bench_trace_overhead.py [--reps N] [--big-reps N] [--layers N]
        [--profile] [--only mlp|grad]
"""
from __future__ import annotations

import argparse
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import BATCH, DEPTH, WIDTH, exit_with, header, interleaved, make_mlp, median, verdict  # noqa: E402

import transforms  # noqa: E402

TARGET = 1.15
IN_AXES = (None, 0, 0)


def make_gelu_mlp(layers: int, width: int = 16, batch: int = 4):
    """A residual GELU MLP: grad(loss) has 33 equations per layer."""
    key = jax.random.PRNGKey(0)
    params = []
    for _ in range(layers):
        key, k = jax.random.split(key)
        params.append((jax.random.normal(k, (width, width)) * 0.01, jnp.zeros((width,))))
    x = jnp.ones((batch, width))

    def loss(params, x):
        h = x
        for w, b in params:
            h = h + jax.nn.gelu(h @ w + b)
        return jnp.mean(h ** 2)

    return loss, params, x


def compare(name: str, plain, recorded, reps: int, warmup: int = 2) -> float:
    t = interleaved({"plain": plain, "recorded": recorded}, reps, warmup)
    p, r = median(t["plain"]), median(t["recorded"])
    print(f"  {name:34} plain {p * 1e3:9.1f} ms   recorded {r * 1e3:9.1f} ms   "
          f"ratio {r / p:.3f}   (min {min(t['recorded']) / min(t['plain']):.3f})")
    return r / p


def mlp_cases(reps: int) -> tuple[float, float, int]:
    loss, params, xs, ys = make_mlp()

    def plain_jaxpr():
        return jax.make_jaxpr(jax.vmap(jax.grad(loss), in_axes=IN_AXES))(params, xs, ys)

    def recorded_jaxpr():
        with transforms.record(stages=False) as session:
            f = transforms.vmap(transforms.grad(loss), in_axes=IN_AXES)
            jaxpr = jax.make_jaxpr(f)(params, xs, ys)
        return jaxpr, session

    def plain_eager():
        return jax.block_until_ready(jax.vmap(jax.grad(loss), in_axes=IN_AXES)(params, xs, ys))

    def recorded_eager():
        with transforms.record(stages=False) as session:
            f = transforms.vmap(transforms.grad(loss), in_axes=IN_AXES)
            out = jax.block_until_ready(f(params, xs, ys))
        return out, session

    jaxpr, session = recorded_jaxpr()
    assert str(jaxpr) == str(plain_jaxpr()), "recorded make_jaxpr differs from plain JAX"
    print(f"  MLP {DEPTH} layers x {WIDTH} (tanh), batch {BATCH}: {session.step_count} steps "
          f"recorded per make_jaxpr; {reps} interleaved reps")
    ratio = compare("vmap(grad) make_jaxpr", plain_jaxpr, recorded_jaxpr, reps)
    eager = compare("vmap(grad) eager (informational)", plain_eager, recorded_eager, reps)
    return ratio, eager, session.step_count


def grad_cases(layers: int, reps: int) -> tuple[float, float]:
    loss, params, x = make_gelu_mlp(layers)

    def plain_jaxpr():
        return jax.make_jaxpr(jax.grad(loss))(params, x)

    def recorded_jaxpr():
        with transforms.record(stages=False) as session:
            jaxpr = jax.make_jaxpr(transforms.grad(loss))(params, x)
        return jaxpr, session

    def plain_eager():
        return jax.block_until_ready(jax.grad(loss)(params, x))

    def recorded_eager():
        with transforms.record(stages=False) as session:
            out = jax.block_until_ready(transforms.grad(loss)(params, x))
        return out, session

    jaxpr, session = recorded_jaxpr()
    plain = plain_jaxpr()
    assert str(jaxpr) == str(plain), "recorded make_jaxpr differs from plain JAX"
    out, eager_session = recorded_eager()
    assert all(bool(jnp.array_equal(a, b, equal_nan=True)) for a, b in zip(jax.tree_util.tree_leaves(out),
                                                           jax.tree_util.tree_leaves(plain_eager())))
    print(f"  residual GELU MLP, {layers} layers: grad has {len(plain.jaxpr.eqns):,} equations; "
          f"{session.step_count:,} steps recorded under make_jaxpr, "
          f"{eager_session.step_count:,} eager; {reps} interleaved reps")
    del session, eager_session
    return (compare("grad make_jaxpr", plain_jaxpr, recorded_jaxpr, reps, 1),
            compare("grad eager", plain_eager, recorded_eager, reps, 1))


def profile(layers: int) -> None:
    import cProfile
    import pstats
    loss, params, x = make_gelu_mlp(layers)
    prof = cProfile.Profile()
    prof.enable()
    with transforms.record(stages=False):
        jax.make_jaxpr(transforms.grad(loss))(params, x)
    prof.disable()
    stats = pstats.Stats(prof)
    print("\ncProfile of the recorded grad make_jaxpr, transforms/ by cumulative time:")
    stats.sort_stats("cumulative").print_stats(r"transforms[/\\]", 25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="repetitions of the MLP cases")
    parser.add_argument("--big-reps", type=int, default=9, help="repetitions of the grad cases")
    parser.add_argument("--layers", type=int, default=500, help="layers of the GELU MLP")
    parser.add_argument("--only", choices=("mlp", "grad"), help="run one workload")
    parser.add_argument("--profile", action="store_true",
                        help="also print a cProfile of one recorded grad make_jaxpr")
    args = parser.parse_args()
    header(f"bench_trace_overhead: recording against plain JAX (GC "
           f"{'on' if gc.isenabled() else 'OFF'})")
    code = 0
    if args.only in (None, "mlp"):
        ratio, _, _ = mlp_cases(args.reps)
        code |= verdict("MLP vmap(grad) make_jaxpr ratio recorded/plain", ratio, TARGET)
    if args.only in (None, "grad"):
        jaxpr_ratio, eager_ratio = grad_cases(args.layers, args.big_reps)
        code |= verdict(f"{args.layers}-layer grad make_jaxpr ratio recorded/plain",
                        jaxpr_ratio, TARGET)
        code |= verdict(f"{args.layers}-layer grad eager ratio recorded/plain", eager_ratio,
                        TARGET)
    if args.profile:
        profile(args.layers)
    exit_with(code)


if __name__ == "__main__":
    main()
