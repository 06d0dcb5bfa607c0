"""Writing a Graph: DOT text, or an image made by Graphviz's `dot`, atomically.

The output appears complete or not at all: `dot` writes a temporary file in the
target's folder, which replaces the target only when `dot` succeeded.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from transforms.model import new_file_mode, write_atomically

from ._graph import Graph, count, to_dot

# Output suffix -> dot's -T format (None: the DOT text itself).
FORMATS: dict[str, str | None] = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": None,
                                  ".gv": None}

# Graphs larger than this are refused before `dot` runs (it would take minutes).
# bench/bench_graphviz.py --calibrate, on a 2-core machine: 500 equations (~630 nodes)
# 0.25 s, 1,000 0.9 s, 2,000 (~2,500 nodes) 8.6 s, and dot's time grows about as the
# cube of the size: 3,000 nodes would be ~30 s for a simple chain, more with crossings.
MAX_RENDER_NODES = 2500
MIN_HINT_NODES = 50  # the smallest max_nodes a timeout's advice names

INSTALL_HINT = ("install Graphviz to render it: `apt-get install -y graphviz` (Debian/Ubuntu), "
                "`brew install graphviz` (macOS) or `conda install graphviz`")

COLLAPSE_HINT = ("collapse_subjaxprs=True, collapse_repeats=True, max_nodes=N or focus=EQN "
                 "(CLI: --collapse, --collapse-repeats, --max-nodes N, --focus EQN)")


def fit_hint(limit: int) -> str:
    """Advice that works when followed: max_nodes bounds every node of every view."""
    return (f"Draw at most {limit} nodes with max_nodes={limit} (CLI: --max-nodes {limit}; "
            f"what does not fit is folded into group nodes, and the graph's notes say what), "
            f"or draw less with {COLLAPSE_HINT}")


class ExportError(Exception):
    """A graph that cannot be exported as asked; the message says why and what to do.

    The CLI maps it to exit code 2.
    """


class GraphTooLarge(ExportError):
    """Refused before running `dot`: laying it out would take minutes."""


class GraphvizMissing(ExportError):
    """No `dot` binary: the DOT text was written instead (`dot_path`)."""

    def __init__(self, message: str, dot_path: Path):
        super().__init__(message)
        self.dot_path = dot_path


def output_format(out: str | os.PathLike) -> str | None:
    suffix = Path(out).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(FORMATS)
        raise ExportError(f"{os.fspath(out)}: cannot tell the format from the suffix "
                          f"{suffix or '(none)'}; use one of {known}")
    return FORMATS[suffix]


def write_graph(graph: Graph, out: str | os.PathLike, *, force: bool = False,
                timeout: float | None = None, quiet: bool = False,
                stream: TextIO | None = None, dot_binary: str | None = None) -> Path:
    """Write `graph` to `out`: DOT text for .dot/.gv, else an image rendered by `dot`.

    Raises GraphTooLarge (before rendering) for graphs past MAX_RENDER_NODES
    unless `force`, GraphvizMissing (after writing OUT with a .dot suffix) when
    there is no `dot`, and ExportError when `dot` fails or times out.
    """
    out = Path(out)
    fmt = output_format(out)
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise ExportError(f"{out}: the folder {folder} does not exist")
    text = to_dot(graph)
    if fmt is None:
        write_atomically(out, text)
        return out
    nodes, edges = count(graph)
    if nodes > MAX_RENDER_NODES and not force:
        raise GraphTooLarge(
            f"the graph has {nodes} nodes and {edges} edges: Graphviz would take minutes to lay "
            f"it out, so it was not rendered (limit {MAX_RENDER_NODES} nodes). "
            f"{fit_hint(MAX_RENDER_NODES)}; or write the DOT text (an output ending in .dot); "
            f"or force=True (--force) to wait for it")
    dot = dot_binary or shutil.which("dot")
    if dot is None:
        dot_path = out.with_suffix(".dot")
        write_atomically(dot_path, text)
        raise GraphvizMissing(f"Graphviz's `dot` was not found on PATH, so {out.name} was not "
                              f"made; the graph was written as DOT text to {dot_path}. "
                              f"{INSTALL_HINT[0].upper()}{INSTALL_HINT[1:]}, then run "
                              f"`dot -T{fmt} {dot_path} -o {out}`", dot_path)
    _run_dot(dot, fmt, text, out, (nodes, edges), timeout, quiet,
             stream if stream is not None else sys.stderr)
    return out


def _run_dot(dot: str, fmt: str, text: str, out: Path, size: tuple[int, int],
             timeout: float | None, quiet: bool, stream: TextIO) -> None:
    folder = out.parent if str(out.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{out.stem}-", suffix=out.suffix, dir=folder)
    os.fchmod(fd, new_file_mode())
    os.close(fd)
    with tempfile.TemporaryDirectory(prefix="workbench-dot-") as work:
        source = os.path.join(work, "graph.dot")
        errors = os.path.join(work, "stderr.txt")
        with open(source, "w", encoding="ascii") as f:  # to_dot writes pure ASCII
            f.write(text)
        progress = _Progress(stream, quiet, f"dot: laying out {size[0]} nodes, {size[1]} edges "
                                            f"-> {out.name}")
        ok = False
        try:
            with open(errors, "w") as err:
                process = subprocess.Popen([dot, f"-T{fmt}", source, "-o", tmp],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=err)
                try:
                    code = _wait(process, timeout, progress)
                except BaseException:
                    process.kill()  # our own child, by its handle
                    process.wait()
                    raise
            if code is None:
                fewer = max(MIN_HINT_NODES, size[0] // 4)
                raise ExportError(f"dot did not finish within {timeout:g} s laying out "
                                  f"{size[0]} nodes. {fit_hint(fewer)}")
            with open(errors, encoding="utf-8", errors="replace") as f:
                message = f.read().strip()
            if code != 0 or os.path.getsize(tmp) == 0:
                tail = "\n".join(message.splitlines()[-5:]) or f"exit code {code}"
                raise ExportError(f"dot failed to render {out.name}: {tail}")
            os.replace(tmp, out)
            ok = True
        finally:
            progress.done(ok)
            if not ok and os.path.exists(tmp):
                os.unlink(tmp)


def _wait(process: subprocess.Popen, timeout: float | None, progress: _Progress) -> int | None:
    start = time.monotonic()
    while True:
        try:
            return process.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - start
            if timeout is not None and elapsed > timeout:
                process.kill()
                process.wait()
                return None
            progress.tick(elapsed)


class _Progress:
    """A spinner with elapsed time on a terminal; one line before and after otherwise."""

    FRAMES = "|/-\\"

    def __init__(self, stream: TextIO, quiet: bool, what: str):
        self.stream, self.quiet, self.what = stream, quiet, what
        self.tty = bool(getattr(stream, "isatty", None) and stream.isatty())
        self.start = time.monotonic()
        self.frame = 0
        if not quiet and not self.tty:
            print(f"workbench: {what} ...", file=stream, flush=True)

    def tick(self, elapsed: float) -> None:
        if self.quiet or not self.tty:
            return
        self.frame += 1
        frame = self.FRAMES[self.frame % len(self.FRAMES)]
        self.stream.write(f"\r{frame} workbench: {self.what} ({elapsed:.1f} s)")
        self.stream.flush()

    def done(self, ok: bool) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        if self.tty:
            self.stream.write("\r\x1b[2K")
        verdict = "done" if ok else "stopped"
        print(f"workbench: {self.what}: {verdict} in {elapsed:.1f} s", file=self.stream,
              flush=True)
