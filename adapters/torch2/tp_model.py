"""paradiff's GPT (adapters/torch/model.py) under DTensor tensor parallelism (docs/TORCH2.md).

Megatron's layout, as torch's own tensor-parallel API writes it: every linear layer is an
nn.Linear that parallelize_module partitions, ColwiseParallel for attn.q, the key and value halves
of attn.kv (two layers, so that each rank holds its own key and value heads), mlp.fc1 / gate / up,
and RowwiseParallel for attn.proj and mlp.fc2 (whose all-reduce ends each branch); the token
embedding and the output head are vocabulary-parallel DTensors (Shard(0)), the embedding through
DTensor's masked lookup and the loss through loss_parallel's vocabulary-parallel cross entropy;
everything else (norms, row-parallel biases, position embeddings) a Replicate DTensor. The
residual stream is a replicated DTensor. The arithmetic is model.Gpt's where the layout allows:
parameters cast to the compute dtype where it casts them, logits in float32.

With sequence parallelism (sp) the residual stream is a Shard(1) DTensor (each rank its positions):
the column-parallel layers gather the sequence (ColwiseParallel(input_layouts=Shard(1))), the
row-parallel ones reduce-scatter it (RowwiseParallel(output_layouts=Shard(1))), the embedding's
partial sum is reduce-scattered along the sequence, and the final norm's output is gathered before
the vocabulary-parallel head. DTensor then leaves the replicated parameters' gradients unreduced
(norms and row-parallel biases Partial(sum), embed.wpe Shard(0)), and the optimizer state SGD
derives from them stays so: `partial_addend` makes each a full-shape addend for the run dir's
partial pieces (docs/TARGETS.md).

`entries()` names each parameter as paradiff does: (name, part, first row within it, parameter);
attn.kv is two parts, its key rows at 0 and its value rows after them.
"""
import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, loss_parallel,
                                               parallelize_module)

from model import LAYER_NORM_EPS, attend


def cast(t, dtype):  # Numerics::In, as model.Gpt.inp
    return t if t.dtype == dtype else t.to(dtype)


class Linear(torch.nn.Linear):
    """An nn.Linear (what the parallel styles partition) holding paradiff's tensors and casting
    them to the compute dtype as model.Gpt.linear does (the bias cast first)."""

    def __init__(self, weight, bias, exec_dtype):
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = weight.size(1), weight.size(0)
        self.weight = torch.nn.Parameter(weight.clone())
        self.bias = torch.nn.Parameter(bias.clone()) if bias is not None else None
        self.exec = exec_dtype

    def forward(self, x):
        if self.bias is None:
            return F.linear(x, cast(self.weight, self.exec))
        bias = cast(self.bias, self.exec)
        return F.linear(x, cast(self.weight, self.exec), bias)


def partial_addend(param, value):
    """`value` (the gradient of `param`, or optimizer state derived from it) as this rank's
    full-shape addend when DTensor left it unreduced for a replicated parameter (a Partial(sum)
    local tensor, or a Shard's rows with zeros elsewhere); None when it is reduced (or the
    parameter is not replicated)."""
    if not isinstance(value, DTensor) or not isinstance(param, DTensor):
        return None
    if not all(isinstance(x, Replicate) for x in param.placements):
        return None
    if all(isinstance(x, Replicate) for x in value.placements):
        return None
    if any(isinstance(x, Partial) for x in value.placements):
        return value.to_local().detach().clone()
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    shape, offset = compute_local_shape_and_global_offset(value.shape, value.device_mesh,
                                                          value.placements)
    full = torch.zeros(value.shape, dtype=value.dtype)
    full[tuple(slice(o, o + n) for o, n in zip(offset, shape))] = value.to_local().detach()
    return full


class TpGpt(torch.nn.Module):
    """The whole model, or (under a pipeline) layers [lo, hi) with the embeddings when `first`
    and the head when `last`; `names` are the parameters it holds."""

    def __init__(self, model_cfg, names, tensors, exec_dtype, mesh, sp=False, lo=0, hi=None,
                 first=True, last=True):
        super().__init__()
        m = self.m = model_cfg
        self.exec, self.mesh, self.sp = exec_dtype, mesh, sp
        self.lo, self.first, self.last = lo, first, last
        hi = m["layers"] if hi is None else hi
        seq = Shard(1) if sp else Replicate()  # the residual stream's placement
        hd = m["hidden"] // m["heads"]
        self.kv_rows = m["kv_heads"] * hd  # rows of the key half of attn.kv
        self.blocks = torch.nn.ModuleList()
        self._entries = []
        linears = set()
        for i in range(lo, hi):
            b = "blocks.%d." % i
            blk = torch.nn.ModuleDict()
            kvw, kvb = tensors[b + "attn.kv.weight"], tensors[b + "attn.kv.bias"]
            blk["q"] = Linear(tensors[b + "attn.q.weight"], tensors[b + "attn.q.bias"], exec_dtype)
            blk["k"] = Linear(kvw[:self.kv_rows], kvb[:self.kv_rows], exec_dtype)
            blk["v"] = Linear(kvw[self.kv_rows:], kvb[self.kv_rows:], exec_dtype)
            blk["proj"] = Linear(tensors[b + "attn.proj.weight"], None, exec_dtype)
            mlp = ["gate", "up"] if m["activation"] == "swiglu" else ["fc1"]
            for n in mlp:
                bias = tensors.get(b + "mlp.%s.bias" % n)
                blk[n] = Linear(tensors[b + "mlp.%s.weight" % n], bias, exec_dtype)
            blk["fc2"] = Linear(tensors[b + "mlp.fc2.weight"], None, exec_dtype)
            plan = {n: ColwiseParallel(input_layouts=seq) for n in ["q", "k", "v"] + mlp}
            # the residual stays a DTensor
            plan["proj"] = RowwiseParallel(output_layouts=seq, use_local_output=False)
            plan["fc2"] = RowwiseParallel(output_layouts=seq, use_local_output=False)
            parallelize_module(blk, mesh, plan)
            self.blocks.append(blk)
            owners = {b + "attn.q": "q", b + "attn.proj": "proj", b + "mlp.fc2": "fc2"}
            owners.update({b + "mlp." + n: n for n in mlp})
            for prefix, mod in owners.items():
                for kind in ("weight", "bias"):
                    if getattr(blk[mod], kind) is not None:
                        linears.add(prefix + "." + kind)
                        self._entries.append((prefix + "." + kind, "", 0, blk[mod], kind))
            for kind in ("weight", "bias"):
                linears.add(b + "attn.kv." + kind)
                self._entries.append((b + "attn.kv." + kind, "k", 0, blk["k"], kind))
                self._entries.append((b + "attn.kv." + kind, "v", self.kv_rows, blk["v"], kind))
        # The rest: vocabulary-parallel embedding and head, everything else replicated.
        self.rest = torch.nn.ParameterList()
        self.index = {}
        for n in names:
            if n in linears:
                continue
            place = [Shard(0)] if n in ("embed.wte", "head.lm_head.weight") else [Replicate()]
            self.index[n] = len(self.rest)
            self.rest.append(torch.nn.Parameter(distribute_tensor(tensors[n].clone(), mesh, place)))
            self._entries.append((n, "", 0, self.rest, str(len(self.rest) - 1)))
        order = {n: k for k, n in enumerate(names)}
        self._entries.sort(key=lambda e: (order[e[0]], e[2]))

    def entries(self):  # looked up now: fully_shard replaces the parameters it shards
        return [(n, part, row, getattr(owner, attr)) for n, part, row, owner, attr in self._entries]

    def p(self, name):
        return self.rest[self.index[name]]

    def inp(self, t):
        return cast(t, self.exec)

    def layer_norm(self, prefix, x):
        bias = self.inp(self.p(prefix + ".bias"))
        weight = self.inp(self.p(prefix + ".weight"))
        return F.layer_norm(x, (x.size(-1),), weight, bias, LAYER_NORM_EPS)

    def attention(self, blk, x):  # on this rank's heads: q, k, v are local tensors
        m = self.m
        bs, s = x.size(0), x.size(1)
        hd = m["hidden"] // m["heads"]
        q = blk["q"](x)
        H = q.size(-1) // hd
        q = q.view(bs, s, H, hd).transpose(1, 2)
        k, v = blk["k"](x), blk["v"](x)
        K = k.size(-1) // hd
        k = k.view(bs, s, K, hd).transpose(1, 2)
        v = v.view(bs, s, K, hd).transpose(1, 2)
        return blk["proj"](attend(q, k, v))

    def mlp(self, blk, x):
        if self.m["activation"] == "swiglu":
            h = F.silu(blk["gate"](x)) * blk["up"](x)
        else:
            h = F.gelu(blk["fc1"](x))
        return blk["fc2"](h)

    def embed(self, inputs):
        """The residual stream entering the first block: a DTensor, Shard(1) under sp."""
        m = self.m
        bs, s = inputs.size(0), inputs.size(1)
        # A masked partial sum over vocab shards; under sp reduce-scattered along the sequence (the
        # ids keep their [batch, seq] shape, as the mask the reduction applies does).
        ids = DTensor.from_local(inputs if self.sp else inputs.reshape(-1), self.mesh, [Replicate()])
        h = F.embedding(ids, self.inp(self.p("embed.wte")))
        if self.sp:
            h = h.redistribute(self.mesh, [Shard(1)])
        else:
            h = h.redistribute(self.mesh, [Replicate()]).view(bs, s, m["hidden"])
        if m["position_embeddings"]:
            h = h + self.inp(self.p("embed.wpe")).unsqueeze(0)
        return h

    def run_blocks(self, h):
        for i, blk in enumerate(self.blocks):
            b = "blocks.%d" % (self.lo + i)
            a = self.attention(blk, self.layer_norm(b + ".ln1", h))
            h = h + (a + self.inp(self.p(b + ".attn.proj.bias")))
            f = self.mlp(blk, self.layer_norm(b + ".ln2", h))
            h = h + (f + self.inp(self.p(b + ".mlp.fc2.bias")))
        return h

    def logits(self, h):
        """float32 logits [tokens, vocab] through the vocabulary-parallel head: Shard(-1)."""
        m = self.m
        head = "embed.wte" if m["tied_embeddings"] else "head.lm_head.weight"
        x = self.layer_norm("head.ln_f", h)
        if self.sp:
            x = x.redistribute(self.mesh, [Replicate()])  # the whole sequence for the vocab shards
        logits = F.linear(x, self.inp(self.p(head)))  # Shard(-1): vocab
        return logits.to(torch.float32).reshape(-1, m["vocab"])

    def forward(self, inputs, targets):
        logits = self.logits(self.run_blocks(self.embed(inputs)))
        tg = DTensor.from_local(targets.reshape(-1), self.mesh, [Replicate()])
        return F.cross_entropy(logits, tg)  # under loss_context(), with its backward

    def loss_context(self):
        return loss_parallel()


class TpChunk(TpGpt):
    """A pipeline chunk of TpGpt (adapters/torch2/pipeline.py): plain tensors between stages, the
    local residual stream (this rank's positions under sp) entering as the DTensor it left as; the
    last chunk's vocabulary-parallel logits gathered over tp for the schedule's loss."""

    def forward(self, x):
        if self.first:
            h = self.embed(x)
        else:
            h = DTensor.from_local(x, self.mesh, [Shard(1) if self.sp else Replicate()])
        h = self.run_blocks(h)
        if not self.last:
            return h.to_local()
        return self.logits(h).full_tensor()
