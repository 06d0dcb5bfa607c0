"""The C step core's sources, relative to the repository root: the one list that setup.py
builds from, the build's stamp hashes (`_step_core.core_source_sha`) and scripts/setup.sh's
venv stamp reads. No imports: setup.py and the shell read it before the package installs."""

HEADER = "transforms/_capture/_core.h"
SOURCES = (
    "transforms/_capture/_core_module.c",
    "transforms/_capture/_core_values.c",
    "transforms/_capture/_core_params.c",
    "transforms/_capture/_core_steps.c",
    "transforms/_capture/_core_modules.c",
    "transforms/_capture/_core_type.c",
    "transforms/_capture/_core_bracket.c",
    "transforms/_capture/_core_jitcall.c",
)
# What the stamp covers, in this order.
STAMPED = (HEADER, *SOURCES)


def source_stamp(root: str, sha256) -> str | None:
    """The sha256 (`sha256`: hashlib.sha256) of the stamped files under `root`, each by its
    path and bytes; None when one is not there (an install without sources)."""
    digest = sha256()
    for path in STAMPED:
        try:
            with open(f"{root}/{path}", "rb") as f:
                data = f.read()
        except OSError:
            return None
        digest.update(f"{path}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
