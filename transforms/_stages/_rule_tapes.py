"""Custom rules' bodies replayed from what they bound when they ran: a tape per rule and
argument signature (RuleTapes), why one cannot stand for its rule (RuleNotRun).
"""
from __future__ import annotations

import functools
from typing import Any

import jax

from .. import _jax as _i
from ._tape import Entry, Tape, abstract, is_array_like

# How each is named in a sentence.
RULE_ROLES: dict[str, str] = {
    "custom_jvp_fun": "the body of a custom_jvp function",
    "custom_jvp_rule": "a custom_jvp rule",
    "custom_vjp_fun": "the body of a custom_vjp function",
    "custom_vjp_fwd": "a custom_vjp fwd rule",
    "custom_vjp_bwd": "a custom_vjp bwd rule",
}


# Why a rule may not have run when a stage needs it.
_NOT_RUN_HINTS: dict[str, str] = {
    "custom_vjp_bwd": (" (a bwd rule runs in the backward pass: after jax.vjp, when its "
                       "pullback is called, later than the vjp call's stages are made)"),
}


class RuleNotRun(RuntimeError):
    """A stage needs a custom rule at argument types it never ran at during the call."""


def _arg_signature(x: Any) -> Any:
    if is_array_like(x):
        t = abstract(x)
        return (t.shape, str(t.dtype), t.weak_type)
    if x is None or isinstance(x, (bool, int, str)):
        return ("value", type(x), x)
    aval = getattr(x, "aval", None)  # a symbolic zero
    return ("object", type(x), str(aval)) if aval is not None else ("id", id(x))


def rule_name(fun: Any) -> str:
    """The user's function inside a rule (a WrappedFun, maybe around a partial)."""
    f = _i.innermost_function(fun)
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


class RuleTapes:
    """What each custom_jvp/custom_vjp body and rule bound the first time it ran
    in a call, at each argument signature; stages replay them instead of the
    user's rules.

    A function is known by what JAX caches it by (its Python function and
    transformations, see `_i.rule_identity`), so the body a rule ran through
    `f(x)` is the body the outer custom call holds. A body that never ran (grad
    calls the rule only) is staged as the primal part of its rule, and the
    stage says so (`notes`); a rule that never ran stops the stages needing it.
    """

    def __init__(self) -> None:
        self._tapes: dict[tuple, Tape] = {}
        self._by_fun: dict[tuple, list[Tape]] = {}
        self.notes: list[str] = []  # substituted bodies, in the order they were staged
        # Kinds of rules a stage needed that had not run (a bwd before vjp's pullback runs).
        self.not_run: set[str] = set()

    def _key(self, kind: str, fun: Any, args: tuple) -> tuple | None:
        identity = _i.rule_identity(fun)
        if identity is None:
            return None
        try:
            key = (kind, identity, tuple(map(_arg_signature, args)))
            hash(key)
        except Exception:  # an unhashable argument: the rule runs unrecorded
            return None
        return key

    def start(self, kind: str, fun: Any, args: tuple, late: bool = False) -> Tape | None:
        """A rule is about to run in the call: a tape on its first run at these types.

        `late`: it runs in a later call (a bwd in vjp's pullback), after the capture.
        """
        key = self._key(kind, fun, args)
        if key is None or key in self._tapes:
            return None
        tape = self._tapes[key] = Tape(rule_name(fun), args, {}, rules=self)
        tape.signature = key[2]
        tape.late = late
        self._by_fun.setdefault(key[:2], []).append(tape)
        return tape

    def _usable(self, tape: Tape | None, leaves: dict[int, Any]) -> bool:
        """The tape can stand for its rule, replayed with these input leaves (by index)."""
        return (tape is not None and tape.replayable and not tape.closure_types
                and tape.reads_known_at(leaves))

    def replayed(self, entry: Entry) -> tuple:
        """The entry's rule functions, each replaying its tape."""
        kinds = entry.rule_kinds
        if len(kinds) != len(entry.rules):
            return entry.rules
        return tuple(_i.wrapped_like(functools.partial(self._run, kind, fun, entry), fun)
                     for kind, fun in zip(kinds, entry.rules))

    def _run(self, kind: str, fun: Any, entry: Entry, *args: Any) -> Any:
        key = self._key(kind, fun, args)
        tape = self._tapes.get(key) if key is not None else None
        if self._usable(tape, dict(enumerate(jax.tree_util.tree_leaves((args, {}))))):
            return tape.replay(*args)  # type: ignore[union-attr]
        body = _i.jaxpr_body(fun) if kind.endswith("_fun") else None
        if body is not None:  # the jaxpr JAX holds for it: what JAX itself traces there
            return body(*args)
        if kind.endswith("_fun") and tape is None:
            found = self._primal_part(entry, args)
            if found is not None:
                return found
        if key is None:  # it may well have run: what it bound could not be kept
            why = ("its function could not be told apart from others (a static argument "
                   "of it that will not hash), so what it bound when it ran was not kept")
        elif tape is None:
            self.not_run.add(kind)
            why = "it did not run at this call at these argument types" + \
                _NOT_RUN_HINTS.get(kind, "")
            ran = self._rule_that_ran(entry) if kind.endswith("_fun") else None
            if ran is not None:  # its rule ran in its place, but cannot stand for it
                why = (f"it did not run at this call ({ran.function}, its "
                       f"{_role_of_rule(entry)}, ran instead, and cannot stand for it: "
                       f"{_unusable(ran)})")
        else:
            why = _unusable(tape)
        raise RuleNotRun(f"{rule_name(fun)} ({RULE_ROLES.get(kind, kind)}) cannot be staged: "
                         f"{why}, and stages never run the user's Python again")

    def _rule_that_ran(self, entry: Entry) -> Tape | None:
        """A tape of the custom call's rule (its jvp rule or fwd), which ran in place of its
        body, though it cannot stand for it (`_primal_part` found none usable)."""
        return next((t for t in self._tapes_of_rule(entry) if not t.late and (
            not t.replayable or t.ambiguous or t.closure_types)), None)

    def _tapes_of_rule(self, entry: Entry) -> list[Tape]:
        """The tapes of a custom call's rule that runs in place of its body (its jvp rule,
        its fwd), at every signature it ran at."""
        kind, rule = entry.rule_kinds[1], entry.rules[1]
        return self._by_fun.get((kind, _i.rule_identity(rule)), [])

    def _primal_part(self, entry: Entry, args: tuple) -> list | None:
        """A body that never ran, as the primal outputs of its rule that did (noted)."""
        kind, types = entry.rule_kinds[1], [_arg_signature(a) for a in args]
        n = len(args)
        for tape in self._tapes_of_rule(entry):
            if kind == "custom_jvp_rule":  # (*primals, *tangents) -> (*primals_out, *tangents_out)
                positions = list(range(n))
                outputs = slice(0, len(tape.out_refs) // 2)
            else:  # fwd: (p0, perturbed0, p1, ...) -> (*residuals, *primals_out)
                positions = list(range(0, 2 * n, 2))
                n_out = _i.custom_vjp_out_count(entry.params)
                if n_out is None:
                    continue
                outputs = slice(len(tape.out_refs) - n_out, None)
            given = dict(zip(positions, args))
            if not self._usable(tape, given):
                continue
            signature = tape.signature or ()
            if [signature[i] if i < len(signature) else None for i in positions] != types:
                continue
            found = tape.replay_part(outputs, given)
            if found is not None:
                body = rule_name(entry.rules[0])
                self.notes.append(
                    f"{body}'s body did not run at this call ({tape.function}, its "
                    f"{_role_of_rule(entry)}, "
                    f"ran instead), and stages never run your Python again: the {entry.kind} "
                    f"body shown here is the part of {tape.function} that computes {body}'s "
                    f"outputs.")
                return found
        return None

    def release(self) -> None:
        for tape in self._tapes.values():
            tape.release()

    def late_tapes(self) -> list[Tape]:
        return [t for t in self._tapes.values() if t.late]

    def forget_late(self) -> None:
        """Drop the tapes of rules that ran late (their call failed): as if they never ran."""
        for key in [k for k, t in self._tapes.items() if t.late]:
            tape = self._tapes.pop(key)
            self._by_fun.get(key[:2], []).remove(tape)

    def tapes(self) -> list[Tape]:
        """Every rule tape of the call (their entries name the steps they were)."""
        return list(self._tapes.values())


def _role_of_rule(entry: Entry) -> str:
    """The rule running in place of a custom call's body, as its role reads after "its":
    `custom_vjp fwd rule`."""
    return RULE_ROLES[entry.rule_kinds[1]].partition(" ")[2]


def _unusable(tape: Tape) -> str:
    if tape.problem:
        return tape.problem
    if tape.returned_itself:
        return (f"its step {tape.returned_itself_by} ran on concrete arrays and returned its "
                f"input array itself (as an identity's impl does), so which of the two, the "
                f"input or the step's result, each later step read is not known")
    if tape.ambiguous:
        return ("it was given one array as two of its arguments (as `jvp(f, (x,), (x,))` "
                "does) and this replay gives it two, so which one each of its steps read is "
                "not known")
    return "it reads values computed outside it (a closure), which a replay cannot give it"


