"""Device records the render, export and TUI tests share: a batch split over a 2x2 mesh, a
replicated gradient, an all-reduce, and a compiled stage holding it."""
from __future__ import annotations

from transforms.model import CollectiveRecord, DeviceGroup, ShardBlock, ShardingRecord, Stage


def batch_record(role="input", name="x") -> ShardingRecord:
    """float32[8,4] split over `data` of a data=2 × model=2 mesh, replicated over `model`."""
    blocks = tuple(ShardBlock(d, ((d // 2) * 4, 0), ((d // 2) * 4 + 4, 4)) for d in range(4))
    return ShardingRecord(role, name, "float32[8,4]", "NamedSharding", "P('data', None)",
                          ("data", "model"), (2, 2), (0, 1, 2, 3), (4, 4), blocks)


REPLICATED = ShardingRecord("gradient", "out['w']", "float32[4]", "NamedSharding", "P()",
                            ("data", "model"), (2, 2), (0, 1, 2, 3), (4,),
                            tuple(ShardBlock(d, (0,), (4,)) for d in range(4)), replicated=True)

ALL_REDUCE = CollectiveRecord("all-reduce", "%all-reduce", "f32[4]", "f32", 16,
                              (DeviceGroup((0, 2)), DeviceGroup((1, 3))),
                              "{{0,2},{1,3}}", "device", "%add", "", "ENTRY %main",
                              "jit(loss)/transpose(jvp())/dot_general")
STAGE = Stage("hlo(jit(grad(f)))", text="...", role="hlo", transform="jit",
              collectives=(ALL_REDUCE,))
