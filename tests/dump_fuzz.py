"""Mutating real session dumps, and every reader run on what still loads (tests/test_fuzz_dumps.py).

    dumps = real_dumps()                  # {name: text}: gallery recordings and staged calls
    for text in mutants(dumps, seed, n):  # truncations, byte flips, JSON mutations
        outcome = try_dump(text)          # loads and renders everywhere, or is refused

Run as a script for a long search: `python tests/dump_fuzz.py 2000 [seed]`.
"""
from __future__ import annotations

import copy
import dataclasses
import io
import json
import random
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from rich.console import Console

import transforms
from transforms.model import Session, loads

# Replacement values of every JSON type, and the numbers that break readers.
ODD_NUMBERS = (-1, 0, 1, 2, 7, 2**31, 2**62, 2**63, 10**12, 10**30, -(2**62), 3.5, 1e308)
ODD_VALUES = (None, True, False, "", "x", "\x1b]0;t\x07", "\udcff", [], [[]], {}, {"k": 1},
              *ODD_NUMBERS)


def real_dumps() -> dict[str, str]:
    """Dumps of real recordings covering every record type: trees, pairs, errors, mismatch,
    diagnostics, stages with sub-jaxprs, growth, shardings and collectives."""
    import jax
    import jax.numpy as jnp

    from workbench import gallery
    out = {}
    for name in ("grad_tanh", "ntcontainer_broken", "primal_tangent_mismatch",
                 "loop_vs_vmap", "sharded_training_step"):
        out[name] = _untimed(gallery.run_example(gallery.find(name)).session).to_json_text()

    def f(x, y):
        return jnp.sum(jax.lax.cond(x[0] > 0, jnp.sin, jnp.cos, x * y))

    with transforms.record(stages=True) as staged:
        transforms.jit(transforms.vmap(transforms.grad(f), in_axes=(0, None)))(
            jnp.ones((3, 2)), jnp.ones(2))
    staged.title = "staged vmap(grad(f)) under jit"
    out["staged"] = _untimed(staged).to_json_text()
    return out


def _untimed(session: Session) -> Session:
    """Timings differ from run to run; zeroed, the dumps (and so the mutants) are the same."""
    session.calls = [dataclasses.replace(c, stages=tuple(dataclasses.replace(s, seconds=0.0)
                                                         for s in c.stages))
                     for c in session.calls]
    return session


# --- mutations ----------------------------------------------------------------------------

def _paths(data: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every location in the JSON tree (containers and leaves)."""
    yield path
    if isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, (*path, i))
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, (*path, k))


def _get(data: Any, path: tuple) -> Any:
    for p in path:
        data = data[p]
    return data


def _set(data: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(data, path[:-1])[path[-1]] = value
    return data


def _mutate_value(r: random.Random, value: Any) -> Any:
    kind = r.random()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        pass
    elif kind < 0.5:  # an index or size nudged, or made huge or negative
        return r.choice((value + 1, value - 1, -value - 1, value * 1000, *ODD_NUMBERS))
    if isinstance(value, list) and value and kind < 0.8:
        v = list(value)
        op = r.randrange(4)
        i = r.randrange(len(v))
        if op == 0:
            v.insert(i, copy.deepcopy(v[i]))      # an item (a row, a step) duplicated
        elif op == 1:
            del v[i]                             # one removed (a row now too short)
        elif op == 2:
            v[i] = [v[i]]                        # nested one deeper
        else:
            v = v * r.choice((2, 3))             # all repeated
        return v
    if isinstance(value, dict) and value and kind < 0.8:
        v = dict(value)
        key = r.choice(list(v))
        op = r.randrange(3)
        if op == 0:
            del v[key]
        elif op == 1:
            v[key + r.choice(("_", "x", "\x1b"))] = v.pop(key)
        else:
            v["unknown_" + str(r.randrange(9))] = v[key]
        return v
    if isinstance(value, str) and kind < 0.7:
        return r.choice((value * 50, value + "\x1b[2J", value[:1], "\u202e" + value, "x" * 20_000))
    return r.choice(ODD_VALUES)


def json_mutant(r: random.Random, text: str) -> str:
    """One to three mutations of the JSON tree: types, indices, sizes, nesting, keys."""
    data = json.loads(text)
    paths = list(_paths(data))
    for _ in range(r.randint(1, 3)):
        path = r.choice(paths)
        try:
            data = _set(data, path, _mutate_value(r, _get(data, path)))
        except (KeyError, IndexError, TypeError):
            continue
    return json.dumps(data, separators=(",", ":"))


def text_mutant(r: random.Random, text: str) -> str:
    """Truncation, byte flips, a key written twice."""
    op = r.randrange(4)
    if op == 0:
        return text[:r.randrange(len(text))]
    if op == 1:
        b = bytearray(text.encode("utf-8"))
        for _ in range(r.randint(1, 4)):
            b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        return b.decode("utf-8", errors="surrogateescape")
    if op == 2:  # a duplicated key in the top object
        return text.replace('"title":', '"title":"dup","title":', 1)
    i = r.randrange(len(text))
    return text[:i] + r.choice("[]{},:\"0-e") + text[i:]


def layout_mutant(r: random.Random, text: str) -> str:
    """The Call rows' layout changed coherently, as another writer could: fields reordered,
    or one dropped (the loader fills a defaulted one, and must refuse a required one)."""
    data = json.loads(text)
    names = data["fields"]["Call"]
    order = list(range(len(names)))
    if r.random() < 0.5:
        r.shuffle(order)
    else:
        del order[r.randrange(len(order))]
    data["fields"]["Call"] = [names[i] for i in order]
    data["calls"] = [[row[i] for i in order] for row in data["calls"]]
    return json.dumps(data, separators=(",", ":"))


def mutants(dumps: dict[str, str], seed: int, count: int) -> Iterator[tuple[str, str]]:
    r = random.Random(seed)
    names = sorted(dumps)
    for n in range(count):
        name = r.choice(names)
        pick = r.random()
        mutate = json_mutant if pick < 0.7 else layout_mutant if pick < 0.8 else text_mutant
        yield f"{name}#{seed}.{n}", mutate(r, dumps[name])


# --- every reader -------------------------------------------------------------------------

@dataclass
class Outcome:
    loaded: bool
    error: str = ""


def render_everywhere(session: Session) -> None:
    """What `show`, every `graph` view and every TUI pane make of a session (no terminal).

    Raises whatever a reader raises; a renderer's `<render-error ...>` placeholder counts
    as a failure too."""
    from workbench.cli import _summary as summary
    from workbench.export import GraphOptions, collect
    from workbench.export._api import VIEWS
    from workbench.export.graphviz import to_dot
    from workbench.tui.navigation import CallIndex, Outline, source_roots
    from workbench.tui.tree_rows import call_tree_rows
    from workbench.tui.widgets.failure.failure_pane import failure_view
    from workbench.tui.widgets.pytree.pytree_pane import _diagnostic_lines
    from workbench.tui.widgets.step.step_pane import _step_view

    console = Console(width=120, file=io.StringIO(), color_system=None, record=True)
    for call in session.calls:
        console.print("\n".join(summary.summarize_call(call, with_steps=True)))
    outline = Outline(session)
    for row in range(min(len(outline), 2000)):
        outline.row(row)
    roots = source_roots(session)
    options = GraphOptions(max_nodes=400)
    for call in session.calls[:8]:
        index = CallIndex(call, roots)
        for pos in range(0, len(call.steps), max(1, len(call.steps) // 20)):
            console.print(_step_view(call, index, pos))
        console.print(failure_view(call, index))
        rows = call_tree_rows(call, 120)  # the pytree view's rows, as it draws them
        for row in range(len(rows)):
            console.print("".join(piece for piece, _ in rows[row].pieces))
        for line in _diagnostic_lines(call, console):
            console.print(line)
        _print_stages(console, call)
        _print_devices(console, call)
        for view in VIEWS:
            try:
                graph = collect(session, view, call.index, options=options)
            except Exception as e:  # refusals are ExportErrors, with a message
                if type(e).__name__ not in ("ExportError", "GraphTooLarge"):
                    raise
                continue
            to_dot(graph)
    text = console.export_text()
    if "render-error" in text:
        line = next(ln for ln in text.splitlines() if "render-error" in ln)
        raise AssertionError(f"a renderer failed: {line[:300]}")


def _print_stages(console: Console, call: Any) -> None:
    from workbench.render import StageView
    from workbench.tui.navigation import StageMap, stage_lines
    for stage in call.stages:
        console.print(StageView(stage))
        stage_lines(stage)
        StageMap(stage)


def _print_devices(console: Console, call: Any) -> None:
    from workbench.render.devices import DevicesView
    console.print(DevicesView(call))


def try_dump(text: str, seconds: float = 5.0,
             render: Callable[[Session], None] = render_everywhere) -> Outcome:
    """Load and render, checking what the issue promises; AssertionError when it breaks.

    NB: bounded in CPU time (the machines are shared: wall time depends on neighbours)."""
    start = time.process_time()
    try:
        session = loads(text, source="mutant.json")
    except transforms.SessionLoadError as e:
        assert len(str(e)) < 500, f"a {len(str(e))}-character message"
        return Outcome(False, str(e))
    render(session)
    elapsed = time.process_time() - start
    assert elapsed < seconds, f"took {elapsed:.1f} s of CPU"
    return Outcome(True)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    sys.setrecursionlimit(10_000)
    dumps = real_dumps()
    loaded = failed = 0
    from transforms.model import _schema as schema
    for name, text in mutants(dumps, seed, count):
        try:
            outcome = try_dump(text)
            loaded += outcome.loaded
            if outcome.loaded and json.loads(text)["schema_version"] == 2:
                data = json.loads(text)
                problems = schema.schema_problems(data, schema.session_schema(data["fields"]))
                if problems:
                    failed += 1
                    print(f"{name}: loads but fails the schema: {problems[0][:200]}")
        except Exception as e:
            failed += 1
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    print(f"{count} mutants, {loaded} loaded, {failed} failures")
