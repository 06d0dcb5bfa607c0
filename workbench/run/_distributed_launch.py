"""`workbench run --processes N SCRIPT.py`: every process of a `jax.distributed` job recorded.

The launcher (this process, which never imports JAX itself) starts N copies of
`python -m workbench dump -o <tmp>/process-<i>.json SCRIPT.py ARGS` on this
machine, each with:

    WORKBENCH_PROCESS_INDEX=i  WORKBENCH_PROCESS_COUNT=N
    WORKBENCH_COORDINATOR=127.0.0.1:<a free port>   (also JAX_COORDINATOR_ADDRESS)
    JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo          (unless already set)
    XLA_FLAGS=... --xla_force_host_platform_device_count=K   (with --devices-per-process K)

and inside each, while the script runs, `jax.distributed.initialize()` gets the
arguments it was not given (coordinator_address, num_processes, process_id)
from those, as it would from SLURM's or Open MPI's environment. Each process's
output is forwarded line by line, prefixed `[i] `. When every process has
ended, the dumps are merged into one session (workbench/analysis/_process_merge.py).

A process that hangs never returns to Python (it waits inside a collective),
so signals cannot make it save: each child runs a control thread reading a
pipe from the launcher. Asked to stop, it writes what was recorded so far
(calls finished; the one in progress is not) and ends the process. The
launcher asks when --timeout passes, when another process has failed
(FAILURE_GRACE seconds later: the others would wait for it forever), and on
Ctrl-C; a process that does not end after STOP_GRACE seconds is killed.

The child side (`process_recording`) is also what tags a run started by the
user's own launcher, one `workbench run` per host, with its process index.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterator, Sequence

from transforms.model import ProcessInfo, Session, SessionLoadError, load

from .._safe_text import first_line
from ..analysis import PROCESS_FILE, Divergence, merge, run_divergence

ENV_INDEX = "WORKBENCH_PROCESS_INDEX"
ENV_COUNT = "WORKBENCH_PROCESS_COUNT"
ENV_COORDINATOR = "WORKBENCH_COORDINATOR"
ENV_CONTROL_FD = "WORKBENCH_CONTROL_FD"   # the child's end of the launcher's control pipe
ENV_DUMP = "WORKBENCH_PROCESS_DUMP"       # where the child writes its dump
DEVICES_FLAG = "--xla_force_host_platform_device_count"

# Seconds the other processes get to end by themselves after one has failed.
FAILURE_GRACE = 3.0
# Seconds a process asked to stop gets to write its dump before it is killed.
STOP_GRACE = 15.0
# The exit code of a child ended by its control thread (as `timeout` exits).
STOPPED_EXIT = 124
MAX_PROCESSES = 64


# --- the child: one process of the job ---------------------------------------------

@dataclass
class _ChildState:
    session: Session
    script: str
    args: Sequence[str]
    initialized: bool = False     # the script called jax.distributed.initialize
    finished: bool = False        # the script has returned (its dump is the runner's)


def launched_index() -> int | None:
    """This process's index when `workbench run --processes` started it, else None."""
    value = os.environ.get(ENV_INDEX)
    return int(value) if value is not None and value.isdigit() else None


@contextlib.contextmanager
def process_recording(session: Session, script: str, args: Sequence[str]) -> Iterator[None]:
    """Around a script's run: fill jax.distributed.initialize's unset arguments when the
    launcher started us, answer the launcher's stop request, and tag the session with
    its ProcessInfo when the script used jax.distributed."""
    state = _ChildState(session, script, args)
    import jax.distributed
    original = jax.distributed.initialize
    jax.distributed.initialize = _initialize_wrapper(original, state)
    _start_control_thread(state)
    try:
        yield
    finally:
        jax.distributed.initialize = original
        state.finished = True
        session.process = _process_info(state)


def _initialize_wrapper(original: Callable[..., Any], state: _ChildState) -> Callable[..., Any]:
    signature = inspect.signature(original)
    launched = launched_index() is not None
    defaults = {"coordinator_address": os.environ.get(ENV_COORDINATOR),
                "num_processes": _int_env(ENV_COUNT), "process_id": _int_env(ENV_INDEX)}

    @functools.wraps(original)
    def initialize(*args: Any, **kwargs: Any) -> Any:
        if launched:
            try:
                bound = signature.bind_partial(*args, **kwargs)
            except TypeError:  # JAX's own error for bad arguments
                return original(*args, **kwargs)
            for name, value in defaults.items():
                if bound.arguments.get(name) is None and value is not None:
                    bound.arguments[name] = value
            args, kwargs = bound.args, bound.kwargs
        result = original(*args, **kwargs)
        state.initialized = True
        return result

    return initialize


def _int_env(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def _process_info(state: _ChildState, complete: bool = True) -> ProcessInfo | None:
    """This process's ProcessInfo, when it ran as part of a job; guarded: never raises."""
    import jax
    if not (state.initialized or jax.distributed.is_initialized() or launched_index() is not None):
        return None
    try:
        from transforms import process_info
        return process_info(host=socket.gethostname(), pid=os.getpid(),
                            coordinator=os.environ.get(ENV_COORDINATOR, ""), complete=complete)
    except Exception as e:  # a backend that is gone: the launcher's facts will do; said
        print(f"workbench: this process's own facts could not be read ({type(e).__name__}: "
              f"{first_line(e)}); the launcher's are kept", file=sys.stderr)
        return None


def _start_control_thread(state: _ChildState) -> None:
    fd = _int_env(ENV_CONTROL_FD)
    dump = os.environ.get(ENV_DUMP)
    if fd is None or not dump:
        return
    thread = threading.Thread(target=_control, args=(state, fd, dump), daemon=True,
                              name="workbench-control")
    thread.start()


def _control(state: _ChildState, fd: int, dump: str) -> None:
    """Wait for the launcher's `stop <reason>`: write what was recorded, end the process."""
    try:
        with os.fdopen(fd, "r", encoding="utf-8") as pipe:
            line = pipe.readline()
    except OSError:
        return
    if not line.startswith("stop"):
        # EOF: the launcher died (it closes the pipe only after we ended). Nobody would
        # stop or merge us now: end rather than wait as an orphan inside a collective.
        os._exit(STOPPED_EXIT)
    if not state.finished:  # after the script ended, the runner's own dump is complete
        with contextlib.suppress(Exception):
            _snapshot(state, line[4:].strip()).save(dump)
    os._exit(STOPPED_EXIT)


def describe_run(session: Session, path: str, args: Sequence[str], exit_code: int,
                 interrupted: bool, stop: str = "") -> None:
    """Name the recording after the command that made it (shown by the TUI and `show`)."""
    session.title = shlex.join([os.path.basename(path), *args])
    session.metadata = {"script": os.path.abspath(path), "argv": shlex.join(args),
                        "exit_code": str(exit_code)}
    if interrupted:
        session.metadata["interrupted"] = stop or "Ctrl-C"


def _snapshot(state: _ChildState, reason: str) -> Session:
    """What was recorded until now, as the runner would describe it."""
    s = state.session
    copy = Session(calls=list(s.calls), jax_version=s.jax_version,
                   python_version=s.python_version)
    describe_run(copy, state.script, state.args, STOPPED_EXIT, False)
    copy.metadata["stopped"] = reason or "asked by the launcher"
    copy.process = _process_info(state, complete=False)
    return copy


# --- the launcher -------------------------------------------------------------------------

@dataclass
class Child:
    index: int
    popen: subprocess.Popen
    dump: str
    control: IO[str]
    started: float
    ended: float | None = None
    stop_reason: str = ""          # why the launcher stopped it ("" if it ended by itself)
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"process {self.index} (pid {self.popen.pid})"


@dataclass
class LaunchResult:
    session: Session               # the merged run
    exit_code: int                 # the first non-zero exit code, 0 if every process ended ok
    infos: list[ProcessInfo]       # how each process ended, by index
    divergence: Divergence | None = None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the coordinator binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def child_env(index: int, count: int, coordinator: str, devices: int | None,
              base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of process `index`: the launcher's facts, CPU collectives, devices."""
    env = dict(os.environ if base is None else base)
    env.update({ENV_INDEX: str(index), ENV_COUNT: str(count), ENV_COORDINATOR: coordinator,
                "JAX_COORDINATOR_ADDRESS": coordinator, "PYTHONUNBUFFERED": "1"})
    env.setdefault("JAX_CPU_COLLECTIVES_IMPLEMENTATION", "gloo")
    if devices is not None:
        flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(DEVICES_FLAG)]
        env["XLA_FLAGS"] = " ".join([*flags, f"{DEVICES_FLAG}={devices}"])
    return env


def child_command(dump: str, script: str, args: Sequence[str], *, stages: bool,
                  inline_jnp: bool) -> list[str]:
    options = ["--stages"] * stages + ["--inline-jnp"] * inline_jnp
    return [sys.executable, "-m", "workbench", "dump", "-q", "-o", dump, *options, "--",
            script, *args]


def launch(script: str, args: Sequence[str], count: int, *, timeout: float | None = None,
           devices: int | None = None, stages: bool = False, inline_jnp: bool = False,
           note: Callable[[str], None] = lambda text: None,
           stdout: IO[bytes] | None = None, stderr: IO[bytes] | None = None,
           workdir: str | None = None) -> LaunchResult:
    """Run `count` processes of the script, forward their output, merge their dumps."""
    coordinator = f"127.0.0.1:{free_port()}"
    folder = tempfile.mkdtemp(prefix="workbench-processes-", dir=workdir)
    out = stdout if stdout is not None else sys.stdout.buffer
    err = stderr if stderr is not None else sys.stderr.buffer
    lock = threading.Lock()
    children: list[Child] = []
    note(f"starting {count} processes of {os.path.basename(script)} "
         f"(coordinator {coordinator}, CPU collectives: gloo"
         + (f", {devices} devices each" if devices is not None else "") + ")")
    try:
        for i in range(count):
            children.append(_start(i, count, coordinator, devices, folder, script, args,
                                   stages, inline_jnp, out, err, lock))
        code = _supervise(children, timeout, note)
        for child in children:
            for t in child.threads:
                t.join(timeout=5)
        infos, sessions = _collect(children, count, note)
        _check_one_job(script, sessions, code)
    finally:
        for child in children:
            _kill(child)
        shutil.rmtree(folder, ignore_errors=True)
    merged = merge(sessions, metadata={
        "processes": str(count), "coordinator": coordinator, "exit_code": str(code)})
    divergence = run_divergence(merged)
    if divergence is not None:
        note("WARNING: " + divergence.describe())
    return LaunchResult(merged, code, infos, divergence)


class NotOneJob(Exception):
    """The processes never joined one jax.distributed job: each ran alone, as process 0."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code  # the first non-zero exit code of a process, else 0


def _check_one_job(script: str, sessions: list[Session], code: int) -> None:
    """NotOneJob when two processes recorded the same index: the script never called
    jax.distributed.initialize(), so their recordings are not one run's."""
    indices = [s.process.index for s in sessions if s.process is not None and s.process.recorded]
    if len(set(indices)) == len(indices):
        return
    raise NotOneJob(
        f"{os.path.basename(script)} never called jax.distributed.initialize(), so each of its "
        f"{len(sessions)} processes ran alone (as process 0 of 1) and their recordings are not "
        f"one run's. Call jax.distributed.initialize() before the script's first JAX "
        f"computation (with no arguments: workbench gives each process the coordinator, the "
        f"count and its index), or run the script without --processes", code)


def _start(index: int, count: int, coordinator: str, devices: int | None, folder: str,
           script: str, args: Sequence[str], stages: bool, inline_jnp: bool,
           out: IO[bytes], err: IO[bytes], lock: threading.Lock) -> Child:
    dump = os.path.join(folder, PROCESS_FILE.format(index=index))
    read_end, write_end = os.pipe()
    env = child_env(index, count, coordinator, devices)
    env.update({ENV_CONTROL_FD: str(read_end), ENV_DUMP: dump})
    try:
        # NB: a session of its own, so Ctrl-C reaches the launcher only: it stops the
        # processes in order (each writes its dump) instead of all dying at once.
        popen = subprocess.Popen(
            child_command(dump, script, args, stages=stages, inline_jnp=inline_jnp),
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(read_end,), start_new_session=True)
    finally:
        os.close(read_end)
    child = Child(index, popen, dump, os.fdopen(write_end, "w", encoding="utf-8"),
                  time.monotonic())
    for source, target in ((popen.stdout, out), (popen.stderr, err)):
        t = threading.Thread(target=_forward, args=(source, target, f"[{index}] ", lock),
                             daemon=True, name=f"workbench-output-{index}")
        t.start()
        child.threads.append(t)
    return child


def _forward(source: IO[bytes] | None, target: IO[bytes], prefix: str,
             lock: threading.Lock) -> None:
    """Copy a child's output line by line, each line prefixed with its process index."""
    if source is None:
        return
    head = prefix.encode()
    with source:
        for line in iter(source.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            with lock, contextlib.suppress(OSError, ValueError):
                target.write(head + line)
                target.flush()


def _supervise(children: list[Child], timeout: float | None,
               note: Callable[[str], None]) -> int:
    """Wait for every process; stop the rest on a failure, a timeout or Ctrl-C.

    Returns the first non-zero exit code in the order processes ended (124 if only the
    timeout ended the run, 130 for Ctrl-C), else 0."""
    start = time.monotonic()
    first_code = 0
    stop_at: float | None = None
    stop_why = ""
    try:
        while any(c.ended is None for c in children):
            now = time.monotonic()
            for c in children:
                if c.ended is None and c.popen.poll() is not None:
                    c.ended = now
                    code = shell_code(c.popen.returncode)
                    if code != 0 and not c.stop_reason:
                        note(f"{c.name} {ending(c.popen.returncode)}")
                        if first_code == 0:
                            first_code = code
                            if any(o.ended is None for o in children):
                                stop_at = now + FAILURE_GRACE
                                stop_why = f"process {c.index} {ending(c.popen.returncode)}"
                                note(f"stopping the other processes in {FAILURE_GRACE:g} s "
                                     f"unless they end (they would wait for process "
                                     f"{c.index} forever)")
            if timeout is not None and now - start > timeout:
                running = [c for c in children if c.ended is None]
                if running:
                    note(f"still running after --timeout {timeout:g} s: "
                         + ", ".join(c.name for c in running) + "; stopping them, their "
                         "dumps keep what was recorded until now")
                    _stop_all(running, f"still running after --timeout {timeout:g} s")
                    first_code = first_code or STOPPED_EXIT
                continue
            if stop_at is not None and now >= stop_at:
                _stop_all([c for c in children if c.ended is None], stop_why)
                stop_at = None
                continue
            time.sleep(0.05)
    except KeyboardInterrupt:
        note("Ctrl-C: stopping every process; their dumps keep what was recorded")
        _stop_all([c for c in children if c.ended is None], "Ctrl-C in the launcher")
        first_code = first_code or 130
    return first_code


def _stop_all(running: list[Child], reason: str) -> None:
    """Ask each to write its dump and end; kill what is left after STOP_GRACE."""
    for c in running:
        c.stop_reason = reason
        with contextlib.suppress(OSError, ValueError):
            c.control.write(f"stop {reason}\n")
            c.control.flush()
    deadline = time.monotonic() + STOP_GRACE
    for c in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.popen.wait(max(0.0, deadline - time.monotonic()))
        if c.popen.poll() is None:
            _kill(c)
            c.popen.wait()
        c.ended = time.monotonic()


def _kill(child: Child) -> None:
    """SIGKILL the child's process group (only what we started), if it still runs."""
    with contextlib.suppress(OSError, ValueError):
        child.control.close()
    if child.popen.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.popen.wait(5)


def shell_code(returncode: int) -> int:
    """As a shell reports it: a death by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def ending(returncode: int) -> str:
    """`exited with code 1`, `was killed by SIGKILL (exit 137)`."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name} (exit {shell_code(returncode)})"
    return f"exited with code {returncode}"


def _status(child: Child) -> tuple[str, str]:
    code = child.popen.returncode
    if child.stop_reason:
        return "stopped", f"stopped by the launcher: {child.stop_reason}"
    if code is not None and code < 0:
        return "killed", ending(code)
    if code:
        return "failed", ending(code)
    return "ok", "ended normally"


def _collect(children: list[Child], count: int,
             note: Callable[[str], None]) -> tuple[list[ProcessInfo], list[Session]]:
    """Each process's dump with how it ended; a ProcessInfo alone where none was written."""
    sessions, infos = [], []
    for c in children:
        status, message = _status(c)
        code = shell_code(c.popen.returncode) if c.popen.returncode is not None else None
        session = None
        if os.path.exists(c.dump):
            try:
                session = load(c.dump)
            except SessionLoadError as e:
                message += f"; its dump could not be read ({e})"
        if session is None:
            message += "; it wrote no dump, so nothing it recorded is kept"
            note(f"{c.name}: {message}")
        base = session.process if session is not None and session.process is not None else \
            ProcessInfo(c.index, count)
        info = dataclasses.replace(base, pid=c.popen.pid, status=status, exit_code=code,
                                   message=message, recorded=session is not None)
        infos.append(info)
        if session is None:
            session = Session(title="", metadata={})
        elif session.process is None:
            message += ("; it never called jax.distributed.initialize(), so it ran alone "
                        "(one process's devices)")
            info = dataclasses.replace(info, message=message)
            infos[-1] = info
        session.process = info
        sessions.append(session)
    _fill_devices(sessions)
    return infos, sessions


def _fill_devices(sessions: list[Session]) -> None:
    """A process without a dump gets the global device list the others recorded."""
    known = next((s.process.devices for s in sessions
                  if s.process is not None and s.process.devices), ())
    for s in sessions:
        info = s.process
        if info is not None and not info.devices and known:
            local = tuple(d.id for d in known if d.process == info.index)
            s.process = dataclasses.replace(info, devices=known, local_devices=local)
        if info is not None and not s.title:
            s.title = next((o.title for o in sessions if o.title), "")


# --- where a process of the user's own launcher writes its dump ------------------------------

def is_folder(output: str) -> bool:
    """`-o DIR/` or an existing folder: one dump per process goes inside."""
    return os.path.isdir(output) or output.endswith(os.sep)


def dump_path(output: str, session: Session) -> tuple[str, str]:
    """Where process i of a job writes `-o output`, and a note saying so ("" if unchanged).

    Every process of a job started by the user's own launcher runs `workbench run -o
    OUTPUT`; on one machine they would overwrite each other. A folder gets
    process-<i>.json inside (`workbench show FOLDER` reads them as one run); a file
    name gets `.process-<i>` before its suffix, unless it holds `{process}`.
    """
    info = session.process
    if is_folder(output):
        index = info.index if info is not None else 0
        os.makedirs(output, exist_ok=True)
        path = os.path.join(output, PROCESS_FILE.format(index=index))
        if info is None or info.count < 2:
            return path, f"wrote {path} (one process: the folder holds its one dump)"
        return path, (f"process {info.index} of {info.count}: wrote {path}; "
                      f"`workbench show {output}` reads the folder as one run")
    if info is None or info.count < 2 or launched_index() is not None:
        return output, ""
    if "{process}" in output:
        return output.replace("{process}", str(info.index)), ""
    stem, suffix = os.path.splitext(output)
    path = f"{stem}.process-{info.index}{suffix or '.json'}"
    return path, (f"process {info.index} of {info.count}: wrote {path} (not {output}: every "
                  f"process would write there); `workbench merge {output} "
                  f"{stem}.process-*{suffix}` makes one session of them")
