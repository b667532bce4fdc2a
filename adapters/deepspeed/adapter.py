#!/usr/bin/env python3
"""paradiff external target: DeepSpeed (CPU accelerator, gloo), ZeRO 0-3, client torch optimizers.

Usage: adapter.py RUN_DIR | --serve [--plant NAME] [--ds JSON]  (protocol 1 | 2, docs/TARGETS.md)
       adapter.py --print-export CONFIG.json               (export_deepspeed, paradiff export's twin)
       adapter.py --print-ds-config CONFIG.json [--ds JSON] (what deepspeed.initialize receives)

Run under the torch venv with one pinned DeepSpeed release on PYTHONPATH (target files
deepspeed*.json, written by make_targets.py; environments: scripts/setup-targets,
adapters/envs/deepspeed-*.txt; docs/DEEPSPEED.md). Reads RUN_DIR/{config.json, run.json,
init.safetensors, data/step<S>.safetensors}, forks one process per rank (gloo, file:// rendezvous in
the run dir, DS_ACCELERATOR=cpu, LOCAL_SIZE=world), builds paradiff's GPT (adapters/torch/model.py,
imported, not copied; ZeRO 3 registers the same parameters on modules: module_tree.py), hands it
and a client torch optimizer to deepspeed.initialize, and trains with engine(...),
engine.backward(loss), engine.step() per micro-step (DeepSpeed divides the loss gradient by
gradient_accumulation_steps and steps at the boundary). With parallel.pp > 1 (or --pipe, also at
pp 1) the model is a deepspeed.pipe PipelineModule (pipe.py) and each step is one
engine.train_batch over the rank's data-parallel replica's micro-batches; its gradients are read when the schedule reaches
OptimizerStep (hook_optimizer_step), and only the last stage reports losses.

The DeepSpeed config is `paradiff export deepspeed CONFIG` (targets/translate.cpp ExportDeepSpeed),
rebuilt here field for field by export_deepspeed() (the test deepspeed_export_mapping checks the two
agree), minus its "optimizer" section (the optimizer is a client torch optimizer with exactly those
parameters), plus "zero_allow_untested_optimizer": true (SGD), then the `--ds JSON` of the target
file merged in, then the config's target_options: the DeepSpeed-only settings the target file
declares as "options" (overlap_comm, contiguous_gradients, reduce_scatter, ...), each named by its
dotted path in DeepSpeed's config ("zero_optimization.overlap_comm") and drawn by the campaign.
Options under "adapter." are the adapter's own, not DeepSpeed's config: "adapter.activation_checkpointing"
runs each transformer block under activation checkpointing, recomputed in backward, as a model
written for DeepSpeed does: "deepspeed" (deepspeed.checkpointing.checkpoint),
"deepspeed_non_reentrant" (its non_reentrant_checkpoint), "torch" / "torch_reentrant"
(torch.utils.checkpoint.checkpoint with use_reentrant False / True). The model has no dropout: the
recomputation repeats the forward's arithmetic exactly. "adapter.module_tree": "nested" puts the
parameters in a tree of submodules (module_tree.py), so that ZeRO 3 gathers them per submodule.
"adapter.poison_uninitialized": true runs the ranks with torch.use_deterministic_algorithms(True),
under which every torch.empty fills its memory with NaN (torch.utils.deterministic.
fill_uninitialized_memory), so that DeepSpeed reading memory it never wrote shows in every run
instead of only when the allocator hands back used memory. --zero-init (ZeRO 3) builds the model
inside deepspeed.zero.Init, as large models are built: each parameter is partitioned as its module
is constructed, and (DeepSpeed's memory_efficient_linear, on by default) F.linear becomes ZeRO 3's
own autograd function (runtime/zero/linear.py) for the rest of the rank's life.

What each rank reports (the kinds run.json asks for), all read from the rank's own memory, never
through DeepSpeed's gathers:
- grad, after the boundary micro-step's engine.backward and before engine.step: ZeRO 0 the reduced
  param.grad; the bf16 optimizer (ZeRO 1 with bf16 and fp32 accumulation) its all-reduced full fp32
  buffer param._hp_grad; ZeRO 1/2 the rank's fragment of DeepSpeed's reduced gradient partition
  (param._hp_mapping.get_lp_grad_fragment, offset lp_fragment_address.start); ZeRO 3
  safe_get_local_grad (the rank's partition, padding trimmed, offset rank * partition size).
- param: the module's parameter (ZeRO 0-2, full) or param.ds_tensor (ZeRO 3, the rank's partition).
- master and the optimizer slots: ZeRO 0 the torch optimizer's own state (keyed by the fp32 copy
  of FP16_UnfusedOptimizer under bf16); ZeRO 1/2 and the bf16 optimizer
  _hp_mapping.get_hp_fragment(key); ZeRO 3 safe_get_local_fp32_param / safe_get_local_optimizer_state.
- grad_norm: engine.get_global_grad_norm() (DeepSpeed's own norm of the unclipped gradients). Where
  DeepSpeed computes none (ZeRO 0 in fp32: the engine clips with runtime.utils.clip_grad_norm_ and
  drops its value, or does not clip) the adapter computes the float32 norm of the reduced
  gradients with torch.nn.utils.get_total_norm (zero0_norm; over the pipeline stages, once per
  tied weight).
- SGD with momentum 0: torch keeps no buffer; the client optimizer (RecordingSGD) stores its update
  direction grad + weight_decay * param, computed with the op torch's SGD applies, in its state
  under "direction", so DeepSpeed's own fragment APIs return the rank's piece of it as the momentum
  slot.

DeepSpeed's CPU TorchBackend JIT-compiles a shared-memory all-reduce op when it starts (g++, ~100 s
the first time on a machine) that only inference_all_reduce (inference, AutoTP) uses; the adapter
skips that build (training's collectives are torch.distributed's gloo ones either way).

Planted bugs (never on by default):
--plant sum_not_average: every rank multiplies its loss by the dp size before engine.backward, so
DeepSpeed's average of the gradients over ranks becomes their sum.
--plant reload_without_optimizer: the reload phase loads the checkpoint without its optimizer states
(load_optimizer_states=False): the momentum / Adam moments restart at zero after the reload.

Checkpoints (a config with checkpoint.save_at > 0 runs as two launches, docs/TARGETS.md): the save
phase calls engine.save_checkpoint (with the client state DeepSpeed's universal conversion needs)
after its last step; the reload phase, in the reload layout, calls engine.load_checkpoint right
after deepspeed.initialize. DeepSpeed's engine refuses a ZeRO 1-3 checkpoint in another dp; there
the adapter converts it first with DeepSpeed's own ds_to_universal and loads it with
checkpoint.load_universal, as a user does. ZeRO 0 checkpoints reload into any dp as they are.
"""
import argparse
import contextlib
import copy
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_ADAPTER = os.path.join(os.path.dirname(HERE), "torch")

SLOTS = {"sgd": ["momentum"], "adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"]}
ADAPTER_OPTION = "adapter."  # target options the adapter reads itself (docstring)
POISON_UNINITIALIZED = "adapter.poison_uninitialized"
PLANTS = ["", "sum_not_average", "reload_without_optimizer"]


# ---------------------------------------------------------------------------------------------
# The DeepSpeed config: targets/translate.cpp ExportDeepSpeed, field for field.
def export_deepspeed(cfg):
    b, z, p, o = cfg["batch"], cfg["zero"], cfg["precision"], cfg["optimizer"]
    dp = cfg["parallel"]["dp"]
    ds = {
        "train_micro_batch_size_per_gpu": b["micro_batch"],
        "gradient_accumulation_steps": b["accumulation_steps"],
        "train_batch_size": b["micro_batch"] * b["accumulation_steps"] * dp,
        "zero_optimization": {"stage": z["stage"], "reduce_bucket_size": z["bucket_elems"]},
        "gradient_clipping": float(cfg["clip_grad_norm"]),
        "communication_data_type": p["reduce"],
        "data_types": {"grad_accum_dtype": p["accumulate"]},
    }
    params = {"lr": o["lr"], "weight_decay": o["weight_decay"]}
    if o["kind"] == "sgd":
        params["momentum"] = o["momentum"]
    else:
        params["betas"] = list(o["betas"])
        params["eps"] = o["eps"]
    if o["kind"] == "adam":
        params["adam_w_mode"] = False  # DeepSpeed runs "Adam" as AdamW otherwise
    ds["optimizer"] = {"type": {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}[o["kind"]], "params": params}
    sched = o.get("schedule", {"kind": "constant"})
    if sched["kind"] != "constant":  # DeepSpeed's own scheduler, stepped by its engine
        sp = {"warmup_num_steps": sched["warmup_steps"], "warmup_type": "linear"}
        if sched["kind"] == "warmup_cosine":
            sp.update(total_num_steps=sched["total_steps"], warmup_min_ratio=0.0, cos_min_ratio=sched["min_ratio"])
            ds["scheduler"] = {"type": "WarmupCosineLR", "params": sp}
        else:
            sp.update(warmup_min_lr=0.0, warmup_max_lr=o["lr"])
            if sched["kind"] == "warmup_linear":
                sp["total_num_steps"] = sched["total_steps"]
            ds["scheduler"] = {"type": "WarmupLR" if sched["kind"] == "warmup" else "WarmupDecayLR", "params": sp}
    if z.get("shard_group", 0):  # paradiff export's MiCS (no target file declares shard groups)
        ds["zero_optimization"]["mics_shard_size"] = z["shard_group"]
    ds["bf16"] = {"enabled": p["param"] == "bf16"}
    fp16 = {"enabled": p["param"] == "fp16"}
    if p["param"] == "fp16":
        s = p["loss_scale"]
        fp16["loss_scale"] = s["init"] if s["mode"] == "static" else 0.0
        fp16["initial_scale_power"] = int(round(math.log2(s["init"])))
        fp16["loss_scale_window"] = s["growth_interval"]
        fp16["hysteresis"] = s["hysteresis"]
        fp16["min_loss_scale"] = s["min"]
    ds["fp16"] = fp16
    if p["param"] != "fp32" and not p["master_weights"]:
        # ZeRO 1-3 keep the master weights and gradients in the parameters' dtype; with fp32
        # optimizer state DeepSpeed needs it on the host (ZeRO-Offload's CPU Adam).
        ds[p["param"]][p["param"] + "_master_weights_and_grads"] = True
        ds["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    return ds


def merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v
    return dst


def ds_config(cfg, extra, own_optimizer=False):
    ds = export_deepspeed(cfg)
    if not own_optimizer:
        del ds["optimizer"]  # a client torch optimizer with exactly these parameters (make_optimizer)
        ds["zero_allow_untested_optimizer"] = True  # SGD is not on ZeRO's tested list
        # With offload_optimizer (a target option) DeepSpeed refuses a client optimizer other than
        # its CPU Adam unless told not to; the client optimizer then steps the host partitions.
        ds["zero_force_ds_cpu_optimizer"] = False
    ds["steps_per_print"] = 1 << 30
    merge(ds, copy.deepcopy(extra))
    for path, value in sorted(cfg.get("target_options", {}).items()):  # "a.b.c": DeepSpeed's keys
        if path.startswith(ADAPTER_OPTION):
            continue
        *outer, key = path.split(".")
        node = ds
        for k in outer:
            node = node.setdefault(k, {})
        node[key] = value
    return ds


# ---------------------------------------------------------------------------------------------
def make_optimizer(torch, o, params):
    if o["kind"] == "sgd":
        if o["momentum"] == 0:
            return recording_sgd(torch)(params, lr=o["lr"], momentum=0.0, weight_decay=o["weight_decay"])
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], weight_decay=o["weight_decay"])
    cls = torch.optim.Adam if o["kind"] == "adam" else torch.optim.AdamW
    return cls(params, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])


def recording_sgd(torch):
    class RecordingSGD(torch.optim.SGD):
        """torch SGD at momentum 0 that keeps its update direction grad + wd * param (the op torch's
        _single_tensor_sgd applies) in state["direction"], written in place so that DeepSpeed's
        fragment views of the state stay valid."""

        @torch.no_grad()
        def step(self, closure=None):
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    d = p.grad.add(p, alpha=g["weight_decay"]) if g["weight_decay"] != 0 else p.grad
                    st = self.state[p]
                    if "direction" not in st:
                        st["direction"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    st["direction"].copy_(d)
            return super().step(closure)

    return RecordingSGD


def slot_key(o, slot):
    if slot == "momentum":
        return "direction" if o["momentum"] == 0 else "momentum_buffer"
    return slot


# ---------------------------------------------------------------------------------------------
def train(rank, world, run_dir, a, extra):
    import torch
    import torch.distributed as tdist
    import deepspeed
    from deepspeed.utils import safe_get_local_fp32_param, safe_get_local_grad, safe_get_local_optimizer_state
    sys.path.insert(0, TORCH_ADAPTER)
    import crew
    import safetensors_io
    import serve
    from model import ACTIVATION_CHECKPOINTING, checkpointed
    from module_tree import MODULE_TREE, model_class

    plant = a.plant
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False  # as paradiff's reference (kernels/numerics.cpp, see Note [No oneDNN])
    # LOCAL_SIZE: the CPU accelerator's device count (read when asked, not at import).
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_SIZE=str(world))
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    run = json.load(open(os.path.join(run_dir, "run.json")))
    options = cfg.get("target_options", {})
    # Set on every run: a warm worker's next config must not inherit it.
    torch.use_deterministic_algorithms(bool(options.get(POISON_UNINITIALIZED)))
    crew.join_group(tdist, rank, world, run_dir)
    deepspeed.init_distributed(dist_backend="gloo")
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    prec, o = cfg["precision"], cfg["optimizer"]
    stage = cfg["zero"]["stage"]
    init, _ = safetensors_io.read(os.path.join(run_dir, "init.safetensors"))
    # ZeRO-3 gathers a module's own parameters around its forward (module_tree.py: on the root
    # module by default, or in a tree of submodules). (Making the root a z3 leaf module does not do:
    # DeepSpeed reduces a leaf module's gradients in a full backward hook, which fires at the start
    # of backward when no module input requires a gradient, as token ids do not; it then frees the
    # parameters and backward fails.)
    pp = cfg["parallel"]["pp"]
    piped = pp > 1 or a.pipe  # a deepspeed.pipe PipelineModule (DeepSpeed's PipelineEngine)
    recorded = []  # pipeline: the last stage's loss per micro-batch (pipe.loss_fn)
    how = options.get(ACTIVATION_CHECKPOINTING)
    tree = options.get(MODULE_TREE)
    if a.zero_init and stage != 3:
        raise SystemExit("--zero-init: ZeRO 3 only (deepspeed.zero.Init partitions for ZeRO 3)")
    for name, value in ((ACTIVATION_CHECKPOINTING, how), (MODULE_TREE, tree), ("--zero-init", a.zero_init)):
        if piped and value:
            raise SystemExit(name + ": not with deepspeed.pipe (pipe.py has no such option)")
    ds = ds_config(cfg, extra, own_optimizer=a.ds_optimizer)
    if piped:
        import pipe
        model = pipe.build(cfg, run["params"], init, dtypes[prec["compute"]], recorded,
                           loss_factor=run["dp"] if plant == "sum_not_average" else 1)
    else:
        cls = model_class(stage, tree)
        if how:
            cls = checkpointed(cls, how, checkpoint_function(deepspeed, how))
        # The same config as deepspeed.initialize below, as a user passes it to both.
        with deepspeed.zero.Init(config_dict_or_path=ds) if a.zero_init else contextlib.nullcontext():
            model = cls(cfg["model"], run["params"], init, dtypes[prec["compute"]])
    # A client torch optimizer, or DeepSpeed's own from the config's "optimizer" section.
    opt = None if a.ds_optimizer else make_optimizer(torch, o, list(model.parameters()))
    load = run.get("load_checkpoint")
    tag = universal_if_resharded(load, cfg, ds, rank) if load else None
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds)
    if rank == 0:  # DeepSpeed's own reading of the ZeRO settings, for whoever reads the run's log
        zc = engine._config.zero_config
        master = getattr(engine.optimizer, "master_weights_and_grads_dtype", None)  # ZeRO 1-3
        holders = sum(1 for m in engine.module.modules() if list(m.parameters(recurse=False)))
        print("deepspeed: ZeRO stage %d, optimizer %s; offload_optimizer: %s; offload_param: %s; "
              "master weights and grads: %s; immediate gradient update: %s; parameter alignment: %s; "
              "activation checkpointing: %s; modules holding parameters: %d; torch.empty fills with NaN: %s; "
              "built under zero.Init: %s (F.linear is %s)"
              % (zc.stage, type(engine.optimizer).__name__, zc.offload_optimizer, zc.offload_param, master,
                 getattr(engine.optimizer, "immediate_grad_update", None),  # the BF16_Optimizer's
                 getattr(engine.optimizer, "parameter_alignment", None),  # ZeRO 1 / 2 (0.19.8)
                 getattr(engine.module, "checkpointing", "off"), holders,
                 torch.are_deterministic_algorithms_enabled() and torch.utils.deterministic.fill_uninitialized_memory,
                 a.zero_init, torch.nn.functional.linear.__name__),
              flush=True)
    if load:
        path, _ = engine.load_checkpoint(load, tag=tag,
                                         load_optimizer_states=plant != "reload_without_optimizer")
        if path is None:
            raise RuntimeError("DeepSpeed found no checkpoint %s to load in %s" % (tag, load))
    dsopt = engine.optimizer
    base = engine.basic_optimizer if hasattr(engine, "basic_optimizer") else opt
    named = pipe.named(model, run["params"]) if piped else model.named()  # the engine's module
    kinds = set(run["kinds"])
    slots = [s for s in SLOTS[o["kind"]] if s in kinds]
    A = cfg["batch"]["accumulation_steps"]
    dp = run["dp"]
    dp_rank = engine.grid.get_data_parallel_id() if piped else rank
    out_dir = os.path.join(run_dir, run["out_dir"])
    steps = []

    def piece(tensors, meta, kind, name, flat, offset):
        tensors[kind + ":" + name] = flat.detach().reshape(-1).clone()
        meta["offset:%s:%s" % (kind, name)] = str(int(offset))

    def z3_local(name, p, t):
        """The rank's ZeRO-3 partition of p as (flat values without padding, offset)."""
        part = p.ds_tensor.numel()
        off = rank * part
        n = max(0, min(part, p.ds_numel - off))
        return t.reshape(-1)[:n], off

    def hp_fragment(p):
        return getattr(p, "_hp_mapping", None)

    def own_state(p, key):
        """ZeRO 0: the torch optimizer's state of the module's own parameter (None when absent)."""
        return base.state.get(p, {}).get(key)

    cur = {}  # the step's report: tensors, meta and the ZeRO-0 norm, filled by capture_grads

    def capture_grads():
        """The reduced gradients between the last backward and the step (see the module doc)."""
        tensors, meta, grads = cur["tensors"], cur["meta"], []
        for name, p in named:
            if stage == 3:
                t, off = z3_local(name, p, safe_get_local_grad(p))
                if t.numel():
                    piece(tensors, meta, "grad", name, t, off)
            elif getattr(p, "_hp_grad", None) is not None:
                # the bf16 optimizer (ZeRO 1, bf16 with fp32 accumulation): its full fp32
                # accumulation buffer, all-reduced on every rank
                grads.append(p._hp_grad)
                tensors["grad:" + name] = p._hp_grad.detach().reshape(p.shape).clone()
            elif hp_fragment(p) is not None and p.grad is None:
                h = p._hp_mapping
                fr = h.get_lp_grad_fragment(p._index_in_param_group).reshape(-1)
                if fr.numel() == p.numel():  # a full accumulation buffer: this rank's fragment
                    fr = fr.narrow(0, h.lp_fragment_address.start, h.lp_fragment_address.numel)
                piece(tensors, meta, "grad", name, fr, h.lp_fragment_address.start)
            elif p.grad is not None:
                if not getattr(p, "ds_pipe_replicated", False):
                    grads.append(p.grad)
                tensors["grad:" + name] = p.grad.detach().clone()
        if stage == 0:
            cur["fallback_norm"] = zero0_norm(torch, engine, grads, piped)
        if "grad" not in kinds:
            tensors.clear()
            meta.clear()

    if piped:
        hook_optimizer_step(engine, capture_grads)
    for s in range(run.get("first_step", 0), run["steps"]):  # this run's steps (docs/TARGETS.md)
        data, _ = safetensors_io.read(os.path.join(run_dir, "data", "step%d.safetensors" % s))
        cur.update(tensors={}, meta={}, fallback_norm=None)
        tensors, meta = cur["tensors"], cur["meta"]
        mine = range(dp_rank * A, (dp_rank + 1) * A)
        if piped:
            recorded.clear()
            engine.train_batch(iter([(data["inputs"][g], data["targets"][g]) for g in mine]))
            loss_sum, loss_count = sum(recorded), len(recorded)
        else:
            loss_sum, loss_count = 0.0, A
            for g in mine:
                loss = engine(data["inputs"][g], data["targets"][g])
                loss_sum += loss.item()
                engine.backward(loss * dp if plant == "sum_not_average" else loss)
                if g == mine[-1]:
                    capture_grads()
                engine.step()
        fallback_norm = cur["fallback_norm"]
        norm = engine.get_global_grad_norm()
        if norm is None:
            norm = fallback_norm
        norm = float(norm) if norm is not None else float("nan")
        for name, p in named:
            if stage == 3:
                t, off = z3_local(name, p, p.ds_tensor)
                if t.numel():
                    piece(tensors, meta, "param", name, t, off)
                if "master" in kinds:
                    t, off = z3_local(name, p, safe_get_local_fp32_param(p))
                    if t.numel():
                        piece(tensors, meta, "master", name, t, off)
                for slot in slots:
                    st = safe_get_local_optimizer_state(p, slot_key(o, slot))
                    t, off = z3_local(name, p, st)
                    if t.numel():
                        piece(tensors, meta, slot, name, t, off)
                continue
            tensors["param:" + name] = p.detach().clone()
            h = hp_fragment(p)
            if h is not None:
                off = h.lp_fragment_address.start
                if "master" in kinds:
                    piece(tensors, meta, "master", name, h.get_hp_fragment(), off)
                for slot in slots:
                    piece(tensors, meta, slot, name, h.get_hp_fragment(slot_key(o, slot)), off)
            elif stage == 0:
                holder, at = master_of(dsopt, p)
                mine = (lambda t: t) if at is None else (lambda t: t.narrow(0, at, p.numel()).view(p.shape))
                if "master" in kinds and holder is not None:
                    tensors["master:" + name] = mine(holder).detach().clone()
                for slot in slots:
                    st = own_state(holder if holder is not None else p, slot_key(o, slot))
                    if st is not None:
                        tensors[slot + ":" + name] = mine(st).detach().clone()
        safetensors_io.write(os.path.join(out_dir, "rank%d.step%d.safetensors" % (rank, s)), tensors, meta)
        steps.append({"loss_sum": loss_sum, "loss_count": loss_count, "grad_norm": norm})
    if run.get("save_checkpoint"):
        save_checkpoint(engine, run["save_checkpoint"], cfg, rank)
    if rank == 0 and how:  # a block recomputed in backward runs twice per layer per micro-step
        print("activation checkpointing: %d block runs" % engine.module.block_runs, flush=True)
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump({"steps": steps}, f)
    serve.end_group(tdist)
    if rank == 0:
        serve.record_imports()


# ---------------------------------------------------------------------------------------------
# Checkpoints (docs/TARGETS.md, two launches): engine.save_checkpoint after the save phase's last
# step, engine.load_checkpoint after deepspeed.initialize in the reload phase.
CKPT_TAG = "paradiff"
LAYOUT_FILE = "paradiff_layout.json"  # the save layout, beside DeepSpeed's files


def save_checkpoint(engine, ckpt, cfg, rank):
    from deepspeed.checkpoint import UNIVERSAL_CHECKPOINT_INFO
    # The client state DeepSpeed's universal conversion requires (its own tests save the same).
    engine.save_checkpoint(ckpt, tag=CKPT_TAG, client_state={UNIVERSAL_CHECKPOINT_INFO: {}})
    if rank == 0:
        with open(os.path.join(ckpt, LAYOUT_FILE), "w") as f:
            json.dump({"dp": cfg["parallel"]["dp"], "stage": cfg["zero"]["stage"]}, f)


def universal_if_resharded(ckpt, cfg, ds, rank):
    """DeepSpeed reloads a checkpoint whose optimizer state is partitioned over dp (its
    *zero_pp_rank_* files: ZeRO 1-3, and the BF16_Optimizer a pipeline runs at ZeRO 0) into another
    dp or ZeRO stage only as a universal checkpoint (its engine refuses another dp otherwise): rank
    0 converts it with DeepSpeed's own ds_to_universal, as a user does, and the config asks for
    load_universal. Other checkpoints (full model and optimizer states) reload into any dp as they
    are. Returns the tag to load."""
    import glob
    import torch.distributed as tdist
    saved = json.load(open(os.path.join(ckpt, LAYOUT_FILE)))
    stage, dp = cfg["zero"]["stage"], cfg["parallel"]["dp"]
    partitioned = glob.glob(os.path.join(ckpt, CKPT_TAG, "*zero_pp_rank_*"))
    if not partitioned or (saved["stage"] == stage and saved["dp"] == dp):
        return CKPT_TAG
    universal = CKPT_TAG + "_universal"
    if rank == 0:
        import subprocess
        subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                        os.path.join(ckpt, CKPT_TAG), "--output_folder", os.path.join(ckpt, universal),
                        "--num_extract_workers", "1", "--num_merge_workers", "1"], check=True)
    tdist.barrier()
    merge(ds, {"checkpoint": {"load_universal": True}})
    return universal


def checkpoint_function(deepspeed, how):
    """The activation-checkpoint function run(fn, h) that `how` names (the docstring's values)."""
    from model import torch_checkpoint
    if not how.startswith("deepspeed"):
        return torch_checkpoint(how)
    deepspeed.checkpointing.configure(None)  # its defaults: no partitioning, nothing offloaded
    return {"deepspeed": deepspeed.checkpointing.checkpoint,
            "deepspeed_non_reentrant": deepspeed.checkpointing.non_reentrant_checkpoint}[how]


def zero0_norm(torch, engine, grads, piped):
    """The float32 norm of the reduced gradients where DeepSpeed computes none (ZeRO 0 in fp32):
    the rank's own (a tied copy marked ds_pipe_replicated left out), squared and summed over the
    pipeline stages of its data-parallel replica."""
    if not grads and not piped:
        return None
    if not piped:
        return float(torch.nn.utils.get_total_norm([x.float() for x in grads]))
    from group_norm import group_norm
    return float(group_norm(grads, engine.grid.get_pipe_parallel_group()))


def hook_optimizer_step(engine, before):
    """Calls before() when the pipeline schedule reaches OptimizerStep: after ReduceTiedGrads and
    ReduceGrads, before the engine clips and steps (the gradients the report holds)."""
    from deepspeed.runtime.pipe import schedule
    table = type(engine)._INSTRUCTION_MAP
    step = table[schedule.OptimizerStep]

    def hooked(self, *args, **kwargs):
        before()
        return step(self, *args, **kwargs)

    table[schedule.OptimizerStep] = hooked


def master_of(dsopt, p):
    """(holder, at): the fp32 tensor that holds p's master copy under DeepSpeed's ZeRO-0
    mixed-precision wrappers (also used for bf16 with bf16 accumulation), the optimizer's state
    keyed by it. FP16_UnfusedOptimizer (a client torch optimizer): fp32_groups[i][j], the copy of
    fp16_groups[i][j], at None. FP16_Optimizer (DeepSpeed's own fused optimizer): the flat
    fp32_groups_flat[i], fp16_groups[i] concatenated in order, p's copy from element `at` on.
    (None, None) when there is none."""
    groups = getattr(dsopt, "fp16_groups", [])
    for lp_group, hp_group in zip(groups, getattr(dsopt, "fp32_groups", [])):
        for lp, hp in zip(lp_group, hp_group):
            if lp is p:
                return hp, None
    for lp_group, flat in zip(groups, getattr(dsopt, "fp32_groups_flat", [])):
        at = 0
        for lp in lp_group:
            if lp is p:
                return flat, at
            at += lp.numel()
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", nargs="?")
    ap.add_argument("--serve", action="store_true", help="protocol 2: serve run dirs from stdin (serve.py)")
    ap.add_argument("--plant", default="", choices=PLANTS)
    ap.add_argument("--ds", default="{}", help="JSON merged into the exported DeepSpeed config")
    ap.add_argument("--pipe", action="store_true",
                    help="a deepspeed.pipe PipelineModule also at pp 1 (DeepSpeed's PipelineEngine)")
    ap.add_argument("--ds-optimizer", action="store_true",
                    help="DeepSpeed's own optimizer (the exported \"optimizer\" section) instead of torch's")
    ap.add_argument("--zero-init", action="store_true",
                    help="build the model inside deepspeed.zero.Init (ZeRO 3): parameters partitioned as constructed")
    ap.add_argument("--print-ds-config", metavar="CONFIG", help="print the DeepSpeed config of a paradiff config")
    ap.add_argument("--print-export", metavar="CONFIG", help="print export_deepspeed(CONFIG) (paradiff export's twin)")
    a = ap.parse_args()
    extra = json.loads(a.ds)
    if a.print_export:
        print(json.dumps(export_deepspeed(json.load(open(a.print_export))), indent=2, sort_keys=True))
        return
    if a.print_ds_config:
        print(json.dumps(ds_config(json.load(open(a.print_ds_config)), extra, a.ds_optimizer), indent=2, sort_keys=True))
        return
    if a.run_dir is None and not a.serve:
        ap.error("a run dir, or --serve")
    # DeepSpeed's own optimizer runs a C++ op: FusedAdam's, or with offload_optimizer its CPU Adam.
    # A warm worker loads both once for all its configs; a single launch leaves each rank to load
    # the one its config needs.
    prepare(ops=("FusedAdamBuilder", "CPUAdamBuilder") if a.ds_optimizer and a.serve else ())
    sys.path.insert(0, TORCH_ADAPTER)
    import serve
    if a.serve:
        serve.serve(lambda run_dir: serve.fork_ranks(train, run_dir, a, extra))
    else:
        serve.fork_ranks(train, a.run_dir, a, extra)


def prepare(ops=()):
    """The environment and imports every config needs, done once before the ranks are forked (by a
    warm worker, protocol 2, once for all its configs; the modules its ranks import lazily follow
    after the first config: adapters/torch/serve.py), and DeepSpeed's C++ ops named in `ops` (op
    builders). A builder loads its op once per process (OpBuilder._loaded_ops), but first asks
    py-cpuinfo twice for the CPU's flags, and py-cpuinfo answers from a fresh interpreter: 2.2 s on
    every rank of every config where the rank loads it; loaded here, the forked ranks find it, and
    py-cpuinfo answers once for all the builders (the same machine's flags each time)."""
    os.environ["DS_ACCELERATOR"] = "cpu"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # DeepSpeed's JIT ops (its CPU Adam) are rebuilt whenever their source paths change, and the
    # target files reach the release through the work/venv link: resolved, the paths are the ones
    # scripts/setup-targets built the op with, and a run loads that build instead of rebuilding it.
    sys.path[:] = [os.path.realpath(x) if x else x for x in sys.path]
    if os.environ.get("TORCH_EXTENSIONS_DIR"):
        os.environ["TORCH_EXTENSIONS_DIR"] = os.path.realpath(os.environ["TORCH_EXTENSIONS_DIR"])
    import torch._dynamo  # noqa: F401  (torch's optimizers import it on construction: once, before the fork)
    import deepspeed  # noqa: F401  (imported once, before the ranks are forked)
    import deepspeed.comm.torch  # noqa: F401
    ds_torch_comm = sys.modules["deepspeed.comm.torch"]  # (the package's attribute `torch` is torch)
    # DeepSpeed's CPU TorchBackend JIT-compiles a shared-memory all-reduce (g++, ~100 s on two
    # cores the first time on a machine) used only by inference_all_reduce (inference / AutoTP);
    # training's collectives are torch.distributed's (gloo). Not building it changes no training
    # path (docs/DEEPSPEED.md).
    ds_torch_comm.build_shm_op = lambda: None
    if ops:
        from deepspeed.accelerator import get_accelerator
        try:
            import cpuinfo
        except ImportError:  # the builders fall back to lscpu
            pass
        else:
            info = cpuinfo.get_cpu_info()
            cpuinfo.get_cpu_info = lambda: copy.deepcopy(info)
        for op in ops:
            get_accelerator().create_op_builder(op).load()


if __name__ == "__main__":
    main()
