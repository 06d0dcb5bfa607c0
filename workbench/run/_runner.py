"""Run an unmodified JAX script with the jax.* transformations recording.

    result = run_script("train.py", ["--steps", "3"])
    result.session.save("trace.json"); sys.exit(result.exit_code)

For the duration of the run, `jax.grad`, `jax.vmap`, `jax.jit` and the other
transformations in PATCHED are the `transforms` versions, so the script, and any
library that looks them up on the `jax` module at call time, records. Names bound
before the run (`from jax import grad` in a module imported earlier) keep JAX's.
"""
from __future__ import annotations

import builtins
import contextlib
import os
import sys
import threading
import traceback
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import transforms
from transforms.model import PUBLIC_KINDS, Journal, Session

from . import _saving as saving
from ._distributed_launch import describe_run, process_recording

PATCHED = PUBLIC_KINDS  # every transformation a user applies


class ScriptError(Exception):
    """The script cannot be run at all (missing, unreadable, or a syntax error): nothing ran."""


@dataclass
class RunResult:
    session: Session
    exit_code: int                  # as `python SCRIPT.py` would exit
    error: BaseException | None = None  # what the script raised (not SystemExit)
    interrupted: bool = False       # Ctrl-C, SIGTERM or SIGHUP
    signal: str = ""                # the signal that stopped it: "SIGTERM" ("" for Ctrl-C)


@contextlib.contextmanager
def jax_patched() -> Iterator[None]:
    """jax.<transform> -> transforms.<transform> inside the block; JAX's own restored after.

    Only `jax.*` is patched: transforms calls JAX's own functions, captured when it was
    imported (transforms._jax.jax_own), so it never calls itself.
    """
    import jax  # NB: here, not at import: `workbench.run` imports no JAX until a script runs
    originals = {name: getattr(jax, name) for name in PATCHED}
    ours = {name: getattr(transforms, name) for name in PATCHED}  # imports them: first
    for name in PATCHED:
        setattr(jax, name, ours[name])
    try:
        yield
    finally:
        for name, fun in originals.items():
            setattr(jax, name, fun)


def check_script(path: str) -> types.CodeType:
    """The script compiled; ScriptError if it cannot run: missing, a folder, unreadable, bad syntax."""
    if not os.path.exists(path):
        raise ScriptError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ScriptError(f"{path}: is a directory, not a Python script")
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise ScriptError(f"{path}: cannot read ({e.strerror})") from None
    try:
        # As `python SCRIPT.py` (3.9+): code objects name the script by its absolute path.
        return compile(source, os.path.abspath(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        # As Python prints it (file, line, caret), under our one-line summary.
        detail = "".join(traceback.format_exception_only(e)).rstrip()
        raise ScriptError(f"{path}: the script has a syntax error, so nothing ran:\n"
                          f"{detail}") from None


def run_script(path: str, args: Sequence[str] = (), *, stages: bool = True,
               inline_jnp: bool = False, detail: str = "default",
               max_steps: int | None = None,
               note: Callable[[str], None] | None = None,
               find_nans: bool = False, keep_going: bool = False,
               values: bool = False, journal: Journal | None = None) -> RunResult:
    """Run path as `python path args...` would, recording; never raises for the script's faults.

    A traceback is printed to stderr as Python prints it (via sys.excepthook),
    and Ctrl-C (or SIGTERM, SIGHUP) stops the script but keeps what was recorded.
    `note` is told once when the recording grows past SIZE_NOTICE_STEPS steps.
    `journal`: each call is appended to it as it finishes (transforms.record(journal=...)).
    """
    code_object = check_script(path)
    script = os.path.abspath(path)
    error: BaseException | None = None
    code, interrupted = 0, False
    with _as_main_script(path, args) as namespace, saving.stops_as_ctrl_c() as stopped_by:
        # NB: jax.* patched around the block: as it ends, record() sees that jax.grad was
        # ours (no "nothing recorded" warning meant for direct jax.grad calls).
        with jax_patched(), transforms.record(
                stages=stages, inline_jnp=inline_jnp, detail=detail, max_steps=max_steps,
                find_nans=find_nans, stop_at_nan=find_nans and not keep_going,
                values=values, journal=journal) as session:
            with process_recording(session, path, args), _size_notice(session, note):
                try:
                    exec(code_object, namespace)
                except SystemExit as e:
                    code = _exit_code(e)
                except KeyboardInterrupt as e:
                    error, code, interrupted = e, 130, True  # as a shell reports SIGINT
                except BaseException as e:  # the script's own failure: reported as Python would
                    error, code = e, 1
    stop = saving.signal_name(stopped_by[0]) if stopped_by and interrupted else ""
    if stop:
        code = 128 + stopped_by[0]  # as a shell reports a process ended by that signal
    elif error is not None:
        _print_traceback(error, script)
    _flush()
    describe_run(session, path, args, code, interrupted, stop)
    return RunResult(session, code, error, interrupted, stop)


# A dump takes about 0.6 KB a step: past this many steps (about 60 MB) the user is told once.
SIZE_NOTICE_STEPS = 100_000
SIZE_NOTICE_EVERY = 1.0  # seconds between counts
BYTES_PER_STEP = 600


@contextlib.contextmanager
def _size_notice(session: Session, note: Callable[[str], None] | None) -> Iterator[None]:
    """Tell `note` once when the recording passes SIZE_NOTICE_STEPS (checked every second).

    NB: a watcher thread, not a hook in the recorder: recording must not print, or
    change what the script does, and the count is cheap (len of each call's steps).
    """
    if note is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(SIZE_NOTICE_EVERY):
            steps = sum(len(c.steps) for c in list(session.calls))
            if steps >= SIZE_NOTICE_STEPS:
                note(f"the recording has passed {steps:,} steps (a dump of about "
                     f"{steps * BYTES_PER_STEP / 1e6:,.0f} MB, {BYTES_PER_STEP / 1000:.1f} KB "
                     f"a step); Ctrl-C stops the script and keeps what was recorded")
                return

    thread = threading.Thread(target=watch, name="workbench-size-notice", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()



@contextlib.contextmanager
def _as_main_script(path: str, args: Sequence[str]) -> Iterator[dict[str, Any]]:
    """What `python SCRIPT.py ARGS` sets up: a fresh __main__, sys.argv, the folder on sys.path.

    NB: runpy.run_path would do most of this, but it rewrites sys.argv[0] to the
    path it is given; Python keeps sys.argv[0] as typed and __file__ absolute.
    """
    script = os.path.abspath(path)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=script, __cached__=None, __loader__=None, __spec__=None,
                           __package__=None, __builtins__=builtins)
    saved_main = sys.modules.get("__main__")
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.modules["__main__"] = module
    sys.argv = [path, *args]
    if sys.path:
        sys.path[0] = os.path.dirname(script)
    else:
        sys.path.insert(0, os.path.dirname(script))
    try:
        yield module.__dict__
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        if saved_main is not None:
            sys.modules["__main__"] = saved_main


def _exit_code(e: SystemExit) -> int:
    """What Python exits with for SystemExit(code): None -> 0, int -> it, else print it, 1."""
    if e.code is None:
        return 0
    if isinstance(e.code, int) and not isinstance(e.code, bool):
        return e.code
    _flush()
    print(e.code, file=sys.stderr)
    return 1


def _print_traceback(error: BaseException, script: str) -> None:
    """Print as Python does for an uncaught exception: the frames from the script down."""
    tb = error.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    if tb is not None:
        error = error.with_traceback(tb)  # the printers read __traceback__, not only tb
    _flush()
    sys.excepthook(type(error), error, error.__traceback__)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
