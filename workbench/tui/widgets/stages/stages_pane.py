"""The stages view: any two stages of a call side by side, the diff marked, stats on demand."""
from __future__ import annotations

from typing import NamedTuple

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import var
from textual.widgets import Static

from transforms.model import Call, Stage, StageDiff, diff_stages

from .... import _safe_text as safe_text
from ....analysis import default_stage_pair, no_stages_reason
from ....render.stages import ChainView, GrowthPanel, StageStats
from ...guard import Guarded, guarded
from ...messages import CallChosen, EquationChosen, Status
from ...navigation import Outline, Selection, composed_label, first_line
from ...texts import side_by_side
from ..common.selection_view import SelectionView
from .diff_list import DiffList
from .stage_text import StageText, stage_map

# Stages whose equation counts multiply to more than this are aligned on demand (`d`):
# an exact alignment of two 16,500-equation stages takes seconds.
AUTO_DIFF_CELLS = 2_000_000
DIFFS_KEPT = 32  # alignments kept, the least recently shown forgotten first


def growth_focus(growths) -> str | None:
    """The primitive the growth table counts: dot_general where the program has matrix
    products (the work that batching multiplies: the seed's six against three), else
    the one that grows most (GrowthPanel's default)."""
    for g in growths:
        for series in g.series:
            if any(bar.primitive == "dot_general" for p in series.points for bar in p.histogram):
                return "dot_general"
    return None


# The stages view's keys. The session screen binds them (they work wherever the focus is,
# so arrows keep moving the navigator while the stages follow), shown while this view is.
STAGE_KEYS = [
        Binding("a", "pick('a', 1)", "Next left stage"),
        Binding("A", "pick('a', -1)", "Previous left stage", show=False),
        Binding("b", "pick('b', 1)", "Next right stage"),
        Binding("B", "pick('b', -1)", "Previous right stage", show=False),
        Binding("d", "toggle('diff')", "Aligned diff"),
        Binding("t", "toggle('stats')", "Stats"),
        Binding("c", "toggle('chain')", "Chain", show=False),
        Binding("w", "toggle('growth')", "Growth with batch size", show=False),
]


def stage_notes(a: Stage, b: Stage) -> list[str]:
    """The two stages' notes (the branch of Python control flow they are, a custom body
    staged from its rule, ...), terminal-safe: what both say once, then each side's own."""
    x, y = a.note, b.note
    if x == y:
        notes = [x] if x else []
    elif y and x.startswith(y):  # the group's note, then what only a's stage says
        notes = [y, "a: " + x[len(y):].lstrip(". ")]
    elif x and y.startswith(x):
        notes = [x, "b: " + y[len(x):].lstrip(". ")]
    else:
        notes = [f"{side}: {note}" for side, note in (("a", x), ("b", y)) if note]
    return [safe_text.terminal(note) for note in notes]


class StagePair(NamedTuple):
    """The two stages side by side: positions in the stages of call `call`."""
    call: int
    a: int
    b: int


class StagesPane(Vertical, SelectionView):
    """`a`/`A` and `b`/`B` pick the two stages, `d` the aligned diff, `t` stats, `c` the chain,
    `w` the growth (equations against batch size) measured for the call."""

    VIEW = "stages"
    DEFAULT_CSS = """
    StagesPane #stage-head { height: auto; max-height: 75%; padding: 0 1; background: $boost; }
    StagesPane #stage-sides { height: 1fr; }
    StagesPane DiffList { height: 1fr; display: none; }
    StagesPane #stage-extra { height: 45%; display: none; border-top: hkey $panel-lighten-2; }
    StagesPane.-diff DiffList { display: block; }
    StagesPane.-diff #stage-sides { display: none; }
    StagesPane.-extra #stage-extra { display: block; }
    """

    pair: var[StagePair | None] = var(None, init=False)
    aligned: var[bool] = var(False, init=False, toggle_class="-diff")  # the aligned diff shown
    extra: var[str] = var("", init=False)  # "" | stats | chain | growth, under the stages

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline
        self.session = outline.session
        # Alignments made, by stage pair: aligning two big stages takes seconds.
        self._diffs: LRUCache[StagePair, StageDiff | str] = LRUCache(DIFFS_KEPT)

    def compose(self) -> ComposeResult:
        yield Static(id="stage-head")
        with Horizontal(id="stage-sides"):
            yield StageText(id="stage-a")
            yield StageText(id="stage-b")
        yield DiffList(id="stage-diff")
        with VerticalScroll(id="stage-extra"):
            yield Static(id="stage-extra-body")

    @property
    def left(self) -> StageText:
        return self.query_one("#stage-a", StageText)

    @property
    def right(self) -> StageText:
        return self.query_one("#stage-b", StageText)

    @property
    def call(self) -> Call | None:
        """The call whose stages are shown."""
        return self.session.calls[self.pair.call] if self.pair is not None else None

    # --- following the navigator --------------------------------------------------

    def watch_selection(self, old: Selection | None, new: Selection | None) -> None:
        if new is not None and (old is None or new.call != old.call) and \
                self.session.calls[new.call].stages:
            # Load the call's stages even while hidden (the view is laid out all along): their
            # lines are indexed and their scrollbars placed before the user switches, so the
            # switch itself is one frame.
            self.show_call(new.call)
        self.stale = True
        self._catch_up()

    def show_selection(self, selection: Selection) -> None:
        self.show_call(selection.call)
        self._show_step(selection)

    def show_call(self, call_index: int) -> None:
        """Show a call's stages: its default pair, unless it is the call shown already."""
        if self.pair is None or self.pair.call != call_index:
            stages = self.session.calls[call_index].stages
            self.pair = StagePair(call_index, *default_stage_pair(stages))

    def _show_step(self, selection: Selection) -> None:
        """Put each stage's cursor on the equation the selected step became, as recorded."""
        call = self.call
        if call is None or selection.step is None or not call.stages:
            return
        step = call.steps[selection.step]
        index = self.outline.index(selection.call)
        for text in (self.left, self.right):
            if text.map is not None:
                text.show_eqn(text.map.eqn_of_step(step, index.step_at))

    # --- which stages -------------------------------------------------------------

    def watch_pair(self) -> None:
        self._load()

    def _load(self) -> None:
        call, pair = self.call, self.pair
        if call is None or pair is None:
            return
        stages = call.stages
        self.left.set_stage(pair.call, pair.a, stages[pair.a] if stages else None)
        self.right.set_stage(pair.call, pair.b, stages[pair.b] if stages else None)
        for text in (self.left, self.right):  # the values and NaN findings of replays
            text.set_call_facts(call)
        self._head()
        self._refresh_extra()
        self.query_one(DiffList).set_diff(None, None, None)
        if stages and (self.aligned or self._cheap(stages[pair.a], stages[pair.b])):
            self._align(pair)

    @staticmethod
    def _cheap(a: Stage, b: Stage) -> bool:
        """Diff at once only when quick: the alignment of big stages waits for `d`."""
        return len(a.eqns) * len(b.eqns) <= AUTO_DIFF_CELLS

    def _head(self, diff: StageDiff | str | None = None) -> None:
        call, pair = self.call, self.pair
        head = self.query_one("#stage-head", Static)
        if call is None or pair is None or not call.stages:
            why = no_stages_reason(call) if call is not None else "no call chosen"
            head.update(Text(f"this call recorded no stages ({why})", style="dim"))
            return
        n = len(call.stages)

        def side(key: str, i: int) -> Text:
            s = call.stages[i]
            count = f" {s.jaxpr.eqn_count} eqns" if s.jaxpr is not None else ""
            bad = "" if s.available else " unavailable"
            return Text.assemble((f"{key} ", "dim"), (first_line(s.name), "bold"),
                                 (f"{count}{bad} [{i + 1}/{n}]", "dim"))

        a, b = call.stages[pair.a], call.stages[pair.b]
        text = side("a:", pair.a) + Text("   ") + side("b:", pair.b)
        if diff is None and not self._cheap(a, b):
            text.append("\nlarge stages: press d to align them", style="dim")
        elif isinstance(diff, StageDiff):
            text.append(f"\n{diff.summary()}", style="dim")
        elif isinstance(diff, str) and diff:
            text.append(f"\n{first_line(diff)}", style="dim")
        for line in stage_notes(a, b):
            text.append("\n" + line, style="yellow")  # wrapped in full, never cut to a line
        head.update(text)

    def action_pick(self, side: str, delta: int) -> None:
        call, pair = self.call, self.pair
        if call is None or pair is None or not call.stages:
            return
        n = len(call.stages)
        if side == "a":
            self.pair = pair._replace(a=(pair.a + delta) % n)
        else:
            self.pair = pair._replace(b=(pair.b + delta) % n)

    # --- diff ---------------------------------------------------------------------

    def _align(self, pair: StagePair) -> None:
        """Mark the pair's differences: at once if aligned before, else from a worker."""
        found = self._diffs.get(pair)
        if found is not None:
            self._diff_ready(pair, found)
            return
        self._compute_diff(pair)

    # NB: the worker takes the pair, not the stages: Textual describes a worker by the
    # repr of its arguments, and a 16,500-equation stage's took 150 ms.
    @work(thread=True, exclusive=True, group="stage-diff")
    def _compute_diff(self, pair: StagePair) -> None:
        stages = self.session.calls[pair.call].stages
        before, after = stages[pair.a], stages[pair.b]
        found: StageDiff | str
        try:
            found = side_by_side(before, after) or diff_stages(before, after)
        except ValueError as e:  # a compiled or unavailable stage: nothing to align
            found = str(e)
        except Exception as e:  # the diff must not take the view down
            found = f"<diff-error: {type(e).__name__}: {e}>"
        self.app.call_from_thread(self._diff_ready, pair, found)

    def _diff_ready(self, pair: StagePair, diff: StageDiff | str) -> None:
        self._diffs.set(pair, diff)
        call = self.call
        if pair != self.pair or call is None:
            return  # the user moved on meanwhile
        if not self.query("#stage-head"):
            return  # the app closed while the worker aligned: nothing left to mark
        self._head(diff)
        if not isinstance(diff, StageDiff):
            return
        before, after = call.stages[pair.a], call.stages[pair.b]
        left, right = {}, {}
        for row in diff.rows:
            if row.kind == "same":
                continue
            if row.before is not None:
                left[row.before] = row.kind
            if row.after is not None:
                right[row.after] = row.kind
        self.left.set_marks(left)
        self.right.set_marks(right)
        self.query_one(DiffList).set_diff(diff, before, after)

    # --- toggles ------------------------------------------------------------------

    def action_toggle(self, what: str) -> None:  # type: ignore[override]  # our own action
        if what == "diff":
            self.aligned = not self.aligned
            return
        self.extra = "" if self.extra == what else what
        if self.extra == "growth" and self.call is not None and not self.call.growth:
            having = [c.index for c in self.session.calls if c.growth] if self.session else []
            if having:  # the growth lives on another call: go there (the one after this, first)
                later = [i for i in having if i > self.call.index]
                target = (later or having)[0]
                self.post_message(CallChosen(target))
                self.post_message(Status(f"growth with batch size: call {target} "
                                         f"{composed_label(self.session.calls[target])}"))
            else:
                self.post_message(Status(self._no_growth()))

    def watch_aligned(self, aligned: bool) -> None:
        call, pair = self.call, self.pair
        if aligned and call is not None and pair is not None and call.stages and \
                pair not in self._diffs:
            self._head("aligning the two stages…")
            self._align(pair)
        diff_list = self.query_one(DiffList)
        (diff_list if aligned else self.left).focus()
        if aligned and diff_list.diff is None:
            self.post_message(Status("no aligned diff for these two stages (see the header)"))

    def watch_extra(self, extra: str) -> None:
        self.set_class(bool(extra), "-extra")
        self._refresh_extra()

    def _no_growth(self) -> str:
        """Why the growth panel is empty here, and which calls have growth data."""
        having = [c for c in (self.session.calls if self.session else ()) if c.growth]
        names = ", ".join(f"{c.index} {composed_label(c)}" for c in having[:4])
        where = ("no call of this session has any (transforms.growth(...) measures it)"
                 if not having else
                 f"call{'s' if len(having) > 1 else ''} {names} "
                 f"{'have' if len(having) > 1 else 'has'} it")
        return f"no growth data for this call: {where}"

    def _refresh_extra(self) -> None:
        body = self.query_one("#stage-extra-body", Static)
        call = self.call
        if self.extra == "growth" and call is not None and not call.growth:
            body.update(Text(self._no_growth(), style="dim"))
            return
        if self.extra == "growth" and call is not None:
            body.update(guarded(lambda: GrowthPanel(call.growth, growth_focus(call.growth)),
                                "growth"))
            return
        if not self.extra or call is None or not call.stages:
            body.update("")
            return
        if self.extra == "chain":
            body.update(guarded(lambda: ChainView(call.stages), "chain"))
            return
        pair = self.pair
        if pair is None:
            return
        a, b = call.stages[pair.a], call.stages[pair.b]
        body.update(guarded(lambda: Group(
            Text(a.name, style="bold underline"), Guarded(StageStats(a), "stats"),
            Text(b.name, style="bold underline"), Guarded(StageStats(b), "stats")), "stats"))

    # --- step <-> equation --------------------------------------------------------

    def origin(self, chosen: EquationChosen) -> tuple[int | None, str]:
        """The position of the step an equation was staged from (None if not recorded), and
        what to say about it."""
        call = self.session.calls[chosen.call]
        stage = call.stages[chosen.stage]
        smap = next((t.map for t in (self.left, self.right)
                     if t.stage_index == chosen.stage and t.map is not None), None)
        step_index = (smap or stage_map(stage)).step_of_eqn(chosen.eqn)
        if step_index is None:
            return None, (f"equation {chosen.eqn} of {stage.name} was not staged from a "
                          f"recorded step" if stage.eqn_steps else
                          f"{stage.name} has no recorded link from its equations to the steps")
        index = self.outline.index(chosen.call)
        pos = index.step_position(step_index)
        if pos is None:
            return None, (f"equation {chosen.eqn} of {stage.name} came from step "
                          f"#{step_index}, which this call did not record")
        level = index.level_by_index.get(call.steps[pos].level)
        return pos, (f"equation {chosen.eqn} of {stage.name}: step #{step_index}"
                     + (f" at {level.label}" if level is not None else ""))

    def focus_text(self) -> None:
        (self.query_one(DiffList) if self.aligned else self.left).focus()
