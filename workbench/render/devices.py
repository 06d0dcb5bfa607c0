"""Rich renderables for programs on several devices: which device holds which
block of an array (a mesh grid, as `jax.debug.visualize_array_sharding` shows a
live array, but from recorded `ShardingRecord`s), and the collectives each
compiled stage runs.

Each reads `transforms.model` only and never crashes its caller: a failure
renders as `<render-error ...>`.
"""
from __future__ import annotations

import math

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from transforms.model import Call, CollectiveRecord, ProcessInfo, ShardingRecord, Stage

from ..analysis import crossing, group_processes
from ._safe import safe

# Devices holding the same block share a colour (colourless consoles show none).
_BLOCK_STYLES = ("on dark_blue", "on dark_green", "on dark_red", "on purple4", "on dark_cyan",
                 "on orange4", "on deep_pink4", "on grey30")
ROLES = ("input", "output", "gradient")
_ROLE_TITLES = {"input": "inputs", "output": "outputs", "gradient": "gradients"}


def block_text(record: ShardingRecord, device: int) -> str:
    """`[0:8, :]`: the device's block, a whole dimension written `:`."""
    for block in record.blocks:
        if block.device == device:
            dims = record_dims(record)
            parts = [":" if (a, b) == (0, d) else f"{a}:{b}"
                     for a, b, d in zip(block.starts, block.stops, dims)]
            return "[" + ", ".join(parts) + "]"
    return "-"


def record_dims(record: ShardingRecord) -> tuple[int, ...]:
    """The array's shape, from its aval text `float32[8,16]`."""
    inside = record.aval[record.aval.find("[") + 1:record.aval.rfind("]")]
    return tuple(int(d) for d in inside.split(",") if d.strip())


def mesh_summary(record: ShardingRecord) -> str:
    """`data=4 × model=2`, or `8 devices` for a sharding without a mesh."""
    if record.mesh_axes:
        return " × ".join(f"{a}={n}" for a, n in zip(record.mesh_axes, record.mesh_shape))
    return f"{len(record.mesh_devices)} devices"


def grid_shape(record: ShardingRecord) -> tuple[int, int]:
    """Rows: the first mesh axis; columns: the others, flattened (one for a 1-D mesh)."""
    sizes = record.mesh_shape or (len(record.mesh_devices),)
    if len(sizes) == 1:
        return sizes[0], 1
    return sizes[0], math.prod(sizes[1:])


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def process_tag(device: int, owner: dict[int, int]) -> str:
    """`p1 ` for a device of process 1 when devices span several processes, else ""."""
    return f"p{owner[device]} " if len(set(owner.values())) > 1 and device in owner else ""


def processes_text(devices: tuple[int, ...], owner: dict[int, int]) -> str:
    """`processes 0,1` for devices spanning several processes, "" otherwise."""
    spans = group_processes(devices, owner)
    return f"processes {','.join(map(str, spans))}" if len(spans) > 1 else ""


def devices_text(devices: tuple[int, ...], owner: dict[int, int]) -> str:
    """`0,1,2,3`, or grouped by process when they span several: `p0: 0,1; p1: 2048,2049`."""
    if not processes_text(devices, owner):
        return ",".join(map(str, devices))
    groups: dict[int, list[int]] = {}
    for d in devices:
        groups.setdefault(owner.get(d, -1), []).append(d)
    return "; ".join(f"p{p}: {','.join(map(str, ds))}" if p >= 0 else ",".join(map(str, ds))
                     for p, ds in groups.items())


class MeshGrid:
    """One array on the mesh: a cell per device with the block it holds (and, for a
    multi-process run, the process owning the device: `p1 dev 2048`)."""

    def __init__(self, record: ShardingRecord, owner: dict[int, int] | None = None):
        self.record = record
        self.owner = owner or {}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "mesh grid")

    def header(self) -> Text:
        r = self.record
        text = Text.assemble((r.name, "bold"), "  ", (r.aval, "cyan"))
        if r.spec:
            text.append(f"  {r.spec}", style="magenta")
        if r.mesh_devices:
            text.append(f"  on {mesh_summary(r)}")
        spans = processes_text(r.mesh_devices, self.owner)
        if spans:
            text.append(f"  across {spans}", style="bold")
        if r.replicated:
            text.append("  replicated", style="yellow")
        elif r.shard_shape:
            text.append(f"  block {shape_text(r.shard_shape)}")
        return text

    def _build(self) -> RenderableType:
        r = self.record
        if r.note:
            return Group(self.header(), Text(f"  {r.note}", style="red"))
        if r.replicated:  # every cell would read the same: say it once
            return Group(self.header(), Text(f"  whole array on every device "
                                             f"({devices_text(r.mesh_devices, self.owner)})",
                                             style="dim"))
        rows, cols = grid_shape(r)
        styles = self._styles()
        table = Table(box=box.SQUARE, show_lines=cols > 1, pad_edge=True,
                      show_header=len(r.mesh_axes) > 1)
        table.add_column("", no_wrap=True, style="bold")
        for label in self._column_labels(cols):
            table.add_column(label, no_wrap=True, justify="center" if cols > 1 else "left")
        devices = list(r.mesh_devices)
        for i in range(rows):
            cells = [Text(self._row_label(i))]
            for device in devices[i * cols:(i + 1) * cols]:
                block = block_text(r, device)
                # One device per row (a 1-D mesh): device and block on one line.
                sep = "  " if cols == 1 else "\n"
                tag = process_tag(device, self.owner)
                cells.append(Text(f"{tag}dev {device}{sep}{block}", style=styles.get(block, "")))
            table.add_row(*cells)
        return Group(self.header(), table)

    def _row_label(self, i: int) -> str:
        r = self.record
        return f"{r.mesh_axes[0]}={i}" if r.mesh_axes else ""

    def _column_labels(self, cols: int) -> list[str]:
        axes, sizes = self.record.mesh_axes, self.record.mesh_shape
        inner, inner_sizes = axes[1:], sizes[1:]
        if not inner:
            return [""] * cols
        labels = []
        for j in range(cols):
            coords, rest = [], j
            for size in reversed(inner_sizes):
                coords.append(rest % size)
                rest //= size
            labels.append(",".join(f"{a}={c}" for a, c in zip(inner, reversed(coords))))
        return labels

    def _styles(self) -> dict[str, str]:
        blocks = sorted({block_text(self.record, d) for d in self.record.mesh_devices})
        return {b: _BLOCK_STYLES[i % len(_BLOCK_STYLES)] for i, b in enumerate(blocks)}


def groups_text(c: CollectiveRecord) -> str:
    """`{0,2,4,6} {1,3,5,7}`, or the attribute as printed when it was not parsed."""
    if not c.groups:
        return c.groups_text or "-"
    joiner = "→" if c.kind == "collective-permute" else ","
    return " ".join("{" + joiner.join(map(str, g.devices)) + "}" for g in c.groups)


def bytes_text(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class CollectivesView:
    """The collectives of one optimised HLO stage, in program order; in a multi-process
    run, each says whether it crosses processes (its data goes between hosts)."""

    def __init__(self, stage: Stage, owner: dict[int, int] | None = None):
        self.stage = stage
        self.owner = owner or {}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "collectives")

    def _build(self) -> RenderableType:
        s = self.stage
        collectives = s.collectives
        total = sum(c.result_bytes for c in collectives)
        title = Text.assemble((s.name, "bold"), f"  {len(collectives)} collective"
                              f"{'' if len(collectives) == 1 else 's'}, "
                              f"{bytes_text(total)} per device")
        if not collectives:
            return title
        parts: list[RenderableType] = [title]
        for i, c in enumerate(collectives):
            parts.append(_collective_facts(i, c, self.owner))
        return Group(*parts)


def crossing_text(c: CollectiveRecord, owner: dict[int, int]) -> str:
    """`crosses processes 0,1`, `within each process`, or "" (one process, or unknown ids)."""
    if len(set(owner.values())) < 2 or c.ids != "device" or not c.groups:
        return ""
    spans = crossing(c, owner)
    return f"crosses processes {','.join(map(str, spans))}" if spans else "within each process"


def _collective_facts(index: int, c: CollectiveRecord,
                      owner: dict[int, int] | None = None) -> RenderableType:
    """`#0 all-reduce  648 B per device`, then its result, devices and origin, folded."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    head = Text.assemble((f"#{index} ", "dim"), (c.kind, "yellow"),
                         f"  {bytes_text(c.result_bytes)} per device  ", (c.name, "dim"))
    table.add_row("   result", Text(c.shape))
    ids = "" if c.ids == "device" else f" ({c.ids} ids)"
    table.add_row("   devices", Text(groups_text(c) + ids))
    across = crossing_text(c, owner or {})
    if across:
        table.add_row("   processes", Text(across, style="bold red" if across.startswith(
            "crosses") else "green"))
    if c.op_name:
        table.add_row("   from", Text(c.op_name, style="dim"))
    return Group(head, table)


def compiled_stages(call: Call) -> list[Stage]:
    """Optimised HLO stages that ran on several devices or hold collectives."""
    return [s for s in call.stages if s.role == "hlo" and (s.collectives or s.shardings)]


class ProcessesView:
    """The processes of a run as groups of devices: which devices each one drives."""

    def __init__(self, info: ProcessInfo):
        self.info = info

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "processes")

    def _build(self) -> RenderableType:
        info = self.info
        by_process: dict[int, list[int]] = {}
        for d in info.devices:
            by_process.setdefault(d.process, []).append(d.id)
        title = Text.assemble(("processes", "bold underline"),
                              f"  {info.count} in the run, {len(info.devices)} global devices; "
                              f"this is process {info.index}")
        table = Table(box=box.SIMPLE, show_header=True, pad_edge=False)
        for name in ("process", "devices", ""):
            table.add_column(name, no_wrap=True)
        for p in range(info.count):
            devices = ",".join(map(str, by_process.get(p, []))) or "?"
            here = "◀ this recording" if p == info.index else ""
            table.add_row(Text(f"p{p}", style="bold" if here else ""), devices,
                          Text(here, style="cyan"))
        return Group(title, table)


class DevicesView:
    """A call on devices: inputs, outputs and gradients on the mesh, then collectives;
    for a process of a multi-process run, its processes as groups of devices first."""

    def __init__(self, call: Call, process: ProcessInfo | None = None):
        self.call = call
        self.process = process
        self.owner = {d.id: d.process for d in process.devices} if process is not None else {}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "devices")

    def _build(self) -> RenderableType:
        call = self.call
        stages = compiled_stages(call)
        parts: list[RenderableType] = []
        if self.process is not None and self.process.count > 1:
            parts.append(ProcessesView(self.process))
        if not call.shardings and not stages:
            empty = Text("single device: no sharded arrays or collectives recorded", style="dim")
            return Group(*parts, empty) if parts else empty
        for role in ROLES:
            records = [r for r in call.shardings if r.role == role]
            if records:
                parts.append(Text(_ROLE_TITLES[role], style="bold underline"))
                parts.extend(MeshGrid(r, self.owner) for r in records)
        if stages:
            parts.append(Text("collectives", style="bold underline"))
            parts.extend(CollectivesView(s, self.owner) for s in stages)
        return Group(*parts)
