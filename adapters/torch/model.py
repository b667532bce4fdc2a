"""paradiff's GPT (kernels/model.cpp GptForward) in PyTorch, op for op, so that at world 1 in fp32
the loss and the gradients are bitwise equal to paradiff's same-precision reference.

Parameters are one flat ParameterList in paradiff's model order (core/model_spec.h), named by
`names`; `exec_dtype` is the compute dtype (precision.compute): parameters are cast to it where the
reference's Numerics::In casts them, and the logits go to float32 for the loss.
"""
import math

import torch
import torch.nn.functional as F

LAYER_NORM_EPS = 1e-5


def layer_partition(cfg, chunks):
    """Layers per pipeline chunk as parallel.partition states it: an explicit list, else equal
    counts with the remainder on the first chunks (core's uniform partition)."""
    p, layers = cfg["parallel"]["partition"], cfg["model"]["layers"]
    if isinstance(p, list):
        return list(p)
    base, extra = divmod(layers, chunks)
    return [base + (1 if c < extra else 0) for c in range(chunks)]


class Gpt(torch.nn.Module):
    def __init__(self, model_cfg, names, tensors, exec_dtype):
        self.init_fields(model_cfg, names, exec_dtype)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.params = torch.nn.ParameterList([torch.nn.Parameter(tensors[n].clone()) for n in self.names])

    def init_fields(self, model_cfg, names, exec_dtype):
        """The module's set-up and the model's fields, without parameters: for a subclass that
        registers them elsewhere (and overrides p and named)."""
        torch.nn.Module.__init__(self)
        self.m = model_cfg
        self.names = list(names)
        self.exec = exec_dtype

    def named(self):
        return [(n, self.params[i]) for i, n in enumerate(self.names)]

    def p(self, name):
        return self.params[self.index[name]]

    def inp(self, t):  # Numerics::In
        return t if t.dtype == self.exec else t.to(self.exec)

    def linear(self, x, w, b=None):
        if b is None:
            return F.linear(x, self.inp(self.p(w)))
        # C++ evaluates at::linear's arguments right to left: the bias cast is created first.
        bias = self.inp(self.p(b))
        return F.linear(x, self.inp(self.p(w)), bias)

    def layer_norm(self, prefix, x):
        bias = self.inp(self.p(prefix + ".bias"))
        weight = self.inp(self.p(prefix + ".weight"))
        return F.layer_norm(x, (x.size(-1),), weight, bias, LAYER_NORM_EPS)

    def attention(self, b, x):
        m = self.m
        bs, s = x.size(0), x.size(1)
        hd = m["hidden"] // m["heads"]
        H = self.p(b + ".attn.q.weight").size(0) // hd
        K = self.p(b + ".attn.kv.weight").size(0) // (2 * hd)
        q = self.linear(x, b + ".attn.q.weight", b + ".attn.q.bias").view(bs, s, H, hd).transpose(1, 2)
        kv = self.linear(x, b + ".attn.kv.weight", b + ".attn.kv.bias")
        k = kv.narrow(-1, 0, K * hd).view(bs, s, K, hd).transpose(1, 2)
        v = kv.narrow(-1, K * hd, K * hd).view(bs, s, K, hd).transpose(1, 2)
        return self.linear(attend(q, k, v), b + ".attn.proj.weight")

    def mlp(self, b, x):
        if self.m["activation"] == "swiglu":
            gate = self.linear(x, b + ".mlp.gate.weight")
            up = self.linear(x, b + ".mlp.up.weight")
            h = F.silu(gate) * up
        else:
            h = F.gelu(self.linear(x, b + ".mlp.fc1.weight", b + ".mlp.fc1.bias"))
        return self.linear(h, b + ".mlp.fc2.weight")

    def block(self, b, h):  # transformer block `b` ("blocks.<i>")
        a = self.attention(b, self.layer_norm(b + ".ln1", h))
        h = h + (a + self.inp(self.p(b + ".attn.proj.bias")))
        f = self.mlp(b, self.layer_norm(b + ".ln2", h))
        return h + (f + self.inp(self.p(b + ".mlp.fc2.bias")))

    def run_block(self, i, h):  # where block i runs (a subclass may run it as a submodule)
        return self.block("blocks.%d" % i, h)

    def token_embedding(self, inputs):
        h = self.inp(self.p("embed.wte")).index_select(0, inputs.reshape(-1))
        return h.view(inputs.size(0), inputs.size(1), self.m["hidden"])

    def position_embedding(self, h):
        return h + self.inp(self.p("embed.wpe")).unsqueeze(0)

    def logits(self, h, weight):  # h after the final layer norm, through `weight`, in float32
        return self.linear(h, weight).to(torch.float32).reshape(-1, self.m["vocab"])

    def head_weight(self):
        return "embed.wte" if self.m["tied_embeddings"] else "head.lm_head.weight"

    def forward(self, inputs, targets):
        h = self.token_embedding(inputs)
        if self.m["position_embeddings"]:
            h = self.position_embedding(h)
        for i in range(self.m["layers"]):
            h = self.run_block(i, h)
        return loss(self.logits(self.layer_norm("head.ln_f", h), self.head_weight()), targets)


# The target option under which the DeepSpeed and torch 2 adapters run each block under
# activation checkpointing (docs/TARGETS.md, "options").
ACTIVATION_CHECKPOINTING = "adapter.activation_checkpointing"


def torch_checkpoint(how):
    """torch.utils.checkpoint.checkpoint as run(fn, h) for checkpointed(): `how` "torch"
    (use_reentrant False) or "torch_reentrant" (True)."""
    import torch.utils.checkpoint  # only where a config asks for it
    reentrant = {"torch": False, "torch_reentrant": True}[how]
    return lambda fn, h: torch.utils.checkpoint.checkpoint(fn, h, use_reentrant=reentrant)


def checkpointed(cls, name, run):
    """cls (Gpt or a subclass) whose blocks run through run(fn, h), an activation-checkpoint function
    that recomputes fn in backward; `checkpointing` names it and `block_runs` counts the blocks run
    (twice per layer and micro-step when each is recomputed)."""
    class Checkpointed(cls):
        checkpointing = name
        block_runs = 0

        def run_block(self, i, h):
            def fn(x):
                self.block_runs += 1
                return super(Checkpointed, self).run_block(i, x)

            return run(fn, h)

    return Checkpointed


def attend(q, k, v):
    """Causal attention of q [bs, H, s, hd] over k, v [bs, K, s, hd] (each key / value head shared by
    H / K query heads): [bs, s, H * hd]."""
    bs, H, s, hd = q.shape
    K = k.size(1)
    if K < H:
        k = k.repeat_interleave(H // K, 1)
        v = v.repeat_interleave(H // K, 1)
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(float(hd)))
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, -math.inf)
    probs = torch.softmax(scores, -1)
    return torch.matmul(probs, v).transpose(1, 2).reshape(bs, s, H * hd)


def loss(logits, targets):  # the mean cross entropy of float32 logits (paradiff's loss)
    return F.nll_loss(torch.log_softmax(logits, -1), targets.reshape(-1))
