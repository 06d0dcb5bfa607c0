"""A dump is untrusted input: mutated real dumps either load and render everywhere, or are refused.

Seeded and bounded (48 mutants, at most 30 s of CPU) (the mutations and readers are in tests/dump_fuzz.py;
`python tests/dump_fuzz.py 5000` runs a long search). For each mutant of a real
recording (truncated, bytes flipped, JSON values of other types, indices and sizes
nudged or made huge, rows duplicated, nested or cut, keys dropped, renamed or
repeated, the Call layout reordered or narrowed): either `load` raises
SessionLoadError with a message under 500 characters, or the session renders in
`show`, every `graph` view and every TUI pane with no error and in bounded time,
and `schema --validate` accepts it too.
"""
from __future__ import annotations

import json
import time

import dump_fuzz
import pytest
from tui_sessions import sync

from transforms.model import _schema as schema, loads
from workbench.cli import _main as cli

SEED = 17
MUTANTS = 48        # about 0.1 s of CPU each: a few seconds per Python
CPU_SECONDS = 30.0  # a bound in case readers get slow: the loop stops there


@pytest.fixture(scope="module")
def dumps():
    return dump_fuzz.real_dumps()


@pytest.mark.slow
def test_every_real_dump_loads_renders_and_validates(dumps):
    for name, text in dumps.items():
        assert dump_fuzz.try_dump(text).loaded, name
        data = json.loads(text)
        assert schema.schema_problems(data, schema.session_schema(data["fields"])) == [], name


def test_mutated_dumps_load_and_render_or_are_refused_briefly(dumps):
    loaded = refused = 0
    start = time.process_time()
    for name, text in dump_fuzz.mutants(dumps, SEED, MUTANTS):
        try:
            outcome = dump_fuzz.try_dump(text)
        except Exception as e:
            raise AssertionError(f"mutant {name}: {type(e).__name__}: {str(e)[:300]}") from e
        if outcome.loaded:
            loaded += 1
            data = json.loads(text)
            if data["schema_version"] == 2:  # what `schema --validate` checks after loading
                problems = schema.schema_problems(data, schema.session_schema(data["fields"]))
                assert problems == [], f"mutant {name} loads but fails the schema: {problems}"
        else:
            refused += 1
        if time.process_time() - start > CPU_SECONDS:
            break
    # Both outcomes are exercised, so the test can fail either way.
    assert loaded >= 3 and refused >= 3, (loaded, refused)


def test_the_cli_agrees_with_the_loader_on_mutants(dumps, tmp_path, capsys):
    """`show` and `schema --validate` on files: exit 0 exactly when the loader reads the file."""
    for n, (name, text) in enumerate(dump_fuzz.mutants(dumps, SEED + 1, 24)):
        path = tmp_path / f"m{n}.json"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            loads(path.read_text(encoding="utf-8"))
            readable = True
        except Exception:
            readable = False
        assert cli.main(["schema", "--validate", str(path)]) == (0 if readable else 2), name
        assert cli.main(["show", str(path), "--steps"]) == (0 if readable else 2), name
        err = capsys.readouterr().err
        assert "Traceback" not in err and all(len(line) < 600 for line in err.splitlines())


@pytest.mark.slow
@sync
async def test_the_tui_opens_loaded_mutants_and_shows_every_pane(dumps):
    """The real app on a few mutants that load: every view, and the keys that move in them."""
    from workbench.tui import build_app
    shown = 0
    for _name, text in dump_fuzz.mutants(dumps, SEED + 2, 60):
        if not dump_fuzz.try_dump(text, render=lambda s: None).loaded:
            continue
        app = build_app(loads(text))
        app.animation_level = "none"
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("end", "x", "2", "d", "t", "3", "4", "5", "1", "home", "j", "k")
            await pilot.pause()
        shown += 1
        if shown == 3:
            break
    assert shown == 3
