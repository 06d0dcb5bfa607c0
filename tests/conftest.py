"""Eight CPU devices for the whole run, so sharded programs can be tested.

NB: XLA reads the flag once, when JAX first creates its CPU backend; conftest
is imported before any test module imports JAX. A flag the user already set
for the run is kept.
"""
import os

_DEVICES_FLAG = "--xla_force_host_platform_device_count"

if _DEVICES_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_DEVICES_FLAG}=8").strip()
