"""Values and find_nans (issue 33, item 6), ratios in one run:

1. `workbench run --find-nans` of the 200-step training scripts of bench_training.py (`jit`:
   a jitted train_step; `eager`: value_and_grad in the loop), no NaN anywhere, against
   `workbench run` of the same script: whole processes, child CPU time. Target <= 1.1x.
2. The values of every call's arguments and results, in process: 200 eager value_and_grad
   steps recorded (`record()`, which now summarises every input and output leaf) against the
   same steps recorded with the summaries switched off (the tree builder's `leaf_facts`
   replaced by the old `leaf_value`), CPU time, interleaved. For information (values are on
   by default: this is their cost).
3. The search itself, for information: record(find_nans=True) of a 10,000-equation grad whose
   gradient is NaN, against record() of it.

    python bench/bench_values.py [--reps N] [--steps N]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
from _common import alternating_child_cpu, exit_with, header, interleaved, median, verdict  # noqa: E402
from bench_training import MODEL, SCRIPTS  # noqa: E402

import transforms  # noqa: E402

FIND_NANS_TARGET = 1.1


def bench_find_nans_run(variant: str, reps: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, f"train_{variant}.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(SCRIPTS[variant]))
        dump = os.path.join(tmp, "t.json")
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


def bench_search(pairs: int, reps: int) -> None:
    def f(x):
        for _ in range(pairs):
            x = x * 1.0001 + 0.0001
        return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))
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
    print(f"  grad of {2 * pairs + 6}-equation f, NaN gradient, CPU seconds, median of {reps}:")
    print(f"    record()                 {a:.3f} s")
    print(f"    record(find_nans=True)   {b:.3f} s   ratio {b / a:.2f} (information: the "
          f"replay of the whole grad program, equation by equation)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=2_500)
    args = parser.parse_args()
    header("values and find_nans")
    failed = 0
    print("1. workbench run --find-nans, no NaN, against workbench run")
    for variant in ("jit", "eager"):
        failed |= bench_find_nans_run(variant, args.reps)
    print("2. every call's argument and result values")
    bench_call_values(args.steps, args.reps)
    print("3. the search")
    bench_search(args.pairs, max(1, args.reps // 2))
    exit_with(failed)


if __name__ == "__main__":
    main()
