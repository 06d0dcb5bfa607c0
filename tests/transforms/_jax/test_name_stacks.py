"""The door's name stacks (transforms/_jax/_sources.py), on the installed JAX: a NameStack's
text as JAX prints it and its scope path (its Scope elements, the Transform ones left out),
made once per distinct stack."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from transforms import _jax as _i


def test_a_name_stacks_scope_path_is_its_scopes_the_transformations_left_out():
    """Scopes (a module's or named_scope's names) are joined by `/` whatever transformations
    wrap them; a scope named as a transformation (`vmap`) or holding parentheses is a scope."""
    def f(x):
        with jax.named_scope("GPT"), jax.named_scope("attn"):
            y = jnp.sin(x)
        with jax.named_scope("vmap"), jax.named_scope("f(x)"):
            return y * 2.0

    grad_eqns = jax.make_jaxpr(jax.grad(f))(1.0).eqns
    facts = [_i.name_stack_facts(e.source_info.name_stack) for e in grad_eqns]
    assert facts[:2] == [("jvp(GPT)/attn", "GPT/attn")] * 2  # sin, cos
    assert ("transpose(jvp(vmap))/f(x)", "vmap/f(x)") in facts
    assert ("transpose(jvp(GPT))/attn", "GPT/attn") in facts
    (sin,) = jax.make_jaxpr(jax.vmap(jnp.sin))(jnp.ones(2)).eqns
    assert _i.name_stack_facts(sin.source_info.name_stack) == ("vmap()", "")
    # one stack, one answer: the same tuple for an equal stack met again
    assert _i.name_stack_facts(grad_eqns[1].source_info.name_stack) is facts[0]


def test_the_current_name_stack_gives_its_text_and_scope_path():
    from jax.extend import source_info_util
    with jax.named_scope("encoder"), source_info_util.transform_name_stack("jvp"):
        with jax.named_scope("layer_0"):
            assert _i.current_name_stack() == ("encoder/jvp(layer_0)", "encoder/layer_0")
    assert _i.current_name_stack() == ("", "")
