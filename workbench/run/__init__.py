"""Running a user's script unchanged with jax.* recording: once (run_script), again on every
change (Watch, `run --watch`), as the processes of a jax.distributed job (`run --processes`),
and saving what was recorded whatever happens to the process or the disk. Importing it
imports no JAX: a script's run does."""
from __future__ import annotations

from ._distributed_launch import (
    ENV_CONTROL_FD as ENV_CONTROL_FD,
    MAX_PROCESSES as MAX_PROCESSES,
    NotOneJob as NotOneJob,
    dump_path as dump_path,
    is_folder as is_folder,
    launch as launch,
)
from ._runner import (
    RunResult as RunResult,
    ScriptError as ScriptError,
    check_script as check_script,
    jax_patched as jax_patched,
    run_script as run_script,
)
from ._saving import (
    fallback_paths as fallback_paths,
    is_stdout as is_stdout,
    save_recording as save_recording,
    stdout_to_stderr as stdout_to_stderr,
    usable_output as usable_output,
)
from ._supervise import (
    Death as Death,
    journal_path as journal_path,
    open_journal as open_journal,
    watch_in_parent as watch_in_parent,
)
from ._watch import Recording as Recording, Watch as Watch
