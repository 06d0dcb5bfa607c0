"""A small GPT in flax linen, as its users write it: token and position embeddings, blocks of
causal self-attention and an MLP, one adamw step under jax.jit. `workbench run` it to see the
navigator group the step's steps by module (GPT/blocks_1/attn ...)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

VOCAB, CONTEXT, WIDTH, HEADS, LAYERS = 32, 8, 16, 2, 2


class SelfAttention(nn.Module):
    heads: int

    @nn.compact
    def __call__(self, x):
        t, width = x.shape[-2:]
        qkv = nn.Dense(3 * width, name="qkv")(x)
        q, k, v = jnp.split(qkv.reshape(t, 3, self.heads, -1), 3, axis=1)
        scores = jnp.einsum("qhd,khd->hqk", q[:, 0], k[:, 0]) / jnp.sqrt(q.shape[-1])
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))
        weights = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
        out = jnp.einsum("hqk,khd->qhd", weights, v[:, 0]).reshape(t, width)
        return nn.Dense(width, name="proj")(out)


class Block(nn.Module):
    heads: int

    @nn.compact
    def __call__(self, x):
        x = x + SelfAttention(self.heads, name="attn")(nn.LayerNorm(name="ln_1")(x))
        h = nn.gelu(nn.Dense(4 * x.shape[-1], name="fc")(nn.LayerNorm(name="ln_2")(x)))
        return x + nn.Dense(x.shape[-1], name="out")(h)


class GPT(nn.Module):
    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(VOCAB, WIDTH, name="wte")(tokens)
        x = x + nn.Embed(CONTEXT, WIDTH, name="wpe")(jnp.arange(tokens.shape[0]))
        for i in range(LAYERS):
            x = Block(HEADS, name=f"blocks_{i}")(x)
        return nn.Dense(VOCAB, name="head")(nn.LayerNorm(name="ln_f")(x))


model = GPT()
tokens = jnp.arange(CONTEXT + 1) % VOCAB
params = model.init(jax.random.key(0), tokens[:-1])
tx = optax.adamw(1e-3)
opt_state = tx.init(params)


@jax.jit
def train_step(params, opt_state, tokens):
    def loss(params):
        logits = model.apply(params, tokens[:-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[1:]).mean()

    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value


params, opt_state, value = train_step(params, opt_state, tokens)
print(f"loss {float(value):.4f}")
