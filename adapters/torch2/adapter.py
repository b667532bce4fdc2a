"""paradiff external target: PyTorch 2.x native parallelisms on CPU + gloo (docs/TORCH2.md).

Usage: adapter.py RUN_DIR | --serve  --parallel ddp|fsdp1|fsdp2|pp|tp [--static-graph] [--bucket-view]
                  [--sync-every-micro-step] [--no-reshard] [--nested] [--sync-last-micro-step]
                  [--flat-params] [--all-reduce-last-micro-step] [--plant NAME]
(RUN_DIR: protocol 1, --serve: protocol 2, docs/TARGETS.md; target files:
adapters/torch2/torch2_*.json, one per variant. A --serve worker runs ddp's configs on ranks that
outlive them, adapters/torch/crew.py, and forks the others' ranks per config.)

Reads RUN_DIR/{config.json, run.json, init.safetensors, data/step<S>.safetensors}, trains the
config's GPT (adapters/torch/model.py, imported unchanged) on dp ranks and writes
RUN_DIR/out/rank<R>.json and rank<R>.step<S>.safetensors with the kinds run.json asks for.

--parallel ddp: DistributedDataParallel (bucket_cap_mb = zero.bucket_elems * 4 B, no_sync for all
  but the last micro-step; --static-graph / --bucket-view set static_graph /
  gradient_as_bucket_view; --sync-every-micro-step: no no_sync, every backward all-reduces), the
  torch optimizer at ZeRO 0, ZeroRedundancyOptimizer at ZeRO 1. precision.reduce bf16 registers
  torch's bf16_compress_hook (the bucket cast to bf16, divided by dp, all-reduced, cast back).
  Gradients and parameters are replicated: every rank reports them whole; ZeRO 1's slots are
  reported by the rank whose partition holds the parameter.
--parallel fsdp1: FullyShardedDataParallel (use_orig_params) over the whole model (--nested: each
  transformer block wrapped first), the config's ZeRO stage as the sharding strategy: 0 NO_SHARD,
  2 SHARD_GRAD_OP, 3 FULL_SHARD; with zero.shard_group a (replicate, shard) device mesh and
  _HYBRID_SHARD_ZERO2 / HYBRID_SHARD. bf16 compute is MixedPrecision (param and buffer dtype bf16,
  reduce_dtype = precision.reduce). Each parameter (and its gradient and slots) is a view of this
  rank's part of a flat parameter: reported as a flat piece at the first element it holds, taken
  from FSDP1's own FlatParameter._shard_param_infos; whole under NO_SHARD. --flat-params:
  use_orig_params=False (FSDP1's default), the optimizer over FSDP1's flat parameters, each
  parameter's part of a flat shard (and of its gradient and slots) cut out by the same record.
  grad_norm is FSDP1's clip_grad_norm_ (every rank's shards). --sync-last-micro-step: no_sync() for
  all but the last micro-step (each rank accumulates its unsharded flat gradients, one reduction per
  step).
--parallel fsdp2: fully_shard on the whole model on a 1-D dp device mesh, or with zero.shard_group
  on a 2-D (replicate, shard) mesh of groups of that many consecutive ranks (HSDP: each group
  shards the state, the groups replicate it, the gradients reduce-scattered within a group and
  all-reduced across groups); flat wrapping (one parameter group; --nested: one per transformer
  block, then the root, on nested_model.py's NestedGpt: model.py's arithmetic with each block's
  parameters in a submodule),
  reshard_after_forward True (False with --no-reshard), a MixedPrecisionPolicy (param_dtype bf16,
  reduce_dtype = precision.reduce) for bf16 compute; --sync-last-micro-step:
  set_requires_gradient_sync(False) for all but the last micro-step (FSDP2's no_sync: unsharded
  gradients accumulate locally, one reduce-scatter per step); --all-reduce-last-micro-step:
  set_requires_all_reduce(False) for all but the last micro-step (HSDP: each micro-step
  reduce-scatters within the shard group, the partial sums accumulate in the reduce dtype, one
  all-reduce across the groups per step). Every kind is a DTensor sharded on dim 0;
  each rank reports its own local tensor as a flat piece with "offset:KIND:TENSOR" metadata taken
  from the DTensor's own placement (compute_local_shape_and_global_offset): ZeRO 3's layout.
--parallel pp: torch.distributed.pipelining over pp x dp ranks (each stage's chunks DDP over its
  dp group when dp > 1) or pp x tp ranks (each stage's chunks tp_model.py's TpChunk, DTensor tensor
  parallelism over the stage's tp ranks): pipeline.py.
--parallel tp: DTensor tensor parallelism over tp ranks: tp_model.py's TpGpt (parallelize_module's
  ColwiseParallel / RowwiseParallel, vocabulary-parallel embedding and loss_parallel) on the tp
  dimension of a (dp, tp) mesh; at ZeRO 0 dp = 1, at ZeRO 3 fully_shard over the dp dimension
  (FSDP2 + TP, flat wrapping). Each rank reports its DTensors' local shards as blocks at their own
  offsets ("block:KIND:TENSOR#PART"), replicated ones whole.

Target option "adapter.activation_checkpointing" (fsdp2 only; the adapter's own, as in
adapters/deepspeed/adapter.py): "torch" / "torch_reentrant" run each transformer block under
torch.utils.checkpoint.checkpoint with use_reentrant False / True, recomputed in backward (with
--nested, inside FSDP2's per-block gathers); rank 0 logs the count of block runs.

Checkpoints (a config with checkpoint.save_at > 0 runs as two launches, docs/TARGETS.md): ddp at
ZeRO 0 and fsdp2 save with torch.distributed.checkpoint (get_state_dict + dcp.save) after the save
phase and load into the reload layout's model and optimizer (dcp.load + set_state_dict: FSDP2's
shards resharded to the new dp). ZeroRedundancyOptimizer is not a DCP state-dict optimizer: the ddp
files declare no checkpoint at ZeRO 1.

The ranks always form a gloo process group, also at world 1, so that the wrappers run there too.
grad_norm is torch's own: the float32 total norm clip_grad_norm_ returns (for DTensor gradients a
replicated DTensor, read with full_tensor(): one scalar, no sharded state). Gradients are read
between backward and the optimizer step, before clipping.

Planted bugs for paradiff's self-test (never on by default):
--plant sum_not_average: the gradients are summed, not averaged, across dp ranks (ddp: a comm hook
  that all-reduces without dividing; fsdp1, fsdp2: the sharded gradients multiplied by dp after backward.
  FSDP2's own set_gradient_divide_factor(1.0) cannot plant it on gloo: it reduces with
  ReduceOp.PREMUL_SUM, which gloo does not implement; repro/fsdp2_divide_factor_gloo.py).
--plant offset_by_one: fsdp1 reports a shard that starts inside a parameter one element early (its
  first element overlaps the previous rank's shard, the parameter's last element is held by none).
--plant reload_without_optimizer: a checkpointed config's reload loads the model's state only, not
  the optimizer's (the moments restart from zero after the reload).
--plant reload_restarts_schedule: a checkpointed config's reload loads the model and the optimizer
  but not the learning-rate scheduler, which starts its warmup again.
--plant replicated_grad_summed: tp (alone or in pipeline stages) sums the gradients of the
  replicated parameters (norms, row-parallel biases, position embeddings) over the tp ranks, as if
  each rank had computed only a share of them (Megatron's sequence-parallel layer-norm all-reduce
  applied without sequence parallelism): they come out tp times too large.
--plant average_over_shard_group: fsdp2 under shard groups (HSDP) divides the gradients' sum over
  all dp ranks by the shard group's size instead of dp (an average over the wrong group): they come
  out dp / shard_group times too large.
--plant shard_offset: fsdp2 reports each local piece at rank * its own size, as if every shard
  were the same size (a report bug: right for tensors whose rows divide evenly over dp; for the
  others the last shards overlap their neighbour and the tensor's end is held by no rank).
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, HERE)
import crew  # noqa: E402
import lr_schedule  # noqa: E402
import safetensors_io  # noqa: E402
import serve  # noqa: E402
from model import ACTIVATION_CHECKPOINTING, Gpt, checkpointed, torch_checkpoint  # noqa: E402
from nested_model import NestedGpt  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SLOTS = {"sgd": ["momentum"], "adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"]}
TORCH_SLOT = {"momentum": "momentum_buffer", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}
PLANTS = ["", "sum_not_average", "shard_offset", "offset_by_one", "reload_without_optimizer", "reload_restarts_schedule",
          "replicated_grad_summed", "average_over_shard_group", "unsynced_dropped"]


def optimizer_class(o, lr):
    kind = o["kind"]
    if kind == "sgd":
        return torch.optim.SGD, dict(lr=lr, momentum=o["momentum"], weight_decay=o["weight_decay"])
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls, dict(lr=lr, betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])


def sum_not_average(state, bucket):  # the planted bug: no division by the world size
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


class Reporter:
    """Collects one rank's tensors of one step: whole tensors, or DTensor local pieces with their
    offsets taken from their placement (docs/TARGETS.md): flat under fsdp2 ("offset:KIND:TENSOR"),
    blocks under tp ("block:KIND:TENSOR#PART", PART one of several layers holding one tensor,
    `row` its first row there)."""

    def __init__(self, plant):
        self.tensors, self.meta, self.plant = {}, {}, plant

    def add_partial(self, kind, name, addend):
        """A full-shape addend of a value the tp group has not reduced ("partial:KIND:TENSOR")."""
        key = kind + ":" + name
        self.tensors[key] = addend.contiguous()
        self.meta["partial:" + key] = "tp"

    def add_shard(self, kind, name, t, shape, first):
        """A tensor of shape `shape` of which this rank holds `t`: whole, or a flat piece from
        element `first` (FSDP1's flat shards; None or empty: no element)."""
        if tuple(t.shape) == tuple(shape):
            self.tensors[kind + ":" + name] = t.detach()
        elif first is not None and t.numel() > 0:
            if self.plant == "offset_by_one" and first > 0:
                first -= 1
            self.tensors[kind + ":" + name] = t.detach().reshape(-1)
            self.meta["offset:" + kind + ":" + name] = str(first)

    def add(self, kind, name, t, part="", row=0):
        from torch.distributed.tensor import DTensor
        key = kind + ":" + name + ("#" + part if part else "")
        if not isinstance(t, DTensor) and not part:
            self.tensors[key] = t.detach()
            return
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
        if not isinstance(t, DTensor):  # a part held whole
            local, shape, offset = t.detach(), tuple(t.shape), (0,) * t.dim()
        else:
            local = t.to_local().detach()
            shape, offset = compute_local_shape_and_global_offset(t.shape, t.device_mesh, t.placements)
        if tuple(local.shape) != tuple(shape):
            raise RuntimeError("%s: local tensor %s, its placement says %s" % (key, tuple(local.shape), tuple(shape)))
        if local.numel() == 0:
            return  # this rank holds no element of the tensor
        if part or any(o != 0 for o in offset[1:]) or tuple(local.shape[1:]) != tuple(t.shape[1:]):
            self.tensors[key] = local.contiguous()
            self.meta["block:" + key] = ",".join(str(o + (row if d == 0 else 0)) for d, o in enumerate(offset))
            return
        # Whole rows of the logical tensor (dim-0 sharding): a flat piece at its first element.
        row_size = math.prod(t.shape[1:]) if len(t.shape) > 1 else 1
        flat = offset[0] * row_size
        if self.plant == "shard_offset":
            flat = dist.get_rank() * local.numel()
        self.tensors[key] = local.reshape(-1)
        self.meta["offset:" + key] = str(flat)

    def write(self, path):
        safetensors_io.write(path, self.tensors, self.meta or None)


def local_of(t):
    from torch.distributed.tensor import DTensor
    return t.to_local() if isinstance(t, DTensor) else t


# FSDP1 (FullyShardedDataParallel): the config's ZeRO stage as FSDP1's sharding strategy (docs/TORCH2.md).
FSDP1_STRATEGY = {0: "NO_SHARD", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}
FSDP1_HYBRID = {2: "_HYBRID_SHARD_ZERO2", 3: "HYBRID_SHARD"}  # under zero.shard_group


def fsdp1_wrap(model, cfg, world, compute, reduce_dtype, a):
    """FullyShardedDataParallel over the model (use_orig_params: the optimizer and the report see
    the model's own parameters, each a view of this rank's shard); --nested wraps each transformer
    block first (ModuleWrapPolicy). bf16 compute is FSDP1's MixedPrecision (params and buffers in
    bf16, gradients reduced in precision.reduce), the float32 shards the masters."""
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision, ShardingStrategy
    stage, group = cfg["zero"]["stage"], cfg["zero"].get("shard_group", 0)
    kw = dict(use_orig_params=not a.flat_params, device_id=torch.device("cpu"))
    if group:  # HSDP: sharded within groups of consecutive ranks, replicated across them
        from torch.distributed.device_mesh import init_device_mesh
        kw["device_mesh"] = init_device_mesh("cpu", (world // group, group), mesh_dim_names=("replicate", "shard"))
        kw["sharding_strategy"] = getattr(ShardingStrategy, FSDP1_HYBRID[stage])
    else:
        kw["sharding_strategy"] = getattr(ShardingStrategy, FSDP1_STRATEGY[stage])
    if compute != torch.float32:
        kw["mixed_precision"] = MixedPrecision(param_dtype=compute, reduce_dtype=reduce_dtype, buffer_dtype=compute)
    if a.nested:
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        kw["auto_wrap_policy"] = ModuleWrapPolicy({type(model.blocks[0])})
    return FullyShardedDataParallel(model, **kw)


def fsdp1_flat_params(net):
    """Each FlatParameter of an FSDP1 model: one per wrapped module that holds parameters."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    for m in FullyShardedDataParallel.fsdp_modules(net):
        if m._handle is not None:
            yield m._handle.flat_param


class Fsdp1Flat:
    """--flat-params (use_orig_params=False, FSDP1's default): the optimizer holds FSDP1's flat
    parameters, one per wrapped module, each rank its shard of the padded concatenation. Each
    parameter's part of this rank's shard, from FSDP1's own record (FlatParameter._fqns and
    _shard_param_infos: where the part starts in the shard, its length, its first element in the
    flattened parameter), reported for any kind of tensor shaped like the shard (the gradient, the
    optimizer's slots)."""

    def __init__(self, net, names):
        self.parts = []  # (name, flat parameter, start in this rank's shard, length, first element)
        for fp in fsdp1_flat_params(net):
            for fqn, info in zip(fp._fqns, fp._shard_param_infos):  # fqn "params.<i>": model.Gpt's
                if info.in_shard:
                    self.parts.append((names[int(fqn.split(".")[-1])], fp, info.offset_in_shard,
                                       info.numel_in_shard, info.intra_param_start_idx))

    def report(self, rep, kind, shapes, of):
        """Each part of of(flat parameter), a tensor shaped like the shard (None: none of it), copied
        (the gradient is clipped in place after it is reported)."""
        for n, fp, start, length, first in self.parts:
            t = of(fp)
            if t is not None:
                part = t.detach().reshape(-1)[start:start + length].clone()
                rep.add_shard(kind, n, part, shapes[n], first)


def fsdp1_shards(net):
    """id(parameter) -> the first element of the parameter (flattened) that this rank's shard holds,
    None where it holds none: FSDP1's own record of each flat parameter's shard
    (FlatParameter._shard_param_infos, beside _params under use_orig_params)."""
    first = {}
    for fp in fsdp1_flat_params(net):
        for p, info in zip(fp._params, fp._shard_param_infos):
            first[id(p)] = info.intra_param_start_idx if info.in_shard else None
    return first


def train(rank, world, run_dir, a):
    torch.set_num_threads(1)
    # paradiff's reference runs without oneDNN (kernels/numerics.cpp, see Note [No oneDNN]); so does the
    # adapter, so that at world 1 it computes exactly what the reference twin computes.
    torch.backends.mkldnn.enabled = False
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    run = json.load(open(os.path.join(run_dir, "run.json")))
    crew.join_group(dist, rank, world, run_dir)
    prec, opt_cfg = cfg["precision"], cfg["optimizer"]
    compute = DTYPES[prec["compute"]]
    init, _ = safetensors_io.read(os.path.join(run_dir, "init.safetensors"))
    lr = opt_cfg["lr"]
    zero_stage = cfg["zero"]["stage"]
    group = cfg["zero"].get("shard_group", 0)  # fsdp2: HSDP's shard groups (0: none)
    pipe = net = None
    how = cfg.get("target_options", {}).get(ACTIVATION_CHECKPOINTING)  # docstring
    if how and a.parallel != "fsdp2":
        raise SystemExit("%s: fsdp2 only (--parallel %s)" % (ACTIVATION_CHECKPOINTING, a.parallel))
    tp = cfg["parallel"]["tp"]
    partial_addend = None  # DTensor's unreduced state as this rank's addend: tensor parallelism only
    if tp > 1:
        from tp_model import partial_addend
    if a.parallel == "tp":
        from torch.distributed.device_mesh import init_device_mesh
        from tp_model import TpGpt
        mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("dp", "tp"))
        model = net = TpGpt(cfg["model"], run["params"], init, compute, mesh["tp"],
                            sp=cfg["parallel"]["sp"])
        if zero_stage == 3:  # FSDP2 over dp on top: torch's 2-D layout, every kind sharded on dp
            from torch.distributed.fsdp import fully_shard
            fully_shard(model, mesh=mesh["dp"])
    elif a.parallel == "pp":
        from pipeline import Pipeline
        pipe = Pipeline(cfg, run, init, compute, rank, world)
    elif a.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = Gpt(cfg["model"], run["params"], init, compute)
        net = DDP(model, bucket_cap_mb=cfg["zero"]["bucket_elems"] * 4 / 2.0 ** 20,
                  static_graph=a.static_graph, gradient_as_bucket_view=a.bucket_view)
        if a.plant == "sum_not_average":
            net.register_comm_hook(None, sum_not_average)
        elif prec["reduce"] == "bf16":  # the gradient all-reduce in bf16: torch's own compression hook
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook
            net.register_comm_hook(None, bf16_compress_hook)
    elif a.parallel == "fsdp1":
        model = NestedGpt if a.nested else Gpt
        model = model(cfg["model"], run["params"], init, compute)
        net = fsdp1_wrap(model, cfg, world, compute, DTYPES[prec["reduce"]], a)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        cls = NestedGpt if a.nested else Gpt
        if how:  # each block recomputed in backward (under FSDP2's per-block gathers with --nested)
            cls = checkpointed(cls, how, torch_checkpoint(how))
        model = cls(cfg["model"], run["params"], init, compute)
        if group:  # HSDP: sharded within groups of consecutive ranks, replicated across the groups
            mesh = init_device_mesh("cpu", (world // group, group), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("cpu", (world,))
        mp_policy = MixedPrecisionPolicy()
        if compute != torch.float32:
            mp_policy = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=DTYPES[prec["reduce"]])
        shard = dict(mesh=mesh, reshard_after_forward=not a.no_reshard, mp_policy=mp_policy)
        if a.nested:  # one parameter group per block, then the root's (embeddings, head)
            for blk in model.blocks:
                fully_shard(blk, **shard)
        net = fully_shard(model, **shard)
    if pipe is not None:  # this rank's chunks' parameters, model order
        entries = pipe.entries()
    elif a.parallel == "tp":  # (name, part, first row, parameter): attn.kv is two layers
        entries = model.entries()
    elif a.flat_params:  # FSDP1's flat parameters replace the model's own (Fsdp1Flat)
        entries = []
    else:  # the (DTensor, under fsdp2) parameters, model order
        entries = [(n, "", 0, p) for n, p in model.named()]
    flat = Fsdp1Flat(net, model.names) if a.flat_params else None
    params = list(net.parameters()) if flat else [p for _, _, _, p in entries]
    shards = fsdp1_shards(net) if a.parallel == "fsdp1" and not flat else None
    shapes = {n: t.shape for n, t in init.items()}
    cls, kwargs = optimizer_class(opt_cfg, lr)
    zero1 = a.parallel == "ddp" and zero_stage == 1
    if zero1:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(params, optimizer_class=cls, **kwargs)
    else:
        opt = cls(params, **kwargs)
    local_opt = opt.optim if zero1 else opt  # the optimizer holding this rank's state
    sched = lr_schedule.scheduler(torch, opt, opt_cfg)
    if run.get("load_checkpoint"):
        load_checkpoint(net, opt, sched, run["load_checkpoint"], plant=a.plant)
    owned = {id(p) for g in local_opt.param_groups for p in g["params"]}
    kinds = set(run["kinds"])
    A = cfg["batch"]["accumulation_steps"]
    clip = cfg.get("clip_grad_norm", 0.0)
    out_dir = os.path.join(run_dir, run["out_dir"])
    steps = []
    for s in range(run.get("first_step", 0), run["steps"]):  # this run's steps (docs/TARGETS.md)
        data, _ = safetensors_io.read(os.path.join(run_dir, "data", "step%d.safetensors" % s))
        opt.zero_grad(set_to_none=True)
        loss_sum, loss_count = 0.0, A
        if pipe is not None:
            loss_sum, loss_count = pipe.run_step(data)
        for m in range(A if pipe is None else 0):
            g = (rank // tp) * A + m  # this rank's dp replica's micro-batches
            last = m == A - 1
            no_sync = (a.parallel == "ddp" and not a.sync_every_micro_step
                       or a.parallel == "fsdp1" and a.sync_last_micro_step)
            ctx = net.no_sync() if no_sync and not last else contextlib.nullcontext()
            if a.parallel == "fsdp2" and a.sync_last_micro_step:
                net.set_requires_gradient_sync(last)
            if a.all_reduce_last_micro_step:
                net.set_requires_all_reduce(last)
            if a.parallel == "tp":
                ctx = net.loss_context()  # loss_parallel, forward and backward
            with ctx:
                loss = net(data["inputs"][g], data["targets"][g])
                loss_sum += float(local_of(loss).detach())
                # the planted bug: the micro-steps before the last (no_sync's) add nothing
                dropped = a.plant == "unsynced_dropped" and not last
                (loss * (0.0 if dropped else 1.0 / A)).backward()
        if a.plant == "sum_not_average" and a.parallel in ("fsdp2", "fsdp1"):
            for p in params:  # the planted bug: undo the average (a sum over dp ranks)
                if p.grad is not None:
                    local_of(p.grad).mul_(world)
        if a.plant == "average_over_shard_group" and group:
            for p in params:  # the planted bug: the sum over dp divided by the group's size only
                if p.grad is not None:
                    local_of(p.grad).mul_(world // group)
        if a.plant == "replicated_grad_summed" and tp > 1:
            from torch.distributed.tensor import Replicate
            for p in params:  # the planted bug: each replicated gradient summed over the tp ranks
                if p.grad is not None and all(isinstance(x, Replicate) for x in p.placements):
                    p.grad.to_local().mul_(tp)
        rep = Reporter(a.plant)

        def report_state(kind, n, value, part, row, p):
            """A gradient or optimizer state of p; under sp an unreduced one as this rank's
            addend (docs/TARGETS.md, partial pieces)."""
            addend = partial_addend(p, value) if partial_addend else None
            if addend is not None:
                rep.add_partial(kind, n, addend)
            elif shards is not None:
                rep.add_shard(kind, n, value, shapes[n], shards[id(p)])
            else:
                rep.add(kind, n, value, part, row)

        if "grad" in kinds and flat:
            flat.report(rep, "grad", shapes, lambda fp: fp.grad)
        elif "grad" in kinds:
            for n, part, row, p in entries:
                grad = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                report_state("grad", n, grad, part, row, p)
        if pipe is not None:
            norm = pipe.clip(clip if clip > 0 else math.inf)
        elif a.parallel == "fsdp1":  # the norm over every rank's shards (torch's own would be this rank's)
            norm = net.clip_grad_norm_(clip if clip > 0 else math.inf)
        else:
            norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else math.inf)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        derived = {}
        if opt_cfg["kind"] == "sgd" and opt_cfg["momentum"] == 0:
            # torch keeps no buffer at momentum 0; the update direction is grad + wd * param.
            # Keyed by flat parameter under --flat-params (no entries); None: no element here.
            keyed = [(id(p), p) for p in params] if flat else [((n, part), p) for n, part, _, p in entries]
            derived = {k: p.grad.detach() + opt_cfg["weight_decay"] * p.detach()
                       for k, p in keyed if p.grad is not None}
        opt.step()
        if sched is not None:
            sched.step()
        if flat:
            flat.report(rep, "param", shapes, lambda fp: fp)
            for slot in (x for x in SLOTS[opt_cfg["kind"]] if x in kinds):
                flat.report(rep, slot, shapes, lambda fp: derived.get(id(fp)) if derived else
                            opt.state.get(fp, {}).get(TORCH_SLOT[slot]))
        for n, part, row, p in entries:
            if shards is not None:
                rep.add_shard("param", n, p, shapes[n], shards[id(p)])
            else:
                rep.add("param", n, p.detach(), part, row)
            if id(p) not in owned:
                continue
            for slot in (x for x in SLOTS[opt_cfg["kind"]] if x in kinds):
                st = local_opt.state.get(p, {})
                if slot == "momentum" and (n, part) in derived:
                    value = derived[(n, part)]
                elif TORCH_SLOT[slot] in st:
                    value = st[TORCH_SLOT[slot]]
                else:
                    continue
                report_state(slot, n, value, part, row, p)
        rep.write(os.path.join(out_dir, "rank%d.step%d.safetensors" % (rank, s)))
        steps.append({"loss_sum": loss_sum, "loss_count": loss_count, "grad_norm": float(norm)})
    if run.get("save_checkpoint"):
        save_checkpoint(net, opt, sched, run["save_checkpoint"])
    if rank == 0 and how:  # a block recomputed in backward runs twice per layer per micro-step
        print("activation checkpointing: %s, %d block runs" % (model.checkpointing, model.block_runs),
              flush=True)
    extra = {"torch": torch.__version__}
    if pipe is not None:
        extra["schedule_run"] = pipe.schedule_run
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump(dict(steps=steps, **extra), f)
    serve.end_group(dist, destroy_group)
    if rank == 0:
        serve.record_imports()


def destroy_group():
    """Destroys the run's process group, past serve.end_group's barrier (which gloo runs after
    every earlier collective). torch 2.6 and 2.8 can join gloo's worker threads holding the GIL
    while a worker waits for it to free a finished collective's tensors (docs/TORCH2.md T2-5: in
    `destroy_process_group` before PR 154976, and on 2.8.0 in DDP's reducer, which may hold the
    group's last reference): there the rank first gives the GIL up for 50 ms so that the workers
    drop their finished work. A teardown workaround: the run's outputs are already written."""
    if torch.__version__ < (2, 9):
        time.sleep(0.05)
    dist.destroy_process_group()


# Checkpoints (docs/TARGETS.md, two launches): torch.distributed.checkpoint, as torch's own
# training recipes use it. get_state_dict gives the model's and the optimizer's state keyed by
# parameter name (DTensor shards under FSDP2, full tensors under DDP), dcp.save writes every rank's
# share, and dcp.load + set_state_dict reshard it into the reload layout's model and optimizer.
def save_checkpoint(net, opt, sched, path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model_sd, optim_sd = get_state_dict(net, opt)
    state = {"model": model_sd, "optim": optim_sd}
    if sched is not None:  # LambdaLR's epoch, the count of applied updates (its lambda is the config's)
        state["lr_scheduler"] = {"last_epoch": torch.tensor(sched.last_epoch)}
    dcp.save(state, checkpoint_id=path)


def load_checkpoint(net, opt, sched, path, plant=""):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_model_state_dict, set_state_dict
    model_sd, optim_sd = get_state_dict(net, opt)  # the layout to load into
    with_optimizer = plant != "reload_without_optimizer"
    state = {"model": model_sd, "optim": optim_sd} if with_optimizer else {"model": model_sd}
    with_schedule = sched is not None and plant != "reload_restarts_schedule"
    if with_schedule:
        state["lr_scheduler"] = {"last_epoch": torch.tensor(0)}
    dcp.load(state, checkpoint_id=path)
    if with_optimizer:
        set_state_dict(net, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    else:
        set_model_state_dict(net, state["model"])
    if sched is not None:
        # The optimizer's param_groups came back with the saved rate; the scheduler's epoch sets
        # the rate of the next update either way (0 when the schedule restarts).
        epoch = int(state["lr_scheduler"]["last_epoch"]) if with_schedule else 0
        sched.load_state_dict(dict(sched.state_dict(), last_epoch=epoch))
        for g, base, f in zip(opt.param_groups, sched.base_lrs, sched.lr_lambdas):
            g["lr"] = base * f(epoch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", nargs="?")
    ap.add_argument("--serve", action="store_true", help="protocol 2: serve run dirs from stdin (serve.py)")
    ap.add_argument("--parallel", required=True, choices=["ddp", "fsdp1", "fsdp2", "pp", "tp"])
    ap.add_argument("--static-graph", action="store_true", help="ddp: DDP(static_graph=True)")
    ap.add_argument("--bucket-view", action="store_true", help="ddp: DDP(gradient_as_bucket_view=True)")
    ap.add_argument("--sync-every-micro-step", action="store_true",
                    help="ddp: no no_sync(); every micro-step's backward all-reduces")
    ap.add_argument("--no-reshard", action="store_true", help="fsdp2: fully_shard(reshard_after_forward=False)")
    ap.add_argument("--nested", action="store_true",
                    help="fsdp1, fsdp2: wrap each transformer block, then the root (nested_model.py)")
    ap.add_argument("--sync-last-micro-step", action="store_true",
                    help="fsdp2: set_requires_gradient_sync(False), fsdp1: no_sync(), for all but the last micro-step")
    ap.add_argument("--all-reduce-last-micro-step", action="store_true",
                    help="fsdp2 (HSDP): set_requires_all_reduce(False) for all but the last micro-step")
    ap.add_argument("--flat-params", action="store_true",
                    help="fsdp1: use_orig_params=False, the optimizer over FSDP1's flat parameters")
    ap.add_argument("--plant", default="", choices=PLANTS)
    a = ap.parse_args()
    if a.flat_params and (a.parallel != "fsdp1" or a.nested):
        ap.error("--flat-params: fsdp1 with flat wrapping only")
    if a.sync_last_micro_step and a.parallel not in ("fsdp1", "fsdp2"):
        ap.error("--sync-last-micro-step: fsdp1 or fsdp2 only")
    if a.all_reduce_last_micro_step and a.parallel != "fsdp2":
        ap.error("--all-reduce-last-micro-step: fsdp2 only")
    if a.serve:
        # DDP builds everything per call on the default group: its ranks may outlive a config
        # (crew.py). FSDP2, tensor and pipeline parallelism form device meshes per config.
        if a.parallel == "ddp":
            serve.serve(crews=crew.Crews(train, (a,)))
        else:
            serve.serve(lambda run_dir: serve.fork_ranks(train, run_dir, a))
    elif a.run_dir is None:
        ap.error("a run dir, or --serve")
    elif "RANK" in os.environ:  # under torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a.run_dir, a)
    else:
        serve.fork_ranks(train, a.run_dir, a)


if __name__ == "__main__":
    main()
