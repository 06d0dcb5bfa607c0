"""Device renderables: exact text with Console(color_system=None)."""
from __future__ import annotations

from device_records import REPLICATED, STAGE, batch_record
from rich.console import Console

from transforms.model import Call, CollectiveRecord, DeviceGroup, ShardBlock, ShardingRecord, Stage
from workbench.render.devices import CollectivesView, DevicesView, MeshGrid


def text(renderable, width=72) -> str:
    console = Console(color_system=None, width=width, record=True)
    console.print(renderable)
    return console.export_text()


def test_mesh_grid_shows_each_devices_block():
    assert text(MeshGrid(batch_record())) == (
        "x  float32[8,4]  P('data', None)  on data=2 × model=2  block [4,4]\n"
        "┌────────┬──────────┬──────────┐\n"
        "│        │ model=0  │ model=1  │\n"
        "├────────┼──────────┼──────────┤\n"
        "│ data=0 │  dev 0   │  dev 1   │\n"
        "│        │ [0:4, :] │ [0:4, :] │\n"
        "├────────┼──────────┼──────────┤\n"
        "│ data=1 │  dev 2   │  dev 3   │\n"
        "│        │ [4:8, :] │ [4:8, :] │\n"
        "└────────┴──────────┴──────────┘\n")


def test_a_replicated_array_is_said_once():
    assert text(MeshGrid(REPLICATED)) == (
        "out['w']  float32[4]  P()  on data=2 × model=2  replicated\n"
        "  whole array on every device (0,1,2,3)\n")


def test_a_layout_jax_refused_shows_its_note():
    record = ShardingRecord("input", "y", "float32[6]", "NamedSharding",
                            note="IndivisibleError: axis 0 of size 6 over 4 devices")
    assert text(MeshGrid(record)) == (
        "y  float32[6]\n"
        "  IndivisibleError: axis 0 of size 6 over 4 devices\n")


def test_collectives_of_a_stage():
    assert text(CollectivesView(STAGE)) == (
        "hlo(jit(grad(f)))  1 collective, 16 B per device\n"
        "#0 all-reduce  16 B per device  %all-reduce\n"
        "   result  f32[4]                                \n"
        "   devices {0,2} {1,3}                           \n"
        "   from    jit(loss)/transpose(jvp())/dot_general\n")


def test_collective_permute_pairs_and_unparsed_groups():
    permute = CollectiveRecord("collective-permute", "%cp", "f32[2]", "f32", 8,
                               (DeviceGroup((0, 1)), DeviceGroup((1, 0))), "{{0,1},{1,0}}",
                               "partition")
    unknown = CollectiveRecord("all-gather", "%ag", "f32[8]", "f32", 32, (), "new[spelling]")
    stage = Stage("hlo(jit(f))", role="hlo", collectives=(permute, unknown))
    assert text(CollectivesView(stage), width=80) == (
        "hlo(jit(f))  2 collectives, 40 B per device\n"
        "#0 collective-permute  8 B per device  %cp\n"
        "   result  f32[2]                     \n"
        "   devices {0→1} {1→0} (partition ids)\n"
        "#1 all-gather  32 B per device  %ag\n"
        "   result  f32[8]                       \n"
        "   devices new[spelling] (partition ids)\n")


def test_a_one_dimensional_mesh_is_a_column():
    blocks = tuple(ShardBlock(d, (2 * d,), (2 * d + 2,)) for d in range(3))
    record = ShardingRecord("input", "xs", "float32[6]", "NamedSharding", "P('data',)",
                            ("data",), (3,), (0, 1, 2), (2,), blocks)
    assert text(MeshGrid(record)) == (
        "xs  float32[6]  P('data',)  on data=3  block [2]\n"
        "┌────────┬──────────────┐\n"
        "│ data=0 │ dev 0  [0:2] │\n"
        "│ data=1 │ dev 1  [2:4] │\n"
        "│ data=2 │ dev 2  [4:6] │\n"
        "└────────┴──────────────┘\n")


def test_devices_view_groups_by_role_then_collectives():
    call = Call(0, "jit", "loss", None, stages=(STAGE,),
                shardings=(batch_record(), REPLICATED))
    out = text(DevicesView(call))
    assert out.splitlines()[0] == "inputs"
    assert out.index("inputs") < out.index("gradients") < out.index("collectives")
    assert "outputs" not in out
    assert "hlo(jit(grad(f)))  1 collective, 16 B per device" in out


def test_a_single_device_call():
    assert text(DevicesView(Call(0, "grad", "f", None))) == (
        "single device: no sharded arrays or collectives recorded\n")
