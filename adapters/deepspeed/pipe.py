"""deepspeed.pipe for adapter.py when parallel.pp > 1 (docs/DEEPSPEED.md, "Pipeline parallelism").

paradiff's GPT as the layer list a DeepSpeed user writes for a PipelineModule: the token embedding
(a TiedLayerSpec under key "embed" when the embeddings are tied), the position embedding, one
layer per transformer block, the final layer norm and the head (the tied embedding's module again,
with a forward_fn that applies it as the output projection, or the untied lm_head). Each layer runs
adapters/torch/model.py's own ops over its parameters, so the arithmetic is the single-device
model's, op for op. Stages follow parallel.partition (the blocks per stage; the first stage also
holds the embeddings, the last the head): PipelineModule's partition methods cannot express an
explicit list, so Partitioned sets its `parts` from it. DeepSpeed runs its own schedule
(TrainSchedule, 1F1B without interleaving); a target file that uses this declares
"schedules": ["gpipe", "1f1b"] (the order of the micro-batches' backwards, and so every float sum
paradiff compares, is the same under both).

DeepSpeed owns the tied weight: it broadcasts it from the first stage at construction and sums its
two gradients over the tied stages (ReduceTiedGrads) before the step; it marks the last stage's
copy ds_pipe_replicated so that its norm counts it once.
"""
import functools

import torch

from model import Gpt, layer_partition, loss


class Part(Gpt):
    """model.Gpt's methods over the parameters `own` only; `kind` picks the forward."""

    def __init__(self, model_cfg, own, tensors, exec_dtype, kind, block=-1):
        super().__init__(model_cfg, own, tensors, exec_dtype)
        self.kind, self.block_index = kind, block

    def forward(self, x):  # Gpt.forward's ops, cut at the layer's boundaries
        if self.kind == "wte":
            return self.token_embedding(x)
        if self.kind == "wpe":
            return self.position_embedding(x)
        if self.kind == "block":
            return self.run_block(self.block_index, x)
        if self.kind == "ln_f":
            return self.layer_norm("head.ln_f", x)
        return self.logits(self.layer_norm("head.ln_f", x), "head.lm_head.weight")  # "head"


def tied_head(part, h):  # TiedLayerSpec forward_fn: the embedding applied as the output projection
    return part.logits(h, "embed.wte")


def loss_fn(recorded, factor):
    def fn(out, targets):  # Gpt.forward's loss; each micro-batch's value recorded for the report
        value = loss(out, targets)
        recorded.append(float(value.detach()))
        return value * factor if factor != 1 else value

    return fn


def build(cfg, names, init, exec_dtype, recorded, loss_factor=1):
    """The PipelineModule of cfg (deepspeed.comm initialized); its loss function records each
    micro-batch's loss in `recorded` and returns it times loss_factor (a planted bug's hook)."""
    from deepspeed.pipe import LayerSpec, PipelineModule, TiedLayerSpec
    m = cfg["model"]
    tied = m["tied_embeddings"]

    def spec(own, kind, block=-1):
        return LayerSpec(Part, m, own, init, exec_dtype, kind, block)

    wte = (TiedLayerSpec("embed", Part, m, ["embed.wte"], init, exec_dtype, "wte", tied_weight_attr=["params.0"])
           if tied else spec(["embed.wte"], "wte"))
    first = [wte] + ([spec(["embed.wpe"], "wpe")] if m["position_embeddings"] else [])
    blocks = [spec([n for n in names if n.startswith("blocks.%d." % i)], "block", i) for i in range(m["layers"])]
    ln_f = [n for n in names if n.startswith("head.ln_f.")]
    if tied:
        last = [spec(ln_f, "ln_f"),
                TiedLayerSpec("embed", Part, m, ["embed.wte"], init, exec_dtype, "wte", forward_fn=tied_head,
                              tied_weight_attr=["params.0"])]
    else:
        last = [spec(ln_f + ["head.lm_head.weight"], "head")]
    sizes = layer_partition(cfg, cfg["parallel"]["pp"])
    parts = [0]
    for s, n in enumerate(sizes):
        parts.append(parts[-1] + n + (len(first) if s == 0 else 0))
    parts[-1] += len(last)

    class Partitioned(PipelineModule):
        def _partition_layers(self, method="uniform"):
            self.parts = list(parts)
            stage = self._topo.get_coord(self.global_rank).pipe
            self._set_bounds(start=parts[stage], stop=parts[stage + 1])

    return Partitioned(layers=first + blocks + last, num_stages=cfg["parallel"]["pp"], loss_fn=loss_fn(recorded, loss_factor),
                       partition_method="uniform")


def named(module, names):
    """(paradiff name, parameter) of the layers built on this stage, in model order `names` (a tied
    module's forward_fn is a functools.partial over the module)."""
    own = {}
    for f in module.forward_funcs:
        part = f.args[0] if isinstance(f, functools.partial) else f
        if isinstance(part, Part):
            for n in part.names:
                own.setdefault(n, part.p(n))
    return [(n, own[n]) for n in names if n in own]
