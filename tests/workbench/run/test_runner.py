"""`workbench run` / `workbench dump`: the real command on small scripts, and the jax patch."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from _children import signals_at_default

import transforms
from workbench.run import _runner as runner

GOOD = """
    import sys
    import jax
    import jax.numpy as jnp
    from jax import grad

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
    print("argv", sys.argv[1:], __name__, __file__ == {path!r})
    print(jax.vmap(jax.grad(loss), in_axes=(None, 0))(w, x[:, None, :]).shape)
    print(jax.jit(loss)(w, x), grad(loss)(w, x).shape)
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""

RAISES = """
    import jax
    import jax.numpy as jnp

    def absolute(x):
        if x > 0:
            return x
        return -x

    print(jax.grad(jnp.sin)(1.0))
    jax.vmap(absolute)(jnp.arange(3.0))
"""


def script(tmp_path, text: str, name: str = "script.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).format(path=str(path)))
    return str(path)


def run(*args: str, cwd=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120, cwd=cwd, **kw)


def plain(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, cwd=cwd)


def ours(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("workbench:")]


def theirs(stderr: str) -> str:
    """stderr without our notes, object ids masked (they differ from run to run)."""
    text = "\n".join(l for l in stderr.splitlines() if not l.startswith("workbench:"))
    return re.sub(r"object id \d+", "object id N", text)


def test_a_script_runs_unchanged_and_its_transformations_are_recorded(tmp_path):
    path = script(tmp_path, GOOD)
    out = tmp_path / "trace.json"
    done = run("dump", path, "-o", str(out), "7", "--flag")
    direct = plain(path, "7", "--flag")
    assert done.returncode == direct.returncode == 7
    assert done.stdout == direct.stdout
    assert "argv ['7', '--flag'] __main__ True" in done.stdout
    assert theirs(done.stderr) == theirs(direct.stderr) == "to stderr"
    assert ours(done.stderr) == [f"workbench: recorded 3 calls, "
                                 f"{transforms.load(out).step_count} steps; wrote {out}"]
    session = transforms.load(out)
    assert [(c.transform, c.function) for c in session.calls] == [
        ("vmap", "loss"), ("jit", "loss"), ("grad", "loss")]
    assert all(c.source.file == path for c in session.calls)
    assert session.title == f"{os.path.basename(path)} 7 --flag"
    assert session.metadata == {"script": path, "argv": "7 --flag", "exit_code": "7"}


def test_a_script_that_raises_exits_1_prints_pythons_traceback_and_leaves_a_dump(tmp_path):
    path = script(tmp_path, RAISES)
    out = tmp_path / "trace.json"
    done = run("run", "-o", str(out), path)
    direct = plain(path)
    assert done.returncode == direct.returncode == 1
    assert done.stdout == direct.stdout
    assert theirs(done.stderr) == theirs(direct.stderr)
    assert "TracerBoolConversionError" in done.stderr and "workbench/" not in theirs(done.stderr)
    assert "up to the script's failure" in ours(done.stderr)[0]
    session = transforms.load(out)
    assert [c.ok for c in session.calls] == [True, False]
    assert session.calls[1].errors[0].type_name == "jax.errors.TracerBoolConversionError"


@pytest.mark.parametrize("content, fragment", [
    (None, "no such file"),
    ("def f(:\n    pass\n", "syntax error"),
])
def test_a_script_that_cannot_run_exits_2_and_writes_nothing(tmp_path, content, fragment):
    path = tmp_path / "script.py"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "trace.json"
    done = run("dump", str(path), "-o", str(out))
    assert done.returncode == 2
    assert fragment in done.stderr and "Traceback" not in done.stderr
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == (
        ["script.py"] if content is not None else [])


def test_script_options_after_a_double_dash_go_to_the_script(tmp_path):
    path = script(tmp_path, "import sys\nprint(sys.argv[1:])\n")
    out = tmp_path / "trace.json"
    done = run("dump", path, "-o", str(out), "-q", "--", "-o", "theirs")
    assert done.returncode == 0 and done.stdout == "['-o', 'theirs']\n" and done.stderr == ""
    assert transforms.load(out).calls == []


def test_dump_without_output_and_run_without_a_terminal_are_bad_usage(tmp_path):
    path = script(tmp_path, "print('never')\n")
    for args in (("dump", path), ("run", path)):
        done = run(*args)
        assert done.returncode == 2 and "never" not in done.stdout
        assert "-o" in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_keeps_what_was_recorded(tmp_path):
    # The script sleeps until the test interrupts it: the sleep is what is exercised, the test
    # waits for its "ready" line, not for a time.
    path = script(tmp_path, """
        import sys, time
        import jax, jax.numpy as jnp
        jax.grad(jnp.sin)(1.0)
        print("ready", flush=True)
        for _ in range(600):
            time.sleep(0.1)
    """)
    out = tmp_path / "trace.json"
    with signals_at_default(signal.SIGINT):
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "dump", path, "-o", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "KeyboardInterrupt" in err and "interrupted" in err
    session = transforms.load(out)
    assert [c.transform for c in session.calls] == ["grad"]
    assert session.metadata["interrupted"] == "Ctrl-C"


def test_jax_is_patched_only_during_the_run_and_libraries_record(tmp_path):
    lib = tmp_path / "helperlib.py"
    lib.write_text("import jax\n\ndef derivative(f):\n    return jax.grad(f)\n")
    path = script(tmp_path, """
        import jax, jax.numpy as jnp
        import helperlib
        assert jax.grad is not None
        print(helperlib.derivative(jnp.tanh)(0.5))
    """)
    originals = {name: getattr(jax, name) for name in runner.PATCHED}
    try:
        result = runner.run_script(path)
    finally:
        sys.modules.pop("helperlib", None)
    assert result.exit_code == 0 and result.error is None
    assert [(c.transform, c.function) for c in result.session.calls] == [("grad", "tanh")]
    assert {name: getattr(jax, name) for name in runner.PATCHED} == originals
    assert all(getattr(m, "jax", jax) is jax for n, m in sys.modules.items()
               if n.startswith("transforms"))
    # and the transforms still work outside any run
    assert transforms.grad(jnp.tanh)(0.5) == jax.grad(jnp.tanh)(0.5)


def test_the_patched_transforms_give_jaxs_results(tmp_path):
    path = script(tmp_path, """
        import jax, jax.numpy as jnp
        f = lambda x: jnp.sum(jnp.sin(x) * x ** 2)
        x = jnp.array([0.5, -1.0, 2.0])
        RESULTS = [jax.grad(f)(x), jax.hessian(f)(x), jax.jacfwd(jnp.sin)(x),
                   jax.jacrev(jnp.sin)(x), jax.jvp(f, (x,), (x,))[1],
                   jax.vjp(jnp.sin, x)[1](x)[0], jax.linearize(jnp.sin, x)[1](x),
                   jax.value_and_grad(f)(x)[1], jax.jit(jax.vmap(f))(x[:, None])]
    """)
    result = runner.run_script(path)
    assert result.exit_code == 0
    assert sorted({c.transform for c in result.session.calls}) == sorted(
        ["grad", "hessian", "jacfwd", "jacrev", "jvp", "vjp", "vjp_backward", "linearize",
         "linearize_jvp", "value_and_grad", "jit"])


def test_keyboard_interrupt_and_sys_exit_codes_in_process(tmp_path, capsys):
    assert runner.run_script(script(tmp_path, "raise SystemExit('bye')\n")).exit_code == 1
    assert capsys.readouterr().err == "bye\n"
    assert runner.run_script(script(tmp_path, "raise SystemExit\n")).exit_code == 0
    interrupted = runner.run_script(script(tmp_path, "raise KeyboardInterrupt\n"))
    assert interrupted.exit_code == 130 and interrupted.interrupted
    assert "KeyboardInterrupt" in capsys.readouterr().err


def test_sys_argv_and_path_are_restored(tmp_path):
    argv, path, main_module = list(sys.argv), list(sys.path), sys.modules["__main__"]
    runner.run_script(script(tmp_path, "import sys\nsys.argv.append('x')\n"), ["a"])
    assert sys.argv == argv and sys.path == path
    assert sys.modules["__main__"] is main_module
