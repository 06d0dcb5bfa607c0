"""The device records: how an array is laid out across devices, the collectives of a
compiled program, and the processes of a multi-process (jax.distributed) run."""
from __future__ import annotations

from dataclasses import dataclass

# --- shardings and collectives (transforms/_devices/_sharding.py) -------------------------

@dataclass(frozen=True, slots=True)
class ShardBlock:
    """The block of an array one device holds, as `devices_indices_map` gives it."""
    device: int               # the device id
    starts: tuple[int, ...] = ()  # per dimension, the block is [start, stop)
    stops: tuple[int, ...] = ()

    @property
    def index(self) -> str:
        """numpy's spelling of the block: `0:2, 0:16`."""
        return ", ".join(f"{a}:{b}" for a, b in zip(self.starts, self.stops))


@dataclass(frozen=True, slots=True)
class ShardingRecord:
    """How one array of a call is laid out across devices, as JAX's sharding says."""
    role: str                 # input | output | gradient
    name: str                 # the leaf, named as the user names it: "params['w']", "out[0]"
    aval: str                 # e.g. "float32[8,16]"
    kind: str                 # JAX's class: NamedSharding, SingleDeviceSharding, ...
    spec: str = ""            # the PartitionSpec, e.g. "P('data', None)"; "" without one
    mesh_axes: tuple[str, ...] = ()   # NamedSharding: axis names, e.g. ("data", "model")
    mesh_shape: tuple[int, ...] = ()  # and their sizes, e.g. (4, 2)
    mesh_devices: tuple[int, ...] = ()  # device ids in mesh order (row-major)
    shard_shape: tuple[int, ...] = ()   # the per-device block's shape
    blocks: tuple[ShardBlock, ...] = ()  # per device, in mesh order
    replicated: bool = False  # every device holds the whole array
    argnum: int | None = None  # inputs and gradients: the positional argument
    path: str = ""            # key path inside that argument or the output: "['w']"
    note: str = ""            # why the layout could not be described fully


@dataclass(frozen=True, slots=True)
class DeviceGroup:
    """A set of devices one collective runs over, or a (source, target) pair."""
    devices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CollectiveRecord:
    """A collective in a compiled (optimised) HLO module, as XLA printed it."""
    kind: str                 # all-reduce | all-gather | reduce-scatter | collective-permute
                              # | all-to-all
    name: str                 # the HLO instruction, e.g. "%all-reduce.1"
    shape: str                # its result type as HLO prints it, e.g. "f32[4,16]"
    dtype: str = ""           # element type of the (first) result, e.g. "f32"
    result_bytes: int = 0     # bytes of the result per device, from its HLO type
    groups: tuple[DeviceGroup, ...] = ()  # replica groups, or source-target pairs
    groups_text: str = ""     # the attribute as printed: "{{0,2},{1,3}}", "[4,2]<=[8]"
    ids: str = "partition"    # what the numbers in `groups` are: partition | device
    reduction: str = ""       # all-reduce / reduce-scatter: the to_apply computation
    dimensions: str = ""      # all-gather / reduce-scatter / all-to-all: dimensions={...}
    computation: str = ""     # the HLO computation it is in, e.g. "ENTRY main.12"
    op_name: str = ""         # metadata op_name: the JAX operation it came from


# --- processes of a multi-process (jax.distributed) run --------------------------

@dataclass(frozen=True, slots=True)
class DeviceRecord:
    """One device of the global device list, with the process that owns it."""
    id: int                   # JAX's device id (CPU ids of process p start at p * 2048)
    process: int              # the process index owning it (`device.process_index`)
    kind: str = ""            # `device.device_kind`, e.g. "cpu"
    platform: str = ""        # e.g. "cpu", "gpu", "tpu"


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """Which process of a `jax.distributed` job a recording comes from, and how it ended."""
    index: int                # jax.process_index()
    count: int                # jax.process_count()
    local_devices: tuple[int, ...] = ()   # ids of the devices this process drives
    devices: tuple[DeviceRecord, ...] = ()  # every global device, in jax.devices() order
    host: str = ""            # the machine it ran on
    pid: int = 0              # its operating-system process id
    coordinator: str = ""     # the coordinator's address, as the launcher gave it
    status: str = ""          # set by the launcher: ok | failed (non-zero exit) | killed
                              # (a signal) | stopped (ended by the launcher: --timeout, or
                              # another process died); "" when no launcher saw it end
    exit_code: int | None = None  # as a shell reports it: 137 for SIGKILL
    message: str = ""         # what happened, in words: "killed by SIGKILL"
    recorded: bool = True     # False: the process wrote no dump (killed before saving)
    complete: bool = True     # False: stopped inside the script, so the call it was in
                              # (and everything after) is not in its recording
