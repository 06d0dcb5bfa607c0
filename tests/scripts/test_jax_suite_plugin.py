"""scripts/_jax_suite_plugin.py swaps only `jax.*` (and `jax._src.api`'s names): our own modules
keep the `jax` module itself and call JAX's functions as transforms captured them at import
(`_jax.jax_own`), as workbench's runner does (issue 13)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from repo_paths import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)

_CHILD = textwrap.dedent("""
    import sys, types
    import jax
    import _jax_suite_plugin as plugin
    import transforms
    from transforms import _jax

    # Only jax.* is patched: every module of ours sees the jax module itself.
    swapped = [name for name, m in sys.modules.items()
               if name.split(".")[0] == "transforms" and isinstance(m, types.ModuleType)
               and "jax" in vars(m) and m.jax is not jax]
    assert not swapped, swapped
    for name in plugin.NAMES:
        assert type(getattr(jax, name)).__name__ == "_Dispatcher", name
        assert getattr(_jax.jax_own, name) is getattr(jax, name).__wrapped__, name
    # A call from a test file gets ours (recording), and ours still works while jax.* is patched.
    sys.path.insert(0, TESTS)
    import suite_case
    with transforms.record() as session:
        g = suite_case.run()
    assert float(g) == float(jax.numpy.cos(2.0)) * 2.0, g
    assert [c.transform for c in session.calls] == ["grad"], session.calls
    # A call from elsewhere (here) gets JAX's own.
    assert jax.grad.__call__ is jax.grad.__wrapped__
    print("ok")
""")

_CASE = textwrap.dedent("""
    import jax
    import jax.numpy as jnp

    def run():
        return jax.grad(lambda x: jnp.sin(x) * 2.0)(2.0)
""")


def test_the_plugin_patches_only_jax_and_keeps_our_modules_jax(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "suite_case.py").write_text(_CASE)
    env = dict(os.environ, JAX_SUITE_MODE="plain", JAX_SUITE_TESTS=str(tests),
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "scripts"), ROOT]))
    child = subprocess.run([sys.executable, "-c", f"TESTS = {str(tests)!r}\n" + _CHILD],
                           env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.strip().endswith("ok")
