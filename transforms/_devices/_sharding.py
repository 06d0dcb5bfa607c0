"""Shardings and collectives: how a recorded call's arrays sit on devices.

Two sources, both JAX's own: the `sharding` of concrete arrays (and of a
compiled executable's inputs and outputs), read through the public
`jax.sharding` API; and the collectives XLA's SPMD partitioner inserted, parsed
from the optimised HLO text `compiled.as_text()` gives. Nothing is simulated:
a layout or collective JAX does not report is not recorded.

Everything here is guarded by its callers' contract: a fault of ours returns
what was found so far (or a note), never an exception in the user's call.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Iterable

import jax
import numpy as np

from .._capture import spec_text
from .._common import first_line
from .._jax import Tracer
from ..model import (
    CollectiveRecord,
    DeviceGroup,
    DeviceRecord,
    ProcessInfo,
    ShardBlock,
    ShardingRecord,
    Stage,
)

# A call keeps at most this many sharding records (an input tree of thousands of leaves).
MAX_SHARDINGS = 256


# --- layouts of arrays -------------------------------------------------------------

def is_multi_device(x: Any) -> bool:
    """A concrete jax.Array whose sharding spans more than one device."""
    # NB: Tracer first: isinstance(tracer, jax.Array) costs a us a leaf (an ABC check)
    if isinstance(x, Tracer) or not isinstance(x, jax.Array):
        return False
    try:
        return len(x.sharding.device_set) > 1
    except Exception:  # a deleted or donated array
        return False


def sharding_record(role: str, name: str, shape: tuple, dtype: Any, sharding: Any,
                    argnum: int | None = None, path: str = "") -> ShardingRecord:
    """Describe `sharding` for an array of `shape`: mesh, spec, blocks per device."""
    shape = tuple(int(d) for d in shape)
    aval = f"{np.dtype(dtype).name}[{','.join(map(str, shape))}]"
    base = ShardingRecord(role, name, aval, type(sharding).__name__, argnum=argnum, path=path)
    try:
        return _filled(base, shape, sharding)
    except Exception as e:  # JAX refused (e.g. a shape the sharding does not divide)
        return dataclasses.replace(base, note=f"{type(e).__name__}: {_first_line(e)}")


def _filled(base: ShardingRecord, shape: tuple, sharding: Any) -> ShardingRecord:
    mesh = getattr(sharding, "mesh", None)
    spec = getattr(sharding, "spec", None)
    if mesh is not None and hasattr(mesh, "devices"):
        axes = tuple(str(a) for a in mesh.axis_names)
        sizes = tuple(int(s) for s in mesh.devices.shape)
        order = tuple(int(d.id) for d in mesh.devices.flat)
    else:  # no mesh (SingleDevice, GSPMD, Positional...): one row of its devices
        devices = sorted(sharding.device_set, key=lambda d: d.id)
        axes, sizes, order = (), (len(devices),), tuple(int(d.id) for d in devices)
    index_map = sharding.devices_indices_map(shape)
    by_id = {int(d.id): idx for d, idx in index_map.items()}
    blocks = tuple(_block(i, by_id[i], shape) for i in order if i in by_id)
    return dataclasses.replace(
        base, spec=spec_text(spec) if spec is not None else "", mesh_axes=axes,
        mesh_shape=sizes, mesh_devices=order,
        shard_shape=tuple(int(d) for d in sharding.shard_shape(shape)), blocks=blocks,
        replicated=bool(sharding.is_fully_replicated))


def _block(device: int, index: tuple, shape: tuple) -> ShardBlock:
    starts, stops = [], []
    for dim, part in zip(shape, index):
        start, stop, _ = part.indices(dim) if isinstance(part, slice) else (part, part + 1, 1)
        starts.append(int(start))
        stops.append(int(stop))
    return ShardBlock(device, tuple(starts), tuple(stops))


def _keystr(path: tuple) -> str:
    return "".join(str(k) for k in path)


def leaf_shardings(role: str, name: str, tree: Any, argnum: int | None = None,
                   out: list | None = None) -> list[ShardingRecord]:
    """Records for the multi-device arrays among a pytree's leaves."""
    out = [] if out is None else out
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if len(out) >= MAX_SHARDINGS:
            break
        if is_multi_device(leaf):
            key = _keystr(path)
            out.append(sharding_record(role, name + key, leaf.shape, leaf.dtype, leaf.sharding,
                                       argnum, key))
    return out


def any_multi_device(tree: Any) -> bool:
    return any(map(is_multi_device, jax.tree_util.tree_leaves(tree)))


def output_role(path: str, prefix: str | None) -> str:
    return "gradient" if prefix is not None and path.startswith(prefix) else "output"


def call_input_shardings(args: tuple, kwargs: dict, names: list[str]) -> list[ShardingRecord]:
    """The inputs' layouts, each argument named as its parameter."""
    found: list[ShardingRecord] = []
    for i, arg in enumerate(args):
        leaf_shardings("input", names[i] if i < len(names) else f"args[{i}]", arg, i, found)
    for key, value in kwargs.items():
        leaf_shardings("input", str(key), value, None, found)
    return found


def call_output_shardings(outputs: Any, prefix: str | None) -> list[ShardingRecord]:
    """The outputs' layouts; those inside the derivative part are gradients."""
    found = leaf_shardings("output", "out", outputs)
    return [dataclasses.replace(r, role=output_role(r.path, prefix)) for r in found]


def compiled_shardings(compiled: Any) -> tuple[ShardingRecord, ...]:
    """The executable's input and output layouts, from `args_info` and `out_info`.

    Recorded only when the program runs on more than one device.
    """
    inputs = jax.tree_util.tree_flatten_with_path(compiled.args_info)[0]
    in_shardings = jax.tree_util.tree_leaves(compiled.input_shardings)
    outputs = jax.tree_util.tree_flatten_with_path(_out_info(compiled))[0]
    found: list[ShardingRecord] = []
    for (path, info), sharding in zip(inputs, in_shardings):
        argnum, rest = _split_args_path(path)
        name = f"args[{argnum}]" if argnum is not None else "kwargs"
        found.append(sharding_record("input", name + rest, info.shape, info.dtype, sharding,
                                     argnum, rest))
    for path, info in outputs:
        sharding = getattr(info, "sharding", None)
        if sharding is not None:
            key = _keystr(path)
            found.append(sharding_record("output", "out" + key, info.shape, info.dtype,
                                         sharding, None, key))
    if not any(len(r.mesh_devices) > 1 for r in found):
        return ()
    return tuple(found[:MAX_SHARDINGS])


def _out_info(compiled: Any) -> Any:
    info = getattr(compiled, "out_info", None)
    if info is None:
        raise AttributeError("this JAX's Compiled has no out_info")
    return info


def _split_args_path(path: tuple) -> tuple[int | None, str]:
    """args_info is ((args...), {kwargs}): split off the positional index."""
    if len(path) >= 2 and getattr(path[0], "idx", None) == 0:
        return int(path[1].idx), _keystr(path[2:])
    return None, _keystr(path[1:])


def gradient_names(records: Iterable[ShardingRecord], prefix: str | None, argnums: Any,
                   names: dict[int, str]) -> tuple[ShardingRecord, ...]:
    """Gradients named after their input, `grad params['w1']`, argnum set.

    `argnums` as the transformation was given it: an int, or a tuple whose
    position is the next key after `prefix` in the output."""
    renamed = []
    for r in records:
        if r.role == "gradient" and prefix is not None:
            rest = r.path[len(prefix):]
            argnum = argnums if isinstance(argnums, int) else None
            if isinstance(argnums, (tuple, list)):
                match = re.match(r"\[(\d+)\]", rest)
                if match and int(match.group(1)) < len(argnums):
                    argnum, rest = argnums[int(match.group(1))], rest[match.end():]
            if argnum is not None:
                base = names.get(argnum, f"args[{argnum}]")
                r = dataclasses.replace(r, name=f"grad {base}{rest}", argnum=argnum)
        renamed.append(r)
    return tuple(renamed)


def named_for_call(records: Iterable[ShardingRecord], names: dict[int, str],
                   prefix: str | None) -> tuple[ShardingRecord, ...]:
    """Compiled-stage records renamed for a call: parameter names, gradient roles."""
    renamed = []
    for r in records:
        if r.role == "input" and r.argnum is not None and r.argnum in names:
            r = dataclasses.replace(r, name=names[r.argnum] + r.path)
        elif r.role == "output":
            r = dataclasses.replace(r, role=output_role(r.path, prefix))
        renamed.append(r)
    return tuple(renamed)


# --- collectives in optimised HLO -------------------------------------------------------

COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
                    "all-to-all")
# `%name = type op(`; async forms (all-gather-start) count once, at their start.
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?(%?[\w.\-]+)\s*=\s*(.+?)\s+"
    r"(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)(-start)?\(")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?(%?[\w.\-]+)\s.*\{\s*$")
_ARRAY_TYPE = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_REDUCTION = re.compile(r"\bto_apply=(%?[\w.\-]+)")
_DIMENSIONS = re.compile(r"\bdimensions=\{([\d,]*)\}")
_BYTES_PER_ELEMENT = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2,
                      "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8,
                      "f64": 8, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1}


def collectives_in_hlo(text: str) -> tuple[CollectiveRecord, ...]:
    """Every collective instruction in an HLO module's text, in order."""
    found = []
    computation = ""
    for line in text.splitlines():
        if not line.startswith(" "):
            header = _COMPUTATION.match(line)
            if header:
                computation = (header.group(1) or "") + header.group(2)
            continue
        match = _INSTRUCTION.match(line)
        if match:
            found.append(_collective(line, match, computation))
    return tuple(found)


def _collective(line: str, match: re.Match, computation: str) -> CollectiveRecord:
    name, result_type, kind = match.group(1), match.group(2).strip(), match.group(3)
    arrays = _ARRAY_TYPE.findall(result_type)
    shape = re.sub(r"\{[\d,]*\}", "", result_type)  # drop layouts: f32[4,16]{1,0}
    attributes = line[match.end():]
    if kind == "collective-permute":
        groups_text = _braced_attribute(attributes, "source_target_pairs")
    else:
        groups_text = _groups_attribute(attributes)
    reduction = _REDUCTION.search(attributes)
    dimensions = _DIMENSIONS.search(attributes)
    op_name = _OP_NAME.search(attributes)
    return CollectiveRecord(
        kind, name, shape, dtype=arrays[0][0] if arrays else "",
        result_bytes=_bytes_of(arrays), groups=parse_groups(groups_text),
        groups_text=groups_text, reduction=reduction.group(1) if reduction else "",
        dimensions=dimensions.group(1) if dimensions else "", computation=computation,
        op_name=op_name.group(1) if op_name else "")


def _bytes_of(arrays: list[tuple[str, str]]) -> int:
    total = 0.0
    for dtype, dims in arrays:
        size = math.prod(int(d) for d in dims.split(",") if d) if dims else 1
        total += size * _BYTES_PER_ELEMENT.get(dtype, 0)
    return int(math.ceil(total))


def _braced_attribute(attributes: str, name: str) -> str:
    """`name={{0,1},{2,3}}` -> `{{0,1},{2,3}}` (balanced braces)."""
    start = attributes.find(name + "={")
    if start < 0:
        return ""
    i = start + len(name) + 1
    depth = 0
    for j in range(i, len(attributes)):
        depth += {"{": 1, "}": -1}.get(attributes[j], 0)
        if depth == 0:
            return attributes[i:j + 1]
    return attributes[i:]


def _groups_attribute(attributes: str) -> str:
    """replica_groups in any of XLA's three spellings, as printed."""
    start = attributes.find("replica_groups=")
    if start < 0:
        return ""
    rest = attributes[start + len("replica_groups="):]
    if rest.startswith("{"):
        return _braced_attribute(attributes, "replica_groups")
    if rest.startswith("mesh["):  # mesh['a'=4,'b'=2] {'a'}
        end = rest.find("}", rest.find("]"))
        return rest[:end + 1]
    iota = re.match(r"\[[\d,]*\]<=\[[\d,]*\](?:T\([\d,]*\))?", rest)  # [4,2]<=[8]
    return iota.group(0) if iota else rest.split(", ")[0]


def parse_groups(text: str) -> tuple[DeviceGroup, ...]:
    """Device groups from `{{0,1},{2,3}}`, `[4,2]<=[8]`, `[2,4]<=[4,2]T(1,0)` or
    `mesh['a'=4,'b'=2] {'a'}`; () for a spelling we do not know (the text is kept)."""
    text = text.strip()
    if text.startswith("{"):
        return tuple(DeviceGroup(tuple(int(n) for n in g.split(",") if n.strip()))
                     for g in re.findall(r"\{([\d,\s]*)\}", text[1:-1]))
    iota = re.fullmatch(r"\[([\d,]*)\]<=\[([\d,]*)\](?:T\(([\d,]*)\))?", text)
    if iota:
        return _iota_groups(_ints(iota.group(1)), _ints(iota.group(2)),
                            _ints(iota.group(3)) if iota.group(3) else None)
    mesh = re.fullmatch(r"mesh\[([^\]]*)\](?:,\s*device_ids=\((.*?)\))?\s*\{([^}]*)\}", text)
    if mesh:
        return _mesh_groups(mesh.group(1), mesh.group(3), mesh.group(2))
    return ()


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n)


def _iota_groups(groups_shape: tuple, reshape: tuple, perm: tuple | None) -> tuple:
    ids = np.arange(math.prod(reshape)).reshape(reshape)
    if perm is not None:
        ids = ids.transpose(perm)
    rows = ids.reshape(groups_shape[0], -1) if groups_shape else ids.reshape(1, -1)
    return tuple(DeviceGroup(tuple(int(i) for i in row)) for row in rows)


def _mesh_groups(axes_text: str, grouped_text: str, device_ids: str | None) -> tuple:
    """A group per combination of the other axes, over the named axes.

    The mesh's ids are row-major unless `device_ids=(...)` gives them, as an
    iota `[4,2]T(1,0)` or a list."""
    axes = re.findall(r"'([^']+)'\s*=\s*(\d+)", axes_text)
    grouped = re.findall(r"'([^']+)'", grouped_text)
    names = [a for a, _ in axes]
    if not axes or any(g not in names for g in grouped) or "(" in grouped_text:
        return ()  # sub-axes or a spelling we do not know: the text is kept
    sizes = [int(s) for _, s in axes]
    flat = _device_ids(device_ids, math.prod(sizes))
    if flat is None:
        return ()
    ids = flat.reshape(sizes)
    inner = [names.index(g) for g in grouped]
    outer = [i for i in range(len(names)) if i not in inner]
    group_size = math.prod(sizes[i] for i in inner)
    rows = ids.transpose(outer + inner).reshape(-1, group_size)
    return tuple(DeviceGroup(tuple(int(i) for i in row)) for row in rows)


def _device_ids(text: str | None, count: int) -> np.ndarray | None:
    if not text:
        return np.arange(count)
    iota = re.fullmatch(r"\[([\d,]*)\](?:T\(([\d,]*)\))?", text.strip())
    if iota:
        ids = np.arange(count).reshape(_ints(iota.group(1)))
        if iota.group(2):
            ids = ids.transpose(_ints(iota.group(2)))
        return ids.reshape(-1)
    listed = _ints(text.replace(" ", ""))
    return np.array(listed) if len(listed) == count else None


def to_device_ids(collectives: tuple[CollectiveRecord, ...],
                  shardings: tuple[ShardingRecord, ...]) -> tuple[CollectiveRecord, ...]:
    """Partition ids -> device ids through the mesh's device order, when there is one mesh.

    XLA numbers the partitions of an SPMD program in the executable's device
    assignment order, which for a NamedSharding is the mesh's devices, row-major.
    """
    orders = {r.mesh_devices for r in shardings if r.mesh_axes and r.mesh_devices}
    if len(orders) != 1:
        return collectives
    order = next(iter(orders))
    mapped = []
    for c in collectives:
        if c.groups and all(i < len(order) for g in c.groups for i in g.devices):
            groups = tuple(DeviceGroup(tuple(order[i] for i in g.devices)) for g in c.groups)
            c = dataclasses.replace(c, groups=groups, ids="device")
        mapped.append(c)
    return tuple(mapped)


def with_compiled_view(stage: Stage, compiled: Any) -> Stage:
    """An optimised-HLO stage with its collectives and the executable's shardings; what
    could not be read is said in the stage's note (a fault of ours never fails the stage)."""
    if not stage.available or stage.text is None:
        return stage
    lost: list[str] = []
    try:
        shardings = compiled_shardings(compiled)
    except Exception as e:  # a JAX without args_info/out_info: collectives still count
        shardings = ()
        lost.append(f"the executable's shardings were not read ({_lost_reason(e)})")
    try:
        collectives = to_device_ids(collectives_in_hlo(stage.text), shardings)
    except Exception as e:  # never fail a stage over this view
        collectives = ()
        lost.append(f"its collectives were not read ({_lost_reason(e)})")
    if not collectives and not shardings and not lost:
        return stage
    note = "; ".join([stage.note, *lost] if stage.note else lost)
    return dataclasses.replace(stage, collectives=collectives, shardings=shardings, note=note)


def _lost_reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {_first_line(e)}"


# --- processes of a jax.distributed job ---------------------------------------------

def process_info(**facts: Any) -> ProcessInfo:
    """This process's place in the job: its index, the process count, and every global
    device with the process that owns it (public `jax.process_index`, `jax.devices`).

    NB: call it only once JAX's backend exists (after the script ran): a device
    query would otherwise start one. `facts` fill the other fields (host, pid...).
    """
    devices = jax.devices()
    return ProcessInfo(
        index=int(jax.process_index()), count=int(jax.process_count()),
        local_devices=tuple(int(d.id) for d in jax.local_devices()),
        devices=tuple(DeviceRecord(int(d.id), int(d.process_index), str(d.device_kind),
                                   str(d.platform)) for d in devices),
        **facts)


def _first_line(e: BaseException) -> str:
    return first_line(e) or type(e).__name__
