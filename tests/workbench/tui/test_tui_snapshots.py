"""How the TUI looks: pytest-textual-snapshot snapshots of each main view on seed examples.

Recordings and jaxprs differ between JAX releases, so the snapshots live in one
folder per JAX version (`__snapshots__/jax<version>/test_tui_snapshots/`). A release with
no folder of its own is compared with the newest folder before it (a JAX release that
changes nothing the views show needs none). Update after looking at the report, in each
venv: `pytest tests/workbench/tui/test_tui_snapshots.py --snapshot-update` writes the
installed release's own folder; it deletes the other versions' folders as unused, so
restore those with `git checkout tests/workbench/tui/__snapshots__/`.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jax
import pytest
from pytest_textual_snapshot import SVGImageExtension
from repo_paths import ROOT
from tui_sessions import seed_absolute, seed_convolve, seed_logistic, wait_until

from transforms.model import Session
from workbench.tui import build_app
from workbench.tui.widgets.navigator.step_list import StepList


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    # Source paths show relative to the working directory: the repository's root here.
    monkeypatch.chdir(ROOT)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def snapshot_folder(root: Path, version: str, updating: bool) -> str:
    """The folder under `root` whose snapshots this JAX release is compared with: its own,
    else the newest release's before it; its own when the snapshots are being updated."""
    own = f"jax{version}"
    if updating or (root / own).is_dir():
        return own
    known = [p.name for p in root.glob("jax*") if p.is_dir()]
    earlier = [name for name in known if _release(name) <= _release(version)]
    return max(earlier, key=_release, default=own)


class _PerJaxSVG(SVGImageExtension):
    """Snapshots in a folder per JAX version: jaxprs differ between releases."""

    updating = False  # set from pytest's --snapshot-update by the `snapshot` fixture

    @classmethod
    def dirname(cls, *, test_location) -> str:
        # NB: syrupy relates a snapshot to its test by the folder holding it, so the
        # version folder goes above the test module's: jax<version>/test_tui_snapshots/.
        default = Path(super().dirname(test_location=test_location))
        folder = snapshot_folder(default.parent, jax.__version__, cls.updating)
        return str(default.parent / folder / default.name)


class _Snapshots:
    """The snapshot assertion, handing snap_compare the per-version extension."""

    def __init__(self, snapshot):
        self._snapshot = snapshot

    def use_extension(self, extension_class=None):
        return self._snapshot.use_extension(_PerJaxSVG)


@pytest.fixture
def snapshot(snapshot, request):
    # NB: syrupy sees the other JAX version's folder as unused snapshots and would fail
    # the run; unused snapshots only warn here (no other test in the suite uses syrupy).
    request.config.option.warn_unused_snapshots = True
    _PerJaxSVG.updating = bool(request.config.option.update_snapshots)
    return _Snapshots(snapshot)


def _stable(session: Session) -> Session:
    """The session with run-dependent text (object ids) made stable."""
    def fix(text: str) -> str:
        return re.sub(r"object id \d+", "object id N", text)

    calls = []
    for c in session.calls:
        errors = tuple(dataclasses.replace(e, message=fix(e.message)) for e in c.errors)
        steps = tuple(s._replace(error=fix(s.error)) if s.error else s for s in c.steps)
        calls.append(dataclasses.replace(c, steps=steps, errors=errors))
    return Session(calls=calls, jax_version="", python_version="")


def _app(session, title="seed"):
    app = build_app(_stable(session), title=title)
    app.animation_level = "none"
    return app


def test_a_release_without_snapshots_is_compared_with_the_one_before(tmp_path):
    for name in ("jax0.10.2", "jax0.11.2", "jax0.12.0.1"):
        (tmp_path / name).mkdir()
    assert snapshot_folder(tmp_path, "0.11.2", updating=False) == "jax0.11.2"
    assert snapshot_folder(tmp_path, "0.12.1", updating=False) == "jax0.12.0.1"
    assert snapshot_folder(tmp_path, "0.13.0", updating=False) == "jax0.12.0.1"
    assert snapshot_folder(tmp_path, "0.12.0", updating=False) == "jax0.11.2"
    assert snapshot_folder(tmp_path, "0.12.1", updating=True) == "jax0.12.1"
    assert snapshot_folder(tmp_path, "0.9.2", updating=False) == "jax0.9.2"


def test_step_view(snap_compare):
    # The first tanh at vmap#1/grad#2: a GradTracer whose primal is vmap's batched value.
    assert snap_compare(_app(seed_logistic(), "vmap(grad(loss))"), terminal_size=(100, 32),
                        press=["slash", *"grad", "enter", "slash", *"tanh", "enter"])


def test_step_view_80x24(snap_compare):
    assert snap_compare(_app(seed_logistic(), "vmap(grad(loss))"), terminal_size=(80, 24),
                        press=["down", "down"])


async def _stages_aligned(pilot) -> None:
    """The stages view, once its two stages are aligned (in a worker) and marked."""
    # NB: run_before runs as the app starts: a key before the navigator has the focus
    # would go into the filter line.
    await wait_until(pilot, lambda: isinstance(pilot.app.focused, StepList),
                     "the navigator to take the focus")
    await pilot.press("2")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_stages_view(snap_compare):
    assert snap_compare(_app(seed_convolve(), "vmap(convolve)"), terminal_size=(100, 32),
                        run_before=_stages_aligned)


def test_aligned_diff(snap_compare):
    assert snap_compare(_app(seed_logistic(), "vmap(grad(loss))"), terminal_size=(100, 32),
                        run_before=_stages_aligned, press=["d"])


def test_failure_view(snap_compare):
    assert snap_compare(_app(seed_absolute(), "vmap(absolute)"), terminal_size=(100, 32),
                        press=["4"])


def test_pytree_view(snap_compare):
    assert snap_compare(_app(seed_logistic(), "vmap(grad(loss))"), terminal_size=(100, 24),
                        press=["3"])


def test_session_picker(snap_compare):
    app = build_app([("vmap(grad(loss))", _stable(seed_logistic())),
                     ("vmap(absolute) fails", _stable(seed_absolute())),
                     ("vmap(convolve)", _stable(seed_convolve()))])
    assert snap_compare(app, terminal_size=(80, 12))


def test_help_screen(snap_compare):
    assert snap_compare(_app(seed_logistic()), terminal_size=(80, 40), press=["question_mark"])


def _gallery_session(name: str) -> Session:
    from workbench.gallery import find, run_example
    session = run_example(find(name)).session
    stable = _stable(session)
    # what the example printed names its files by absolute path: relative to the repository
    stable.title = session.title
    stable.metadata = {k: v.replace(f"{ROOT}/", "") for k, v in session.metadata.items()}
    return stable


def test_story_and_pytree_of_the_ntcontainer_gradient(snap_compare):
    # The example's description above the views, and grad's NTContainer with its ones.
    app = build_app(_gallery_session("ntcontainer_fixed"), title="NTContainer")
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(110, 30), press=["G", "3"])


def test_output_view(snap_compare):
    app = build_app(_gallery_session("ntcontainer_broken"), title="NTContainer, broken")
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(110, 30), press=["6"])
