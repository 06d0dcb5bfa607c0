"""A death in the middle of a call (issue 37): the journal's progress frames say after which
step it died (primitive, step number, user line, level), under `workbench dump`."""
from __future__ import annotations

import re

import pytest
from _children import dump_script

from transforms.model import Journal, load, read_journal
from workbench.analysis import no_stages_reason

pytestmark = pytest.mark.timeout(300)

MID_CALL = """\
import ctypes, os, signal, sys, time
import jax, jax.numpy as jnp
def f(x):
    y = jnp.sin(x) * x
    time.sleep(0.3)  # the progress thread looks every 20 ms
    how = sys.argv[1]
    if how == "segv": ctypes.string_at(0)
    if how == "exit": os._exit(4)
    if how == "kill": os.kill(os.getpid(), signal.SIGKILL)
    return y
jax.grad(jnp.tanh)(1.0)
jax.jit(f)(1.0)
"""

ENDINGS = {"kill": (137, "the process died by SIGKILL"),
           "segv": (139, "the process died by SIGSEGV"),
           "exit": (4, "the process exited with code 4 without saving its recording (os._exit?)")}


@pytest.mark.parametrize("how", list(ENDINGS))
def test_a_death_mid_call_says_the_latest_step_recorded(tmp_path, how):
    done, out, script = dump_script(tmp_path, "mid.py", MID_CALL, how)
    code, said = ENDINGS[how]
    assert done.returncode == code, done.stderr
    # `jnp.sin(x) * x` binds two jnp wrappers (jit steps 0 and 1) at the jit's level: the
    # second is named as readers list it, for the operation it stands for.
    ended = (f"{said}, during call 1 (jit(f) at {script}:12 (<module>)), after `multiply` "
             f"(step 1) at {script}:4 (f) under jit#1")
    assert f"workbench: {ended}; recovered 1 call and the call it died in, " in done.stderr
    session = load(out)
    # the call in progress is listed, failed: what it was, and the ending as its error
    assert [(c.index, c.transform, c.function, c.ok) for c in session.calls] == [
        (0, "grad", "tanh", True), (1, "jit", "f", False)]
    died_in = session.calls[1]
    assert (died_in.errors[0].type_name, died_in.errors[0].message) == ("process ended", ended)
    assert (died_in.source.file, died_in.source.line) == (str(script), 12)
    assert no_stages_reason(died_in) == ("the process ended during the call: its stages were "
                                         "never written")
    assert session.metadata["ended"] == ended


def test_the_latest_progress_frame_of_the_call_in_progress_is_the_one_said(tmp_path):
    path = str(tmp_path / "t.json.journal")
    journal = Journal.open(path, {"title": "by hand"})
    journal.begin(0, "grad(f) at t.py:9 (<module>)", "MainThread")
    journal.begin(1, "jit(g) at t.py:10 (<module>)", "worker")
    journal.step(0, {"step": 4, "primitive": "sin", "level": "jvp#1", "source": "t.py:3 (f)"})
    journal.step(1, {"step": 2, "primitive": "dot_general", "level": "jit#1",
                     "source": "t.py:41 (g)"})
    journal.step(1, {"step": 7, "primitive": "add", "level": "jit#1", "source": ""})
    journal.close()
    Journal.append_end(path, "the process died by SIGSEGV")
    recovered = read_journal(path)
    assert recovered.ending() == ("the process died by SIGSEGV, during call 1 (jit(g) at "
                                  "t.py:10 (<module>) in thread worker), after `add` (step 7) "
                                  "under jit#1")
    assert recovered.last_step == {"step": 7, "primitive": "add", "level": "jit#1", "source": ""}


def test_a_progress_frame_of_a_jnp_functions_jit_names_its_operation(tmp_path):
    path = str(tmp_path / "t.json.journal")
    journal = Journal.open(path, {"title": "by hand"})
    journal.begin(0, "grad(f) at t.py:9 (<module>)", "MainThread")
    journal.step(0, {"step": 9, "primitive": "jit", "level": "jvp#1", "source": "t.py:4 (f)",
                     "operation": "take"})
    journal.close()
    Journal.append_end(path, "the process died by SIGKILL")
    assert read_journal(path).ending() == ("the process died by SIGKILL, during call 0 (grad(f) "
                                           "at t.py:9 (<module>)), after `take` (step 9) at "
                                           "t.py:4 (f) under jvp#1")



IN_A_JNP_JIT = """\
import ctypes, time
import jax, jax.numpy as jnp
def crash(v):
    time.sleep(0.3)  # the progress thread looks every 20 ms
    ctypes.string_at(0)
def positive(v):
    jax.debug.callback(crash, v)  # runs when jnp.piecewise's jit runs
    return v
xs = jnp.arange(3.0)
jax.vmap(lambda v: jnp.piecewise(v, [v > 0], [positive, lambda v: -v]))(xs)
"""


def test_a_death_inside_a_running_jit_of_jnp_names_its_operation(tmp_path):
    """The step running when the process died is a jnp function's jit: its params reach the
    core only at its end, so the progress frame reads them from the frame binding it."""
    done, out, script = dump_script(tmp_path, "inside.py", IN_A_JNP_JIT)
    assert done.returncode == 139, done.stderr
    ended = load(out).metadata["ended"]
    assert ended.startswith("the process died by SIGSEGV, during call 0 (vmap(<lambda>) at "), ended
    # NB: the step's number and level are JAX's (how many steps vmap binds before it)
    assert re.search(rf"after `piecewise` \(step \d+\) at {re.escape(str(script))}:10 "
                     r"\(<lambda>\) under eval#0$", ended), ended
