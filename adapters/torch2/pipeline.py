"""torch.distributed.pipelining for adapter.py --parallel pp (docs/TORCH2.md, "Pipelining").

paradiff's GPT split into pp * virtual_stages chunks of consecutive layers (parallel.partition: an
explicit list, else equal counts with the remainder on the first chunks); chunk c runs on stage
c % pp (one chunk per stage, or round-robin for the interleaved schedule). With dp > 1 each of the
dp pipeline replicas (paradiff's rank = dp_rank + dp * stage, docs/CONFIG.md) runs its own
micro-batches over its own pp group, and every chunk is a DistributedDataParallel module over its
stage's dp group: torch's PipelineStage runs all but the last backward of a step under the DDP
module's no_sync and prepares the reducer for the last one itself (stage.py
backward_maybe_with_nosync), so the replicas' gradients are averaged once per step. The first
chunk holds the embeddings, the last the head; with tied embeddings both hold embed.wte, and their
two gradients are summed over a two-rank group (per replica) before the step (the schedule itself
knows nothing of tied weights), so both copies take the same update. parallel.schedule picks ScheduleGPipe,
Schedule1F1B (GPipe when accumulation_steps < pp: Schedule1F1B refuses it) or
ScheduleInterleaved1F1B; the schedule splits the step's micro-batches itself and
scales the gradients by 1 / accumulation_steps (scale_grads, its default since torch 2.7; on
older releases, whose schedules sum the micro-batches' gradients, the adapter divides each
gradient by accumulation_steps after the step, as scale_grads does).

The global gradient norm: torch.nn.utils.get_total_norm over the rank's own gradients (the last
chunk's copy of a tied embedding left out), squared, summed over the replica's pp group, square
root, all in float32; clip_grads_with_norm_ then clips with it.
"""
import inspect

import torch
import torch.distributed as dist

from group_norm import group_norm
from model import Gpt, layer_partition, loss


class Chunk(Gpt):
    """model.Gpt's arithmetic for layers [lo, hi), with the embeddings when first and the head when
    last: Gpt's own methods over this chunk's parameters only."""

    def __init__(self, model_cfg, names, tensors, exec_dtype, lo, hi, first, last):
        torch.nn.Module.__init__(self)
        self.m, self.exec = model_cfg, exec_dtype
        self.lo, self.hi, self.first, self.last = lo, hi, first, last
        own = []
        for n in names:
            if n.startswith("blocks."):
                keep = lo <= int(n.split(".")[1]) < hi
            elif n.startswith("embed."):
                keep = first or (last and n == "embed.wte" and model_cfg["tied_embeddings"])
            else:
                keep = last
            if keep:
                own.append(n)
        self.names = own
        self.index = {n: k for k, n in enumerate(own)}
        self.params = torch.nn.ParameterList([torch.nn.Parameter(tensors[n].clone()) for n in own])

    def forward(self, x):  # Gpt.forward's ops, cut at the chunk's boundaries
        h = x
        if self.first:
            h = self.token_embedding(x)
            if self.m["position_embeddings"]:
                h = self.position_embedding(h)
        for i in range(self.lo, self.hi):
            h = self.run_block(i, h)
        if not self.last:
            return h
        return self.logits(self.layer_norm("head.ln_f", h), self.head_weight())


class Pipeline:
    def __init__(self, cfg, run, init, exec_dtype, rank, world):
        from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                                  ScheduleInterleaved1F1B)
        par = cfg["parallel"]
        pp, v, dp = par["pp"], par["virtual_stages"], par["dp"]
        if par["tp"] != 1 or pp * dp != world:
            raise RuntimeError("pipeline: pp x dp ranks (tp = 1), got %s" % par)
        C = pp * v
        sizes = layer_partition(cfg, C)
        bounds = [sum(sizes[:c]) for c in range(C + 1)]
        A = cfg["batch"]["accumulation_steps"]
        stage, self.replica = rank // dp, rank % dp
        self.rank, self.pp, self.A = rank, pp, A
        # Every rank creates every group, in the same order (gloo's new_group is collective).
        ranks_of = lambda d: [d + dp * s for s in range(pp)]  # noqa: E731: replica d's pp group
        pp_groups = [dist.new_group(ranks_of(d)) for d in range(dp)] if dp > 1 else [None]
        dp_groups = [dist.new_group([d + dp * s for d in range(dp)]) for s in range(pp)] if dp > 1 else [None]
        self.pp_group = pp_groups[self.replica]
        self.chunks = [Chunk(cfg["model"], run["params"], init, exec_dtype, bounds[c], bounds[c + 1],
                             c == 0, c == C - 1) for c in range(stage, C, pp)]
        mods = self.chunks
        if dp > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP
            cap = cfg["zero"]["bucket_elems"] * 4 / 2.0 ** 20
            mods = [DDP(ch, process_group=dp_groups[stage], bucket_cap_mb=cap) for ch in self.chunks]
        stages = [PipelineStage(m, c, C, torch.device("cpu"), group=self.pp_group)
                  for m, c in zip(mods, range(stage, C, pp))]
        kind = par["schedule"]
        if kind == "1f1b" and A < C:
            # Schedule1F1B refuses fewer micro-batches than stages (a ValueError in its constructor;
            # docs/TORCH2.md T2-3). 1F1B then has no steady state: its order is GPipe's (all
            # forwards, then the backwards in micro-batch order, as torch's GPipe runs them).
            kind = "gpipe"
        self.schedule_run = kind
        self.scaled = "scale_grads" in inspect.signature(ScheduleGPipe.__init__).parameters
        if kind == "interleaved":
            self.schedule = ScheduleInterleaved1F1B(stages, n_microbatches=A, loss_fn=loss)
        else:
            cls = ScheduleGPipe if kind == "gpipe" else Schedule1F1B
            self.schedule = cls(stages[0], n_microbatches=A, loss_fn=loss)
        self.first = any(ch.first for ch in self.chunks)
        self.last = any(ch.last for ch in self.chunks)
        # The tied embedding's two copies: on the replica's first and last stage.
        self.tied = cfg["model"]["tied_embeddings"] and pp > 1
        tie_groups = [dist.new_group([ranks_of(d)[0], ranks_of(d)[-1]]) for d in range(dp)] if self.tied else [None]
        self.tie_group = tie_groups[self.replica if self.tied else 0]

    def named(self):
        """(name, parameter) of every chunk on this rank, each name once, in model order."""
        out = {}
        for ch in self.chunks:
            for n in ch.names:
                out.setdefault(n, ch.p(n))
        return out

    def norm_params(self):
        """The rank's parameters counted in the global norm: the last chunk's copy of a tied
        embedding is counted by rank 0 only."""
        named = self.named()
        if self.tied and self.last and not self.first:
            named.pop("embed.wte", None)
        return list(named.values())

    def run_step(self, data):
        """Forward and backward of the replica's micro-batches; returns (loss_sum, count)."""
        A, lo = self.A, self.replica * self.A
        inputs = data["inputs"][lo:lo + A].reshape(-1, data["inputs"].size(-1))
        targets = data["targets"][lo:lo + A].reshape(-1, data["targets"].size(-1))
        losses = []
        args = (inputs,) if self.first else ()
        kwargs = {"target": targets, "losses": losses} if self.last else {}
        self.schedule.step(*args, **kwargs)
        if not self.scaled:
            for p in self.named().values():
                if p.grad is not None:
                    p.grad.div_(A)
        if self.tied and (self.first or self.last):
            dist.all_reduce(self.named()["embed.wte"].grad, group=self.tie_group)
        if not self.last:
            return 0.0, 0
        return sum(float(x) for x in losses), len(losses)

    def clip(self, max_norm):
        """torch's float32 norm of this rank's gradients, combined over the ranks; clips with it."""
        total = group_norm([p.grad for p in self.norm_params() if p.grad is not None], self.pp_group)
        torch.nn.utils.clip_grads_with_norm_(list(self.named().values()), max_norm, total)
        return total
