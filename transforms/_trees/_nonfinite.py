"""What made a NaN or Inf: ONE table of known causes (NONFINITE_RULES), each a test over the
facts of the equation that first made one from finite inputs, and the hint that names the fix.
Plain data in, a (rule, hint) pair out: the replay that finds the equation is _recording's."""
from __future__ import annotations

from typing import Callable, NamedTuple

from ..model import ValueSummary

__all__ = ["NONFINITE_RULES", "INPUTS_RULE", "NonFiniteFacts", "explain_nonfinite"]


class NonFiniteFacts(NamedTuple):
    """The equation that made the first NaN or Inf from finite inputs, as data."""
    primitive: str
    phase: str                # forward | backward
    name_stack: str           # "jvp()", "transpose(jvp())"
    inputs: tuple[ValueSummary | None, ...]
    outputs: tuple[ValueSummary | None, ...]
    has_where: bool           # the replayed program selects with jnp.where (select_n)

    @property
    def derivative(self) -> bool:
        """Made while differentiating: a jvp's rule, or the backward pass."""
        return "jvp" in self.name_stack or "transpose" in self.name_stack

    def input(self, i: int) -> ValueSummary | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def makes_nan(self) -> bool:
        return any(o is not None and o.nan for o in self.outputs)


class NonFiniteRule(NamedTuple):
    name: str
    applies: Callable[[NonFiniteFacts], bool]
    hint: str


def _zero_or_less(s: ValueSummary | None) -> bool:
    return s is not None and (s.zeros > 0 or (s.min is not None and s.min < 0))


def _infinite_input(f: NonFiniteFacts) -> bool:
    return any(s is not None and s.inf for s in f.inputs)


def _has_zero(s: ValueSummary | None) -> bool:
    return s is not None and s.zeros > 0


_SINGULAR = ("sqrt", "rsqrt", "log", "log1p", "div", "pow", "integer_pow", "acos", "asin",
             "atan2", "cbrt")

# First match wins: the most specific first.
NONFINITE_RULES: tuple[NonFiniteRule, ...] = (
    NonFiniteRule(
        "where_gradient_trap",
        lambda f: f.has_where and f.derivative and (
            f.primitive in _SINGULAR or (f.primitive == "mul" and _infinite_input(f))),
        "jnp.where(c, f(x), y) computes f(x) at every x, the untaken points too, and so does "
        "its derivative: an infinite or NaN derivative there times the zero cotangent jnp.where "
        "gives it is NaN. Use the double where, so that f never sees those points: "
        "jnp.where(c, f(jnp.where(c, x, safe)), y), safe a value where f is finite (1.0 for "
        "sqrt and log)."),
    NonFiniteRule(
        "sqrt_at_zero_or_below",
        lambda f: f.primitive in ("sqrt", "rsqrt") and _zero_or_less(f.input(0)),
        "sqrt of a negative value is NaN, and its derivative 0.5/sqrt(x) is infinite at 0: "
        "keep the argument positive (jnp.sqrt(x + eps), or jnp.maximum(x, eps))."),
    NonFiniteRule(
        "log_at_zero_or_below",
        lambda f: f.primitive in ("log", "log1p") and _zero_or_less(f.input(0)),
        "log(0) is -inf and log of a negative value NaN; its derivative 1/x is infinite at 0: "
        "keep the argument positive (jnp.log(x + eps), jnp.log(jnp.maximum(x, eps))), or use "
        "jax.nn.log_softmax / jax.scipy.special.xlogy where they fit."),
    NonFiniteRule(
        "div_by_zero",
        lambda f: f.primitive == "div" and _has_zero(f.input(1)),
        "a division by zero (x/0 is inf, 0/0 NaN). Under grad it is often a derivative: of a "
        "quotient, of sqrt (0.5/sqrt(x)) or of a norm at 0. Guard the denominator "
        "(jnp.where(d == 0, 1.0, d)) or add an epsilon."),
    NonFiniteRule(
        "pow_at_zero",
        lambda f: f.primitive in ("pow", "integer_pow") and _has_zero(f.input(0)),
        "x ** p at x = 0: a negative p is infinite, and for p < 1 the derivative p * x ** (p-1) "
        "is: keep x away from 0 (jnp.maximum(x, eps) ** p)."),
    NonFiniteRule(
        "exp_overflow",
        lambda f: f.primitive in ("exp", "exp2", "expm1", "cosh", "sinh"),
        "exp overflowed the dtype (float32 above about 88.7): subtract the maximum first "
        "(jax.nn.logsumexp, jax.nn.softmax do), or clip the argument."),
    NonFiniteRule(
        "nan_from_infinities",
        lambda f: f.makes_nan() and f.primitive in ("sub", "add", "mul"),
        "inf - inf or 0 * inf: values grew out of the dtype's range before this step."),
    NonFiniteRule(
        "overflow",
        lambda f: not f.makes_nan(),
        "a finite computation overflowed the dtype's range: scale the values, or compute in "
        "a wider dtype."),
)

# The hint when the call's inputs already held a NaN or Inf.
INPUTS_RULE = NonFiniteRule(
    "nan_in_inputs", lambda f: True,
    "a NaN or Inf was already in the call's inputs: it came from an earlier computation "
    "(an earlier call, the data, or an optimizer step that diverged).")


def explain_nonfinite(facts: NonFiniteFacts) -> tuple[str, str]:
    """(rule, hint) of the first known cause that fits; ("", "") for none."""
    for rule in NONFINITE_RULES:
        if rule.applies(facts):
            return rule.name, rule.hint
    return "", ""
