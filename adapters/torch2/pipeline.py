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
knows nothing of tied weights), so both copies take the same update. With tp > 1 (dp = 1) each
chunk is tp_model.TpChunk on its stage's tp ranks and each tp rank has its own pipeline over the
stages (paradiff's rank = tp_rank + tp * stage; docs/TORCH2.md, "Tensor parallelism").

parallel.schedule picks ScheduleGPipe, Schedule1F1B (GPipe when accumulation_steps < pp:
Schedule1F1B refuses it) or ScheduleInterleaved1F1B; the schedule splits the step's micro-batches
itself and scales the gradients by 1 / accumulation_steps (scale_grads, its default since torch 2.7; on
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


def chunk_names(model_cfg, names, lo, hi, first, last):
    """The parameters of the chunk of layers [lo, hi) (with the embeddings when first, the head
    and a tied embedding's second copy when last), in model order."""
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
    return own


class Chunk(Gpt):
    """model.Gpt's arithmetic for layers [lo, hi), with the embeddings when first and the head when
    last: Gpt's own methods over this chunk's parameters only."""

    def __init__(self, model_cfg, names, tensors, exec_dtype, lo, hi, first, last):
        super().__init__(model_cfg, chunk_names(model_cfg, names, lo, hi, first, last), tensors, exec_dtype)
        self.lo, self.hi, self.first, self.last = lo, hi, first, last

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
        pp, v, dp, tp = par["pp"], par["virtual_stages"], par["dp"], par["tp"]
        if pp * dp * tp != world or (tp > 1 and dp > 1):
            raise RuntimeError("pipeline: pp x dp or pp x tp ranks, got %s" % par)
        C = pp * v
        sizes = layer_partition(cfg, C)
        bounds = [sum(sizes[:c]) for c in range(C + 1)]
        A = cfg["batch"]["accumulation_steps"]
        # paradiff's rank = t + tp * (d + dp * stage) (docs/CONFIG.md); a pipeline per (d, t).
        rank_of = lambda s, d, t: t + tp * (d + dp * s)  # noqa: E731
        stage, self.replica, t = rank // (tp * dp), (rank // tp) % dp, rank % tp
        self.rank, self.pp, self.A = rank, pp, A
        self.order = {n: k for k, n in enumerate(run["params"])}
        self.mesh = None
        if tp > 1:  # each stage's tp ranks: the tp dimension of a (pp, tp) mesh
            from torch.distributed.device_mesh import init_device_mesh
            self.mesh = init_device_mesh("cpu", (pp, tp), mesh_dim_names=("pp", "tp"))["tp"]
        # Every rank creates every group, in the same order (gloo's new_group is collective).
        lines = [(d, u) for d in range(dp) for u in range(tp)]
        ranks_of = lambda d, u: [rank_of(s, d, u) for s in range(pp)]  # noqa: E731: a pipeline
        pp_groups = {x: dist.new_group(ranks_of(*x)) for x in lines} if len(lines) > 1 else None
        dp_groups = [dist.new_group([rank_of(s, d, 0) for d in range(dp)]) for s in range(pp)] if dp > 1 else [None]
        self.pp_group = pp_groups[(self.replica, t)] if pp_groups else None

        def chunk(c):
            lo, hi, first, last = bounds[c], bounds[c + 1], c == 0, c == C - 1
            if tp == 1:
                return Chunk(cfg["model"], run["params"], init, exec_dtype, lo, hi, first, last)
            from tp_model import TpChunk
            names = chunk_names(cfg["model"], run["params"], lo, hi, first, last)
            return TpChunk(cfg["model"], names, init, exec_dtype, self.mesh, par["sp"], lo, hi, first, last)

        self.chunks = [chunk(c) for c in range(stage, C, pp)]
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
        # The tied embedding's two copies: on the pipeline's first and last stage.
        self.tied = cfg["model"]["tied_embeddings"] and pp > 1
        ends = lambda x: [ranks_of(*x)[0], ranks_of(*x)[-1]]  # noqa: E731
        tie_groups = {x: dist.new_group(ends(x)) for x in lines} if self.tied else None
        self.tie_group = tie_groups[(self.replica, t)] if self.tied else None

    def entries(self):
        """(name, part, first row, parameter) of every chunk on this rank, each (name, part) once,
        in model order: tp_model.TpGpt.entries() under tp, else whole parameters."""
        out = {}
        for ch in self.chunks:
            for e in (ch.entries() if self.mesh is not None else [(n, "", 0, ch.p(n)) for n in ch.names]):
                out.setdefault(e[:2], e)
        return sorted(out.values(), key=lambda e: (self.order[e[0]], e[2]))

    def params(self):
        return [e[3] for e in self.entries()]

    def wte(self):  # this rank's copy of the token embedding
        return next(e[3] for e in self.entries() if e[0] == "embed.wte")

    def norm_params(self):
        """The rank's parameters counted in the global norm: the last chunk's copy of a tied
        embedding is counted by rank 0 only."""
        drop = self.tied and self.last and not self.first
        return [e[3] for e in self.entries() if not (drop and e[0] == "embed.wte")]

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
            for p in self.params():
                if p.grad is not None:
                    p.grad.div_(A)
        if self.tied and (self.first or self.last):
            w = self.wte()
            if hasattr(w.grad, "placements") and w.grad.placements != w.placements:
                # Under tp the first stage's embedding gradient comes whole (T2-7, docs/TORCH2.md),
                # the head's as the weight's shard: the sum needs one layout, the weight's.
                w.grad = w.grad.redistribute(w.device_mesh, w.placements)
            dist.all_reduce(local(w.grad), group=self.tie_group)
        if not self.last:
            return 0.0, 0
        return sum(float(x.detach()) for x in losses), len(losses)

    def clip(self, max_norm):
        """torch's float32 norm of this rank's gradients, combined over the ranks; clips with it."""
        total = group_norm([p.grad for p in self.norm_params() if p.grad is not None], self.pp_group)
        if self.mesh is not None:  # DTensor gradients scale by a DTensor
            from torch.distributed.tensor import DTensor, Replicate
            torch.nn.utils.clip_grads_with_norm_(self.params(), max_norm,
                                                 DTensor.from_local(total, self.mesh, [Replicate()]))
        else:
            torch.nn.utils.clip_grads_with_norm_(self.params(), max_norm, total)
        return total


def local(t):  # a DTensor's local tensor (the storage itself), else t
    from torch.distributed.tensor import DTensor
    return t.to_local() if isinstance(t, DTensor) else t
