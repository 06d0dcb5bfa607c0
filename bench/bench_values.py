"""Values and find_nans (issue 33, item 6): the three ratios, measured in one run, CPU time
(time.process_time; the machine is shared):

1. Values off costs nothing beyond today: record() (the default, values off) of a
   10,000-equation grad against plain jax.grad of it, in process, interleaved: today's
   recording overhead, for information (the default's cost is the target of
   bench_trace_overhead.py and bench_training.py).
2. `--values`: record(values=True) of the same grad (every stage's equations evaluated again
   on host copies) against record() of it. Target <= 3x.
3. `--find-nans`: `workbench run --find-nans` of the 200-step training scripts of
   bench_training.py (`jit`: a jitted train_step; `eager`: value_and_grad in the loop), no
   NaN anywhere, against `workbench run` of the same script: whole processes, child CPU
   time. Target <= 1.1x.

For information too: every call's argument and result summaries (on by default) against the
same steps with them switched off, and find_nans' search of a NaN gradient.

    python bench/bench_values.py [--reps N] [--steps N] [--pairs N]
"""
from __future__ import annotations

import argparse
import os
import sys
import textwrap

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
from _common import (  # noqa: E402
    alternating_child_cpu,
    exit_with,
    header,
    interleaved,
    median,
    script_and_dump,
    verdict,
)
from bench_training import MODEL, SCRIPTS  # noqa: E402

import transforms  # noqa: E402

FIND_NANS_TARGET = 1.1
VALUES_TARGET = 3.0


def bench_find_nans_run(variant: str, reps: int) -> int:
    with script_and_dump(f"train_{variant}", SCRIPTS[variant]) as (script, dump):
        run = [sys.executable, "-m", "workbench", "run", "-q", "-o", dump]
        times = alternating_child_cpu({"run": run + [script],
                                       "run --find-nans": run + ["--find-nans", script]}, reps)
    base, ours = median(times["run"]), median(times["run --find-nans"])
    print(f"  {variant}: 200 training steps, child CPU seconds, median of {reps}:")
    print(f"    workbench run               {base:.3f} s")
    print(f"    workbench run --find-nans   {ours:.3f} s")
    return verdict(f"{variant}: run --find-nans / run", ours / base, FIND_NANS_TARGET, "x")


def _eager_training(steps: int):
    namespace: dict = {}
    exec(textwrap.dedent(MODEL), namespace)
    init, loss = namespace["init"], namespace["loss"]
    key = jax.random.PRNGKey(0)
    params = init(key)
    x = jax.random.normal(key, (64, 32))
    y = jax.nn.one_hot(jax.random.randint(key, (64,), 0, 10), 10)

    def run() -> None:
        p = params
        with transforms.record():
            for _ in range(steps):
                value, grads = transforms.value_and_grad(loss)(p, x, y)
                p = jax.tree_util.tree_map(lambda a, g: a - 0.05 * g, p, grads)
        jax.block_until_ready(p)
    return run


def bench_call_values(steps: int, reps: int) -> None:
    import transforms._trees._pytrees as pytrees
    from transforms._capture._values import leaf_value
    run = _eager_training(steps)
    with_values = pytrees.leaf_facts

    def without() -> None:
        pytrees.leaf_facts = lambda x, rec: (leaf_value(x, rec), None)  # type: ignore
        try:
            run()
        finally:
            pytrees.leaf_facts = with_values  # type: ignore[assignment]
    times = interleaved({"values": run, "no values": without}, reps)
    on, off = median(times["values"]), median(times["no values"])
    print(f"  {steps} eager value_and_grad steps recorded, CPU seconds, median of {reps}:")
    print(f"    without the values' summaries  {off:.3f} s")
    print(f"    with them (the default)        {on:.3f} s   ratio {on / off:.3f} (information)")


def _chain(pairs: int):
    """f of 2 * pairs + 5 equations (grad(f) 3 * pairs + 10), and an x whose gradient is
    NaN (sqrt of negatives in the untaken branch of a where)."""
    def f(x):
        for _ in range(pairs):
            x = x * 1.0001 + 0.0001
        return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))
    return f


def bench_values(pairs: int, reps: int) -> int:
    """Ratios 1 and 2: record() against plain JAX, record(values=True) against record()."""
    f = _chain(pairs)
    x = jnp.full(8, 2.0)  # finite: the values of a working program

    def plain() -> None:
        jax.block_until_ready(jax.grad(f)(x))

    def recorded() -> None:
        with transforms.record():
            jax.block_until_ready(transforms.grad(f)(x))

    def valued() -> None:
        with transforms.record(values=True) as session:
            jax.block_until_ready(transforms.grad(f)(x))
        assert session.calls[0].values
    with transforms.record() as session:
        transforms.grad(f)(x)
    eqns = {s.name: s.eqn_count for s in session.calls[0].stages if s.jaxpr is not None}
    times = interleaved({"jax": plain, "record": recorded, "values": valued}, reps, warmup=1)
    a, b, c = (median(times[k]) for k in ("jax", "record", "values"))
    print(f"  grad of f ({eqns.get('grad(f)', 0):,} equations in grad(f); "
          f"{sum(eqns.values()):,} in its {len(eqns)} jaxpr stages), CPU seconds, "
          f"median of {reps}:")
    print(f"    jax.grad (plain)            {a:.3f} s")
    print(f"    record() (values off)       {b:.3f} s   ratio to plain {b / a:.2f} "
          f"(information: today's recording overhead; values off adds nothing to it)")
    print(f"    record(values=True)         {c:.3f} s")
    return verdict("record(values=True) / record()", c / b, VALUES_TARGET, "x")


def bench_search(pairs: int, reps: int) -> None:
    f = _chain(pairs)
    x = jnp.full(8, -1.0)  # sqrt of negatives in the untaken branch: a NaN gradient

    def plain() -> None:
        with transforms.record():
            transforms.grad(f)(x)

    def searched() -> None:
        with transforms.record(find_nans=True) as session:
            transforms.grad(f)(x)
        assert session.calls[0].nonfinite
    times = interleaved({"record": plain, "find_nans": searched}, reps, warmup=1)
    a, b = median(times["record"]), median(times["find_nans"])
    print(f"  grad of {2 * pairs + 5}-equation f, NaN gradient, CPU seconds, median of {reps}:")
    print(f"    record()                 {a:.3f} s")
    print(f"    record(find_nans=True)   {b:.3f} s   ratio {b / a:.2f} (information: the "
          f"replay of the whole grad program, equation by equation)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=3_330)  # a 10,000-equation grad(f)
    args = parser.parse_args()
    header("values and find_nans")
    print("1, 2. record() against plain JAX; record(values=True) against record()")
    failed = bench_values(args.pairs, args.reps)
    print("3. workbench run --find-nans, no NaN, against workbench run")
    for variant in ("jit", "eager"):
        failed |= bench_find_nans_run(variant, args.reps)
    print("information: every call's argument and result values")
    bench_call_values(args.steps, args.reps)
    print("information: the search")
    bench_search(args.pairs, max(1, args.reps // 2))
    exit_with(failed)


if __name__ == "__main__":
    main()
