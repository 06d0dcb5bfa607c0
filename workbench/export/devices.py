"""The `devices` view: a call's arrays on the device mesh, and its collectives.

Pure like the other collect functions: records in, a `Graph` out. Each sharded
array is a grid of device nodes (rows: the first mesh axis) labelled with the
block each device holds, devices holding the same block filled alike;
replicated arrays are listed in one node; each compiled stage's collectives are
nodes naming their kind, result, bytes and device groups, in program order.
"""
from __future__ import annotations

from transforms.model import Call, CollectiveRecord, ShardingRecord, Stage

from ..analysis import call_label
from ..render.devices import (
    block_text,
    bytes_text,
    compiled_stages,
    crossing_text,
    devices_text,
    grid_shape,
    groups_text,
    mesh_summary,
    processes_text,
    shape_text,
)
from ._graph import Cluster, Edge, Graph, GraphOptions, Node, _shorten

# Pastel fills, one per distinct block of an array.
BLOCK_FILLS = ("#dbeafe", "#dcfce7", "#fee2e2", "#ede9fe", "#cffafe", "#ffedd5", "#fce7f3",
               "#e5e7eb")
COLLECTIVE_FILL = "#fef08a"
CROSSING_FILL = "#fca5a5"     # a collective whose groups span several processes
# At most this many arrays are drawn as grids (each is one node per device); a note says
# how many more there are.
MAX_GRIDS = 12


def _grid(record: ShardingRecord, k: int, nodes: list[Node], edges: list[Edge],
          clusters: list[Cluster], same_rank: list[tuple[str, ...]],
          owner: dict[int, int]) -> None:
    cluster = f"cluster_array{k}"
    label = f"{record.role}: {record.name}  {record.aval}  {record.spec}\non {mesh_summary(record)}"
    if record.shard_shape:
        label += f", block {shape_text(record.shard_shape)} per device"
    spans = processes_text(record.mesh_devices, owner)
    if spans:
        label += f", across {spans}"
    clusters.append(Cluster(cluster, label, None, "tree"))
    # A multi-process run: each process's devices in a box of their own inside the array's.
    boxes = {p: f"{cluster}_p{p}" for p in sorted({owner[d] for d in record.mesh_devices
                                                   if d in owner})} if spans else {}
    clusters.extend(Cluster(name, f"process {p}", cluster, "level") for p, name in boxes.items())
    # A 1-D mesh is one row here (a column in the terminal, where width is scarce).
    rows, cols = (1, len(record.mesh_devices)) if len(record.mesh_shape) <= 1 else \
        grid_shape(record)
    blocks = sorted({block_text(record, d) for d in record.mesh_devices})
    fills = {b: BLOCK_FILLS[i % len(BLOCK_FILLS)] for i, b in enumerate(blocks)}
    devices = list(record.mesh_devices)
    previous_row: list[str] = []
    for i in range(rows):
        row = []
        for device in devices[i * cols:(i + 1) * cols]:
            block = block_text(record, device)
            node_id = f"a{k}d{device}"
            home = boxes.get(owner.get(device, -1), cluster)
            nodes.append(Node(node_id, f"dev {device}\n{block}", "leaf", home, fill=fills[block],
                              tooltip=f"device {device} holds {record.name}{block}"))
            row.append(node_id)
        if row:
            same_rank.append(tuple(row))
            # Invisible edges keep the grid: left to right in a row, each column stacked.
            edges.extend(Edge(a, b, style="invis") for a, b in zip(row, row[1:]))
            edges.extend(Edge(a, b, style="invis") for a, b in zip(previous_row, row))
            previous_row = row


def _collective_label(index: int, c: CollectiveRecord, owner: dict[int, int]) -> str:
    ids = "" if c.ids == "device" else f" ({c.ids} ids)"
    lines = [f"#{index} {c.kind}  {c.shape}", f"{bytes_text(c.result_bytes)} per device",
             _shorten("groups " + groups_text(c) + ids, 70)]
    across = crossing_text(c, owner)
    if across:
        lines.append(across)
    if c.op_name:
        lines.append(_shorten(c.op_name, 70))
    return "\n".join(lines)


def _collectives(stage: Stage, k: int, nodes: list[Node], edges: list[Edge],
                 clusters: list[Cluster], owner: dict[int, int], room: int | None = None,
                 notes: list[str] | None = None) -> None:
    """One node per collective, in program order; with `room`, at most that many nodes (the
    last one then counts the collectives not drawn)."""
    cluster = f"cluster_stage{k}"
    total = sum(c.result_bytes for c in stage.collectives)
    n = len(stage.collectives)
    clusters.append(Cluster(cluster, f"{stage.name}: {n} collective{'' if n == 1 else 's'}, "
                                     f"{bytes_text(total)} per device", None, "stage"))
    if not stage.collectives:
        nodes.append(Node(f"c{k}_none", "no collectives", "note", cluster))
        return
    previous = None
    shown = stage.collectives
    if room is not None and len(shown) > room:
        shown = shown[:room - 1]
        rest = n - len(shown)
        nodes.append(Node(f"c{k}_more", f"{rest} more collectives not drawn", "note", cluster))
        if notes is not None:
            notes.append(f"{stage.name}: {rest} of {n} collectives not drawn (max_nodes)")
    for i, c in enumerate(shown):
        node_id = f"c{k}_{i}"
        nodes.append(Node(node_id, _collective_label(i, c, owner), "step", cluster,
                          fill=CROSSING_FILL if crossing_text(c, owner).startswith("crosses")
                          else COLLECTIVE_FILL,
                          tooltip=f"{c.name} in {c.computation}"))
        if previous is not None:  # program order, one column
            edges.append(Edge(previous, node_id))
        previous = node_id


def collect_devices(call: Call, options: GraphOptions = GraphOptions(),
                    owner: dict[int, int] | None = None) -> Graph:
    """Sharded arrays as device grids, replicated ones listed, collectives per stage.

    `owner` (device id -> process index, a multi-process run) boxes each process's
    devices inside every grid and marks the collectives that cross processes."""
    owner = owner or {}
    nodes: list[Node] = []
    edges: list[Edge] = []
    clusters: list[Cluster] = []
    notes: list[str] = []
    same_rank: list[tuple[str, ...]] = []
    sharded = [r for r in call.shardings if not r.replicated and not r.note]
    budget = options.max_nodes if options.max_nodes is not None else 500  # device nodes
    drawn = 0
    for record in sharded[:MAX_GRIDS]:
        if len(nodes) + len(record.mesh_devices) > budget:
            break
        _grid(record, drawn, nodes, edges, clusters, same_rank, owner)
        drawn += 1
    if len(sharded) > drawn:
        notes.append(f"{len(sharded) - drawn} more sharded arrays not drawn")
    others = [r for r in call.shardings if r.replicated or r.note]
    if others:
        lines = [f"{r.role}: {r.name}  {r.aval}  " +
                 (f"replicated on {mesh_summary(r)} ({devices_text(r.mesh_devices, owner)})"
                  if r.replicated and processes_text(r.mesh_devices, owner) else
                  f"replicated on {mesh_summary(r)}" if r.replicated else _shorten(r.note, 60))
                 for r in others[:30]]
        if len(others) > 30:
            lines.append(f"... and {len(others) - 30} more")
        nodes.append(Node("replicated", "\n".join(lines), "note"))
    stages = compiled_stages(call)
    for k, stage in enumerate(stages):
        room = None
        if options.max_nodes is not None:  # one node kept for each stage still to come
            room = max(1, options.max_nodes - len(nodes) - (len(stages) - k - 1))
        _collectives(stage, k, nodes, edges, clusters, owner, room, notes)
    if not nodes:
        nodes.append(Node("single", "single device: no sharded arrays or collectives recorded",
                          "note"))
    title = (f"call {call.index}: {call_label(call)} on devices: "
             f"{len(call.shardings)} arrays recorded, "
             f"{sum(len(s.collectives) for s in compiled_stages(call))} collectives; "
             f"devices holding the same block share a fill")
    return Graph(title, tuple(nodes), tuple(edges), tuple(clusters), tuple(notes), "TB",
                 (), tuple(same_rank))
