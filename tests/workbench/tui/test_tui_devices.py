"""The TUI's devices view, driven with Pilot, on hand-made records of a sharded call."""
from __future__ import annotations

from device_records import REPLICATED, STAGE, batch_record
from tui_sessions import SIZE, build_app, missing_view_says, seed_logistic, sync, view_body

from transforms.model import Call, Session
from workbench.tui.widgets.devices.devices_pane import DevicesPane

SHARDED = Session(calls=[Call(0, "jit", "loss", None, stages=(STAGE,),
                              shardings=(batch_record(), REPLICATED))])


@sync
async def test_devices_view_shows_the_mesh_grid_and_collectives():
    app = build_app(SHARDED, title="sharded")
    async with app.run_test(size=(100, 40)) as pilot:
        body = await view_body(app, pilot, "5", "devices", DevicesPane, "#devices-body")
        assert "x  float32[8,4]  P('data', None)  on data=2 × model=2  block [4,4]" in body
        assert "│ data=1 │  dev 2   │  dev 3   │" in body
        assert "hlo(jit(grad(f)))  1 collective, 16 B per device" in body


@sync
async def test_a_single_device_session_has_no_devices_tab():
    app = build_app(seed_logistic(), title="t")
    async with app.run_test(size=SIZE) as pilot:
        assert "ran on one device" in await missing_view_says(app, pilot, "5", DevicesPane)
