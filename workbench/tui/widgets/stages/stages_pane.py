"""The stages view: any two stages of a call side by side, the diff marked, stats on demand."""
from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from transforms.model import Call, Session, Stage, StageDiff, diff_stages

from .... import _safe_text as safe_text
from ....analysis import default_stage_pair
from ....render.stages import ChainView, GrowthPanel, StageStats
from ...guard import Guarded, guarded
from ...messages import Status
from ...navigation import composed_label, first_line
from ...texts import side_by_side
from .diff_list import DiffList
from .stage_text import StageText

# Stages whose equation counts multiply to more than this are aligned on demand (`d`):
# an exact alignment of two 16,500-equation stages takes seconds.
AUTO_DIFF_CELLS = 2_000_000


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


class StagesPane(Vertical):
    """`a`/`A` and `b`/`B` pick the two stages, `d` the aligned diff, `t` stats, `c` the chain,
    `w` the growth (equations against batch size) measured for the call."""

    DEFAULT_CSS = """
    StagesPane #stage-head { height: auto; max-height: 75%; padding: 0 1; background: $boost; }
    StagesPane #stage-sides { height: 1fr; }
    StagesPane DiffList { height: 1fr; display: none; }
    StagesPane #stage-extra { height: 45%; display: none; border-top: hkey $panel-lighten-2; }
    StagesPane.-diff DiffList { display: block; }
    StagesPane.-diff #stage-sides { display: none; }
    StagesPane.-extra #stage-extra { display: block; }
    """

    def __init__(self, session: Session | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session
        self.call: Call | None = None
        self.call_index = -1
        self.a = self.b = 0
        self.extra = ""  # "" | stats | chain
        self._diffs: dict[tuple[int, int, int], StageDiff | str] = {}

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

    # --- which call and stages --------------------------------------------------

    def show_call(self, call_index: int, call: Call) -> None:
        if call_index == self.call_index and call is self.call:
            return
        self.call, self.call_index = call, call_index
        self.a, self.b = default_stage_pair(call.stages)
        self._load()

    def _load(self) -> None:
        call = self.call
        if call is None:
            return
        stages = call.stages
        self.left.set_stage(self.call_index, self.a, stages[self.a] if stages else None)
        self.right.set_stage(self.call_index, self.b, stages[self.b] if stages else None)
        self._head()
        self._refresh_extra()
        self.query_one(DiffList).set_diff(None, None, None)
        if stages and (self.has_class("-diff") or self._cheap(stages[self.a], stages[self.b])):
            self._compute_diff(self.call_index, self.a, self.b)

    @staticmethod
    def _cheap(a: Stage, b: Stage) -> bool:
        """Diff at once only when quick: the alignment of big stages waits for `d`."""
        return len(a.eqns) * len(b.eqns) <= AUTO_DIFF_CELLS

    def _head(self, diff: StageDiff | str | None = None) -> None:
        call = self.call
        head = self.query_one("#stage-head", Static)
        if call is None or not call.stages:
            head.update(Text("this call recorded no stages (recorded with stages off: "
                             "record(stages=False) or workbench run --no-stages)", style="dim"))
            return
        n = len(call.stages)

        def side(key: str, i: int) -> Text:
            s = call.stages[i]
            count = f" {s.jaxpr.eqn_count} eqns" if s.jaxpr is not None else ""
            bad = "" if s.available else " unavailable"
            return Text.assemble((f"{key} ", "dim"), (first_line(s.name), "bold"),
                                 (f"{count}{bad} [{i + 1}/{n}]", "dim"))

        text = side("a:", self.a) + Text("   ") + side("b:", self.b)
        if diff is None and not self._cheap(call.stages[self.a], call.stages[self.b]):
            text.append("\nlarge stages: press d to align them", style="dim")
        elif isinstance(diff, StageDiff):
            text.append(f"\n{diff.summary()}", style="dim")
        elif isinstance(diff, str) and diff:
            text.append(f"\n{first_line(diff)}", style="dim")
        for line in stage_notes(call.stages[self.a], call.stages[self.b]):
            text.append("\n" + line, style="yellow")  # wrapped in full, never cut to a line
        head.update(text)

    def action_pick(self, side: str, delta: int) -> None:
        if self.call is None or not self.call.stages:
            return
        n = len(self.call.stages)
        if side == "a":
            self.a = (self.a + delta) % n
        else:
            self.b = (self.b + delta) % n
        self._load()

    # --- diff ---------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="stage-diff")
    def _compute_diff(self, call_index: int, a: int, b: int) -> None:
        key = (call_index, a, b)
        found = self._diffs.get(key)
        if found is None and self.call is not None:
            before, after = self.call.stages[a], self.call.stages[b]
            try:
                found = side_by_side(before, after) or diff_stages(before, after)
            except ValueError as e:  # a compiled or unavailable stage: nothing to align
                found = str(e)
            except Exception as e:  # the diff must not take the view down
                found = f"<diff-error: {type(e).__name__}: {e}>"
            self._diffs[key] = found
        self.app.call_from_thread(self._diff_ready, key, found)

    def _diff_ready(self, key: tuple[int, int, int], diff: StageDiff | str | None) -> None:
        if key != (self.call_index, self.a, self.b) or self.call is None:
            return  # the user moved on meanwhile
        self._head(diff)
        if not isinstance(diff, StageDiff):
            return
        before, after = self.call.stages[self.a], self.call.stages[self.b]
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
            self.toggle_class("-diff")
            if self.has_class("-diff") and self.call is not None and self.call.stages and \
                    (self.call_index, self.a, self.b) not in self._diffs:
                self._head("aligning the two stages…")
                self._compute_diff(self.call_index, self.a, self.b)
            target = self.query_one(DiffList) if self.has_class("-diff") else self.left
            target.focus()
            if self.has_class("-diff") and self.query_one(DiffList).diff is None:
                self.post_message(Status("no aligned diff for these two stages (see the header)"))
            return
        self.extra = "" if self.extra == what else what
        self.set_class(bool(self.extra), "-extra")
        self._refresh_extra()
        if self.extra == "growth" and self.call is not None and not self.call.growth:
            self.post_message(Status(self._no_growth()))

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
        a, b = call.stages[self.a], call.stages[self.b]
        body.update(guarded(lambda: Group(
            Text(a.name, style="bold underline"), Guarded(StageStats(a), "stats"),
            Text(b.name, style="bold underline"), Guarded(StageStats(b), "stats")), "stats"))

    # --- step <-> equation --------------------------------------------------------

    def focus_text(self) -> None:
        (self.query_one(DiffList) if self.has_class("-diff") else self.left).focus()
