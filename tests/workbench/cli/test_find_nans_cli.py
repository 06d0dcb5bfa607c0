"""`workbench run/dump --find-nans` (issue 33, item 3): the script stops at the first call with
a NaN or Inf (exit code 3), or goes on with --keep-going (the script's exit code); `show`
prints the values and the finding."""
from __future__ import annotations

import textwrap

from transforms.model import load
from workbench.cli import main

TRAP = textwrap.dedent("""
    import jax, jax.numpy as jnp
    def f(x):
        return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))
    print("before")
    print(jax.grad(f)(jnp.array([0.0, 1.0])))
    print("after")
""")


def _script(tmp_path, text=TRAP):
    script = tmp_path / "trap.py"
    script.write_text(text)
    return str(script)


def test_find_nans_stops_the_script_with_exit_code_3(tmp_path, capsys):
    out = str(tmp_path / "t.json")
    assert main(["dump", "-q", "--find-nans", "-o", out, _script(tmp_path)]) == 3
    captured = capsys.readouterr()
    assert "before" in captured.out and "after" not in captured.out
    assert "NonFiniteFound" in captured.err and "div in grad(f)" in captured.err
    (call,) = load(out).calls
    assert call.nonfinite[0].rule == "where_gradient_trap"


def test_keep_going_runs_on_and_keeps_the_scripts_exit_code(tmp_path, capsys):
    out = str(tmp_path / "t.json")
    assert main(["dump", "-q", "-o", out, _script(tmp_path), "--find-nans",
                 "--keep-going"]) == 0
    captured = capsys.readouterr()
    assert "after" in captured.out
    assert "--find-nans: call 0 (f) returned a NaN or Inf" in captured.err
    assert main(["show", out]) == 0
    shown = capsys.readouterr().out
    assert "input x: float32[2] = [0. 1.]" in shown
    assert "first NaN/Inf: div in grad(f) eqn 2 (forward, grad#1)" in shown
    assert "hint (where_gradient_trap)" in shown


def test_no_nan_no_finding_and_the_scripts_exit_code(tmp_path, capsys):
    fixed = TRAP.replace("jnp.sqrt(x)", "jnp.sqrt(jnp.where(x > 0, x, 1.0))")
    out = str(tmp_path / "t.json")
    assert main(["dump", "--find-nans", "-o", out, _script(tmp_path, fixed)]) == 0
    assert "no NaN or Inf" in capsys.readouterr().err
    assert not load(out).calls[0].nonfinite
