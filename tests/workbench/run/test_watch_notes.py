"""What `run --watch` says (issue 36, item 11): the script's error, not JAX's traceback
preamble; when the TUI closes, the latest recording's counts, not the first's."""
from __future__ import annotations

import argparse

from transforms.model import Session
from workbench.cli import _main
from workbench.run._watch import Recording, Watch, error_line

JAX_STDERR = """Traceback (most recent call last):
  File "/tmp/absolute.py", line 7, in <module>
    jax.vmap(absolute)(jnp.arange(3.0))
  File "/tmp/absolute.py", line 3, in absolute
    if x > 0:
       ^^^^^
jax.errors.TracerBoolConversionError: Attempted boolean conversion of traced array with shape bool[].
This BatchTracer with object id 140290345759264 was created on line:
  /tmp/absolute.py:3:7 (absolute)
See https://docs.jax.dev/en/latest/errors.html#jax.errors.TracerBoolConversionError
--------------------
For simplicity, JAX has removed its internal frames from the traceback of the following \
exception. Set JAX_TRACEBACK_FILTERING=off to include these.
"""


def test_the_error_line_is_the_exception_not_jaxs_preamble():
    assert error_line(JAX_STDERR) == ("jax.errors.TracerBoolConversionError: Attempted boolean "
                                      "conversion of traced array with shape bool[].")


def test_without_a_traceback_the_last_line_is_the_error():
    assert error_line("workbench: x.py: no such file\n\n") == "workbench: x.py: no such file"
    assert error_line("") == ""


def test_after_the_tui_closes_the_latest_recordings_counts_are_said(monkeypatch, capsys,
                                                                    tmp_path):
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    recordings = iter([Recording(Session(), "1 call, 3 steps"),
                       Recording(Session(), "2 calls, 9 steps")])
    monkeypatch.setattr(Watch, "_record", lambda self: next(recordings))

    def tui(session, title, alternative, watch, **options):
        watch.record()  # the TUI re-records when the script changes
        return 0

    monkeypatch.setattr(_main, "open_tui", tui)
    args = argparse.Namespace(output=None, script=str(script), args=[], stages=True,
                              inline_jnp=False, export_dir=None, quiet=False)
    assert _main._watch(args) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "workbench: last recorded: 2 calls, 9 steps"
    assert "1 call, 3 steps" not in err
