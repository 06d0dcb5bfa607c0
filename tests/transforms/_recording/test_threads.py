"""Calls made in threads (issue 37, item 2): a thread started inside a record() block records
into that block, each call labelled with its thread's name; a thread with a block of its own
records there; a call a thread makes after its block ended is counted, not lost silently."""
from __future__ import annotations

import json
import sys
import threading

import jax.numpy as jnp

import transforms as T
from transforms.model import load
from workbench.cli import main as workbench_main


def _in_threads(target, count: int) -> None:
    threads = [threading.Thread(target=target, args=(i,), name=f"worker-{i}")
               for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_threads_started_in_a_block_record_into_it_with_their_names():
    with T.record() as session:
        _in_threads(lambda i: T.grad(jnp.tanh)(float(i)), 3)
        T.jit(jnp.sin)(1.0)
    assert [c.index for c in session.calls] == [0, 1, 2, 3]
    assert sorted(c.thread for c in session.calls) == \
        ["MainThread", "worker-0", "worker-1", "worker-2"]
    assert session.calls[3].transform == "jit" and session.calls[3].thread == "MainThread"
    assert all(c.ok and c.steps for c in session.calls)


def test_a_thread_started_inside_a_call_records_a_call_of_its_own():
    seen = []

    def f(x):
        t = threading.Thread(target=lambda: seen.append(T.grad(jnp.cos)(2.0)), name="inner")
        t.start()
        t.join()
        return jnp.sin(x)

    with T.record() as session:
        T.grad(f)(1.0)
    # The thread's call opens after f's and ends first: calls stay in index order.
    assert [(c.index, c.function.rsplit(".", 1)[-1], c.thread) for c in session.calls] == [
        (0, "f", "MainThread"), (1, "cos", "inner")]
    assert float(seen[0]) == float(-jnp.sin(2.0))


def test_a_call_after_the_block_ended_is_counted_not_recorded():
    go, done = threading.Event(), threading.Event()

    def late() -> None:
        go.wait()
        T.grad(jnp.tanh)(1.0)
        done.set()

    with T.record() as session:
        thread = threading.Thread(target=late, name="late")
        thread.start()
    go.set()
    done.wait(60)
    thread.join()
    assert session.calls == [] and session.unrecorded_calls == 1
    assert session.unrecorded_note() == (
        "1 calls were not recorded: they were made in threads after the record() block they "
        "were started in had ended")


def test_threads_outside_every_block_are_left_as_they_are():
    before = threading.Thread.start
    with T.record():
        assert threading.Thread.start is not before
    assert threading.Thread.start is before
    got = []
    _in_threads(lambda i: got.append(T.grad(jnp.tanh)(1.0)), 1)
    assert len(got) == 1


def test_the_thread_is_saved_and_shown(tmp_path, capsys):
    with T.record() as session:
        _in_threads(lambda i: T.grad(jnp.tanh)(1.0), 1)
    session.unrecorded_calls = 2
    path = tmp_path / "t.json"
    session.save(path)
    loaded = load(path)
    assert loaded.calls[0].thread == "worker-0" and loaded.unrecorded_calls == 2
    assert workbench_main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "call 0: grad(tanh) at " in out and " in thread worker-0  [ok]" in out
    assert ("not recorded: 2 calls were not recorded: they were made in threads after the "
            "record() block they were started in had ended") in out


def test_a_dump_without_threads_loads(tmp_path):
    with T.record() as session:
        T.grad(jnp.tanh)(1.0)
    data = json.loads(session.to_json_text())
    del data["lazy_at"]
    fields = data["fields"]["Call"]
    position = fields.index("thread")
    del fields[position]
    for row in data["calls"]:
        del row[position]
    del data["unrecorded_calls"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    loaded = load(path)
    assert loaded.calls[0].thread == "" and loaded.unrecorded_calls == 0


def test_workbench_dump_records_every_thread(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text(
        "import threading\nimport jax, jax.numpy as jnp\n"
        "ts = [threading.Thread(target=jax.grad(jnp.tanh), args=(float(i),), name=f'w{i}')\n"
        "      for i in range(3)]\n"
        "for t in ts: t.start()\n"
        "for t in ts: t.join()\n"
        "jax.jit(jnp.sin)(1.0)\n")
    out = tmp_path / "t.json"
    assert workbench_main(["dump", str(script), "-o", str(out)]) == 0
    session = load(out)
    assert sorted(c.thread for c in session.calls) == ["MainThread", "w0", "w1", "w2"]


def test_vjp_pullbacks_in_threads_belong_to_their_own_forward_call():
    """The pullback vjp returns records its calls with the forward call that made it, taken
    from that call itself: another thread's call may finish between the two."""
    def work(i):
        for k in range(6):
            _, pullback = T.vjp(lambda x: jnp.sin(x) * (i + k), jnp.ones(3))
            pullback(jnp.ones(3))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: calls interleave
    try:
        with T.record() as session:
            _in_threads(work, 4)
    finally:
        sys.setswitchinterval(switch)
    by_index = {c.index: c for c in session.calls}
    backward = [c for c in session.calls if c.transform == "vjp_backward"]
    assert len(backward) == 24 and len(session.calls) == 48
    for call in backward:
        forward = by_index[call.parent]
        assert (forward.transform, forward.thread) == ("vjp", call.thread)
