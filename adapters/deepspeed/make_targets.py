#!/usr/bin/env python3
"""Writes the DeepSpeed target files of this directory (docs/DEEPSPEED.md explains each choice).

Usage: python3 adapters/deepspeed/make_targets.py     (rewrites *.json here; idempotent)

One adapter, several declarations, because a target file's "supports" cannot tie a precision or a
report to a ZeRO stage:
  deepspeed.json            the newest release: ZeRO 0, 2, 3; fp32, and bf16 with bf16 accumulation
  deepspeed_fp32acc.json    bf16 with fp32 accumulation (ZeRO 1: DeepSpeed's BF16_Optimizer; 2, 3)
  deepspeed_zero1.json      ZeRO 1 (DeepSpeed's ZeRO optimizer), whose gradients are partitioned
  deepspeed_adam.json       deepspeed.json with DeepSpeed's own Adam / AdamW (--ds-optimizer; on the CPU
                            accelerator its C++ CPU Adam, JIT-built on first use), which holds its
                            betas in float32: "optimizer_arithmetic" declares it
  deepspeed_planted.json    deepspeed.json's fp32 part with --plant sum_not_average
  deepspeed_pp.json         deepspeed.pipe (PipelineModule, pp > 1, with dp), fp32, ZeRO 0 and 1 (the
                            pipeline takes no more); ZeRO 1's gradients are partitioned
  deepspeed_pp_bf16.json    the same in bf16 at ZeRO 0: DeepSpeed runs its BF16_Optimizer under a
                            pipeline (engine.py _do_optimizer_sanity_check), which partitions the
                            fp32 master weights and optimizer state over dp from stage 0 and clips
                            in the accumulation dtype ("optimizer_arithmetic"); so its configs at
                            pp 1 run a one-stage pipeline too (--pipe)
  deepspeed_pp_bf16_zero1.json  the same at ZeRO 1 (its ZeRO optimizer, which clips in float32)
  deepspeed-X.json          the same as deepspeed.json for an older pinned release X
  deepspeed-X_fp32acc.json  the same as deepspeed_fp32acc.json for X
  deepspeed-X_pp.json       deepspeed.pipe for X at ZeRO 0, fp32 and bf16 (kept as its recorded
                            rediscovery campaign drew it: its bf16 configs' master weights and
                            optimizer state are declared replicated, which they are not, see above)
  deepspeed-X_ckpt.json     deepspeed-X.json with deepspeed.json's checkpoints (deepspeed-X.json itself
                            declares none: its recorded campaigns keep their configs)
A release is a line in adapters/envs/deepspeed-X.txt plus its X in RELEASES below.
"""
import json
import os

NEWEST = "0.19.8"
RELEASES = ["0.18.5", "0.18.6", "0.18.9", "0.19.2"]
TORCH = "torch-2.15.0"

FP32 = {"param": "fp32", "compute": "fp32", "reduce": "fp32", "accumulate": "fp32"}


def bf16(reduce, accumulate, master_weights=True):
    return {"param": "bf16", "compute": "bf16", "reduce": reduce, "accumulate": accumulate,
            "master_weights": master_weights}


BF16 = [bf16("fp32", "bf16"), bf16("bf16", "bf16")]
BF16_FP32ACC = [bf16("fp32", "fp32"), bf16("bf16", "fp32")]
# Stages reduce differently (docs/DEEPSPEED.md, "Gradient reduction"): ZeRO 0 and 1 once per
# step, 2 and 3 every micro-step; ZeRO 0 and the bf16 optimizer scale after the sum, the ZeRO
# optimizers divide before it; gloo promises no rank order. No single value holds for a file.
UNKNOWN = {"when": "unknown", "order": "unknown", "average": "unknown"}
# DeepSpeed-only settings campaigns vary (the config's target_options, merged into DeepSpeed's config
# by adapter.py; a stage ignores the others' keys). Sizes span "smaller than one tensor" to "the
# whole test model in one piece; docs/DEEPSPEED.md, "Options".
OPTIONS = {
    "zero_optimization.overlap_comm": [True, False],
    "zero_optimization.contiguous_gradients": [True, False],
    "zero_optimization.reduce_scatter": [True, False],
    "zero_optimization.allgather_partitions": [True, False],
    "zero_optimization.allgather_bucket_size": [64, 500000000],
    "zero_optimization.stage3_param_persistence_threshold": [0, 100000],
    "zero_optimization.stage3_prefetch_bucket_size": [0, 64, 50000000],
    "zero_optimization.stage3_max_live_parameters": [64, 1000000000],
}
# ZeRO-Offload, varied in the newest release's ZeRO files: the optimizer's state and step on the
# host (ZeRO 1-3: the stages' own offload paths; ZeRO 0 ignores it), and ZeRO 3's parameters there
# too. On the CPU accelerator host and device are one memory, but the code paths are the offload
# ones (the optimizer's own partition buffers and copies, the gradient norm from per-parameter
# norms). A client torch optimizer needs zero_force_ds_cpu_optimizer false (adapter.py).
OFFLOAD_OPTIMIZER = {"zero_optimization.offload_optimizer.device": ["cpu"]}
OFFLOAD_PARAM = {"zero_optimization.offload_param.device": {"values": ["cpu"], "zero_stages": [3]}}
OFFLOAD = dict(OFFLOAD_OPTIMIZER, **OFFLOAD_PARAM)
# ZeRO 3's own settings, varied in the newest release's files that run it (older files keep the
# configs their recorded campaigns drew): ZeRO++'s hierarchical partitioning (hpZ: a secondary copy
# of each parameter's shard within groups of that many dp ranks, gathered from there in backward;
# DeepSpeed refuses a size that does not divide dp, hence "divides"), the optimizer's sub-groups
# (one element: every parameter in a sub-group of its own), and the ways ZeRO 3 fetches a module's
# parameters: one all-reduce of a flat buffer where each rank fills its shards instead of an
# all-gather, and one all-gather per parameter instead of buckets.
ZERO3 = {
    "zero_optimization.zero_hpz_partition_size": {"values": [2, 4], "divides": "dp"},
    "zero_optimization.sub_group_size": [1, 64, 4096],
    "zero_optimization.stage3_use_all_reduce_for_fetch_params": [True, False],
    "zero_optimization.stage3_allgather_sequential": [True, False],
}
# Not varied: stage3_module_granularity_threshold. On the test models the root's granularity
# (parameters per module under it) is at or just below its blocks' (e.g. 95 against 96), so every
# threshold that takes effect makes the root a z3 leaf module, and a leaf module whose inputs need
# no gradient (token ids) fails in backward (DeepSpeed issue 5524's class).
# The adapter's own options (adapter.py), varied in the newest release's files without a pipeline:
# activation checkpointing, each block recomputed in backward under DeepSpeed's checkpoint
# (reentrant or not) or torch's, so that ZeRO's gradient hooks fire during the recomputing backward
# and ZeRO 3 gathers the parameters again for it; the model's parameters in a tree of submodules
# (module_tree.py), which ZeRO 3 gathers, prefetches and releases one by one; and memory poisoning:
# every torch.empty filled with NaN, so that a read of memory DeepSpeed never wrote shows every run.
ADAPTER = {
    "adapter.activation_checkpointing": ["deepspeed", "deepspeed_non_reentrant", "torch", "torch_reentrant"],
    "adapter.module_tree": ["nested"],
    "adapter.poison_uninitialized": [True],
}
# Where the gradients are divided by dp around their reduction: a factor before the sum and dp over
# it after (gradient_predivide_factor; DeepSpeed's default 1: all of it after), or all of it before
# (prescale_gradients). ZeRO 2 and 3 refuse either with reduce_scatter, their default ("not yet
# supported ... with reduce scatter enabled"), hence "requires"; ZeRO 0 ignores reduce_scatter.
# Factors: powers of two, below, at and above the test layouts' dp (1-4).
SCALING = {
    "gradient_predivide_factor": {"values": [2.0, 4.0, 8.0],
                                  "requires": {"zero_optimization.reduce_scatter": [False]}},
    "prescale_gradients": {"values": [True], "requires": {"zero_optimization.reduce_scatter": [False]}},
}
# ZeRO 1 and 2 reduce a bucket's gradient slices to each slice's owner: by default one all-reduce
# of the whole bucket, each rank keeping its slices (use_multi_rank_bucket_allreduce); false: one
# reduce per destination rank, whose result only that rank reads (stage_1_and_2.py
# average_tensor, allreduce_no_retain with a rank).
REDUCE_TO_OWNER = {"zero_optimization.use_multi_rank_bucket_allreduce": {"values": [False],
                                                                        "zero_stages": [1, 2]}}
# ZeRO 1 and 2's elastic checkpoints (elastic_checkpoint, off by default): each rank saves its
# optimizer state without padding and the step beside it, and a load merges every rank's files and
# partitions them again (stage_1_and_2.py state_dict, _restore_elastic_base_optimizer_state). It
# changes what a checkpoint holds only: every file that saves checkpoints.
ELASTIC = {"zero_optimization.elastic_checkpoint": {"values": [True], "zero_stages": [1, 2]}}
OPTIONS_ZERO3 = dict(OPTIONS, **ZERO3, **OFFLOAD, **ADAPTER, **SCALING, **REDUCE_TO_OWNER, **ELASTIC)
# The same scaling under deepspeed.pipe (ZeRO 0 and 1 there, which take it with reduce_scatter at
# its default): the newest release's pipeline files.
PIPE_SCALING = {name: spec["values"] for name, spec in SCALING.items()}
# ZeRO 1 and 2's parameter alignment (0.19.8 added it; older releases refuse the key): each
# parameter starts at a 16-byte boundary of its group's flat buffer, with padding between
# parameters (stage_1_and_2.py), so partitions, gradient buckets and the fragment maps the adapter
# reads step over padding inside the buffer, not only at its end. The newest release's files.
ALIGNMENT = {"zero_optimization.parameter_alignment": {"values": [True], "zero_stages": [1, 2]}}
OPTIONS_NEWEST = dict(OPTIONS_ZERO3, **ALIGNMENT)
# The older releases' _ckpt files: the same with torch's checkpoint only. Before 0.19.8 DeepSpeed's
# own (deepspeed.checkpointing, reentrant or not) fails on the CPU accelerator at its first call
# (get_accelerator().Stream is None there; docs/FINDINGS.md).
OPTIONS_OLDER = dict(OPTIONS_ZERO3, **{"adapter.activation_checkpointing": ["torch", "torch_reentrant"]})
# bf16 with fp32 accumulation at ZeRO 1 is DeepSpeed's BF16_Optimizer, which keeps whole gradients,
# except under offload, where DeepSpeed takes its ZeRO-1 optimizer, which keeps each rank's slice
# only (engine.py _do_optimizer_sanity_check: "... == 1 and not self.zero_cpu_offload()"): the
# fp32acc file declares stage 1's gradients whole, so it offloads at ZeRO 2 and 3 only (ZeRO 1's
# offload is deepspeed_zero1.json's).
# The BF16_Optimizer's immediate gradient update (bf16.immediate_grad_update, off by default in
# DeepSpeed's precision config): a hook adds each micro-step's bf16 gradient into the fp32 gradient
# buffer during backward and frees it, instead of all of them at the accumulation boundary
# (bf16_optimizer.py create_grad_acc_hooks; the pipeline engine then skips its per-micro-step
# update_hp_grads). Only where DeepSpeed runs that optimizer: bf16 with fp32 accumulation at ZeRO 1
# here, and the pipeline's bf16 at ZeRO 0 (deepspeed_pp_bf16.json).
IMMEDIATE_GRAD_UPDATE = {"bf16.immediate_grad_update": [True]}
OPTIONS_FP32ACC = dict(OPTIONS_NEWEST, **{
    "zero_optimization.offload_optimizer.device": {"values": ["cpu"], "zero_stages": [2, 3]},
    "bf16.immediate_grad_update": {"values": [True], "zero_stages": [1]},
})
# Not varied: ZeRO-Offload++'s offload_optimizer.ratio (ZeRO 3 with DeepSpeed's own optimizer). It
# keeps the sub-groups below the ratio on the accelerator, stepped by a torch AdamW, but it places
# them by the accelerator's device name (stage3.py subgroup_to_device), which on the CPU accelerator
# is "cpu" too: every sub-group steps with the CPU Adam, and the option would claim coverage it
# does not give here.
# Checkpoints (the newest release's non-pipeline files): saved and reloaded through DeepSpeed's
# API, into another dp (ZeRO 1-3 through a universal checkpoint, adapter.py) and between ZeRO 1 and
# 2; DeepSpeed's universal checkpoint does not cross between ZeRO 3 and stages 1 / 2 (the model
# states files are named differently and load_checkpoint finds none), nor does a ZeRO 0 checkpoint
# (no optimizer partitions to convert) reload into a ZeRO stage.
# A resharded ZeRO checkpoint goes through ds_to_universal, which reads Adam's state names only
# (KeyError 'exp_avg' for SGD: DeepSpeed issue 8608, open): SGD checkpoints reload as saved.
CHECKPOINT = {"reload_changes": ["dp", "zero_stage"],
              "reload_zero_stages": {"0": [0], "1": [1, 2], "2": [1, 2], "3": [3]},
              "reload_changes_optimizers": ["adam", "adamw"]}
# Under deepspeed.pipe: the same pp (DeepSpeed's layer files could take another, its ZeRO files
# cannot), ZeRO 0 and 1 each into itself. The bf16 ZeRO-0 file declares none: its BF16_Optimizer
# cannot load its own checkpoint (adapters/deepspeed/repro/pipe_bf16_zero0_checkpoint_reload.py).
PIPE_CHECKPOINT = {"reload_changes": ["dp", "zero_stage"], "reload_zero_stages": {"0": [0], "1": [1]},
                   "reload_changes_optimizers": ["adam", "adamw"]}
# Not varied: round_robin_gradients (DeepSpeed's own fragment accessors, which the adapter's
# reports use, fail under it: adapters/deepspeed/repro/zero2_round_robin_full_grad.py).


def target(name, description, version, stages, precision, reports=("grad", "optimizer"), extra_args=(),
           partitioned_from=None, parallel=("dp",), options=None, checkpoint=False,
           optimizers=("sgd", "adam", "adamw")):
    venv = "{target_dir}/../../work/venv/"
    t = {
        "protocol": 2,
        "name": name,
        "description": description,
        # DeepSpeed's JIT-built C++ ops (its CPU Adam) live beside the release they were built from.
        "command": ["/usr/bin/env", "PYTHONPATH=" + venv + "deepspeed-" + version,
                    "TORCH_EXTENSIONS_DIR=" + venv + "deepspeed-" + version + "/.torch_extensions",
                    venv + TORCH + "/bin/python", "{target_dir}/adapter.py", "--serve"] + list(extra_args),
        "timeout_s": 240,
        "reports": list(reports),
        "grad_norm_dtype": "fp32",
        "grad_reduction": UNKNOWN,
        "model_arithmetic": "own",
        "supports": {
            "max_world": 4, "parallel": list(parallel), "zero_stages": stages, "models": ["gpt"],
            "activations": ["gelu", "swiglu"], "optimizers": list(optimizers),
            # DeepSpeed's own WarmupLR / WarmupDecayLR / WarmupCosineLR (export deepspeed).
            "lr_schedules": ["constant", "warmup", "warmup_linear", "warmup_cosine"],
            "precision": precision, "clip_grad_norm": True, "max_steps": 8,
        },
    }
    if partitioned_from:
        t["partitioned_from"] = partitioned_from
    if options:
        t["options"] = options
    if checkpoint:  # True: CHECKPOINT; or the file's own "checkpoint" object
        t["supports"]["checkpoint"] = CHECKPOINT if checkpoint is True else checkpoint
    if "pp" in parallel:
        # DeepSpeed runs its own TrainSchedule (1F1B, no interleaving): the micro-batches'
        # backwards in the same order as GPipe's and 1F1B's, so both are the same float sums.
        t["supports"]["schedules"] = ["gpipe", "1f1b"]
    return t


def files():
    out = {}
    for v in [NEWEST] + RELEASES:
        base = "deepspeed" if v == NEWEST else "deepspeed-" + v
        out[base + ".json"] = target(
            "deepspeed-" + v,
            "DeepSpeed %s (CPU accelerator, gloo): ZeRO 0, 2, 3, fp32 and bf16 with bf16 accumulation, "
            "client torch optimizers (adapters/deepspeed/adapter.py, docs/DEEPSPEED.md)" % v,
            v, [0, 2, 3], [FP32] + BF16, options=OPTIONS_NEWEST if v == NEWEST else OPTIONS,
            checkpoint=v == NEWEST)
        out[base + "_fp32acc.json"] = target(
            "deepspeed-%s-fp32acc" % v,
            "DeepSpeed %s: bf16 with fp32 gradient accumulation (ZeRO 1 = DeepSpeed's BF16_Optimizer, "
            "ZeRO 2, 3; DeepSpeed refuses it at ZeRO 0)" % v,
            v, [1, 2, 3], BF16_FP32ACC, options=OPTIONS_FP32ACC if v == NEWEST else OPTIONS,
            checkpoint=v == NEWEST)
        if v != NEWEST:
            # The older releases' checkpoints and the newest file's options in files of their own:
            # the files above keep the configs their recorded rediscovery campaigns drew
            # (docs/FINDINGS.md).
            out[base + "_ckpt.json"] = target(
                "deepspeed-%s-ckpt" % v,
                "deepspeed-%s.json with checkpoints saved and reloaded through DeepSpeed's API (another "
                "dp through its universal checkpoint) and deepspeed.json's options" % v,
                v, [0, 2, 3], [FP32] + BF16, options=OPTIONS_OLDER, checkpoint=True)
        if v != NEWEST:
            out[base + "_pp.json"] = target(
                "deepspeed-%s-pp" % v,
                "DeepSpeed %s deepspeed.pipe: paradiff's GPT as a PipelineModule (tied embeddings as a "
                "TiedLayerSpec), pp with dp, ZeRO 0, fp32 and bf16 with bf16 accumulation (adapters/deepspeed/pipe.py)"
                % v, v, [0], [FP32] + BF16, parallel=("dp", "pp"))
    out["deepspeed_pp.json"] = target(
        "deepspeed-%s-pp" % NEWEST,
        "DeepSpeed %s deepspeed.pipe: paradiff's GPT as a PipelineModule (tied embeddings as a "
        "TiedLayerSpec), pp with dp, ZeRO 0 and 1, fp32 (adapters/deepspeed/pipe.py)" % NEWEST,
        NEWEST, [0, 1], [FP32], parallel=("dp", "pp"), partitioned_from={"grad": 1},
        checkpoint=PIPE_CHECKPOINT, options=PIPE_SCALING)
    pp_bf16 = target(
        "deepspeed-%s-pp-bf16" % NEWEST,
        "DeepSpeed %s deepspeed.pipe in bf16 with bf16 accumulation, ZeRO 0: its BF16_Optimizer "
        "partitions the fp32 master weights and optimizer state over dp and clips in the accumulation "
        "dtype; pp 1 runs a one-stage pipeline (adapters/deepspeed/pipe.py, docs/DEEPSPEED.md)" % NEWEST,
        NEWEST, [0], BF16, parallel=("dp", "pp"), partitioned_from={"grad": 1, "optimizer": 0},
        extra_args=["--pipe"], options=dict(IMMEDIATE_GRAD_UPDATE, **PIPE_SCALING))
    # bf16_optimizer.py step(): clip_tensors_by_global_norm multiplies its gradient buffers, of
    # dtype grad_acc_dtype, in place (see Note [Clip in the accumulation dtype] in
    # oracles/update_oracle.cpp); ZeRO 1's optimizer clips its float32 partition.
    pp_bf16["optimizer_arithmetic"] = {"clip": "accumulate"}
    out["deepspeed_pp_bf16.json"] = pp_bf16
    out["deepspeed_pp_bf16_zero1.json"] = target(
        "deepspeed-%s-pp-bf16-zero1" % NEWEST,
        "DeepSpeed %s deepspeed.pipe in bf16 with bf16 accumulation, ZeRO 1 (its ZeRO optimizer); pp 1 "
        "runs a one-stage pipeline (adapters/deepspeed/pipe.py, docs/DEEPSPEED.md)" % NEWEST,
        NEWEST, [1], BF16, parallel=("dp", "pp"), partitioned_from={"grad": 1}, extra_args=["--pipe"],
        checkpoint=PIPE_CHECKPOINT, options=PIPE_SCALING)
    out["deepspeed_zero1.json"] = target(
        "deepspeed-%s-zero1" % NEWEST,
        "DeepSpeed %s ZeRO 1 (its ZeRO optimizer): it reduces each gradient slice to its owner only, "
        "so its gradients are partitioned from stage 1 (docs/DEEPSPEED.md)" % NEWEST,
        NEWEST, [1], [FP32] + BF16, partitioned_from={"grad": 1},
        options=dict(OPTIONS, **OFFLOAD_OPTIMIZER, **ADAPTER, **ALIGNMENT, **REDUCE_TO_OWNER, **ELASTIC),
        checkpoint=True)
    own = target(
        "deepspeed-%s-adam" % NEWEST,
        "DeepSpeed %s with its own Adam / AdamW (the config's optimizer section; the CPU accelerator's "
        "C++ CPU Adam), ZeRO 0, 2, 3, fp32 and bf16 with bf16 accumulation (docs/DEEPSPEED.md)" % NEWEST,
        NEWEST, [0, 2, 3], [FP32] + BF16, extra_args=["--ds-optimizer"], options=OPTIONS_NEWEST, checkpoint=True,
        optimizers=("adam", "adamw"))
    # DeepSpeed JIT-builds the op on first use; scripts/setup-targets builds it ahead (the release's
    # pinned file lists it), so a run only loads it.
    # ops/csrc/includes/cpu_adam.h keeps beta1, beta2 and their powers in float32 (see Note [Float32
    # optimizer hyperparameters] in oracles/update_oracle.cpp).
    own["optimizer_arithmetic"] = {"hyperparameters": "fp32"}
    out["deepspeed_adam.json"] = own
    # bf16 master weights and gradients (bf16.bf16_master_weights_and_grads, ZeRO 1-3 only): no
    # fp32 copy; DeepSpeed then needs the optimizer on the host, its CPU Adam keeping fp32 state and
    # writing the bf16 weights (adapter.py export_deepspeed turns offload on). ZeRO 1 under offload
    # is its ZeRO-1 optimizer (gradients partitioned). The clip multiplies the bf16 gradient
    # partition in place (stage_1_and_2.py / stage3.py unscale_and_clip_grads).
    low = target(
        "deepspeed-%s-bf16-master" % NEWEST,
        "DeepSpeed %s with bf16 master weights and gradients (no fp32 copy), ZeRO 1-3, its own Adam / "
        "AdamW on the host (docs/DEEPSPEED.md)" % NEWEST,
        NEWEST, [1, 2, 3], [bf16("fp32", "bf16", False), bf16("bf16", "bf16", False)],
        extra_args=["--ds-optimizer"], partitioned_from={"grad": 1}, optimizers=("adam", "adamw"),
        checkpoint=dict(CHECKPOINT, reload_zero_stages={"1": [1, 2], "2": [1, 2], "3": [3]}),
        options=dict(OPTIONS, **ZERO3, **OFFLOAD_PARAM, **ADAPTER, **ALIGNMENT, **REDUCE_TO_OWNER, **ELASTIC))
    low["optimizer_arithmetic"] = {"hyperparameters": "fp32", "clip": "accumulate"}
    out["deepspeed_bf16_master.json"] = low
    # Models built inside deepspeed.zero.Init (adapter.py --zero-init), as large models are built:
    # each parameter partitioned as its module is constructed, and F.linear replaced by ZeRO 3's own
    # autograd function (memory_efficient_linear, DeepSpeed's default; varied off). ZeRO 3 only, in
    # a file of its own: the other files keep the configs their campaigns drew.
    out["deepspeed_zero_init.json"] = target(
        "deepspeed-%s-zero-init" % NEWEST,
        "DeepSpeed %s ZeRO 3 with the model built inside deepspeed.zero.Init (parameters partitioned "
        "as constructed, F.linear as ZeRO 3's memory-efficient linear), fp32 and bf16 with bf16 "
        "accumulation (docs/DEEPSPEED.md)" % NEWEST,
        NEWEST, [3], [FP32] + BF16, extra_args=["--zero-init"], checkpoint=True,
        options=dict(OPTIONS_NEWEST, **{"zero_optimization.memory_efficient_linear": [False]}))
    out["deepspeed_planted.json"] = target(
        "deepspeed-%s-planted" % NEWEST,
        "deepspeed.json (fp32) with the planted adapter bug sum_not_average (each rank's loss times dp: "
        "gradients summed, not averaged): the harness self-test",
        NEWEST, [0, 2, 3], [FP32], extra_args=["--plant", "sum_not_average"])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, t in files().items():
        with open(os.path.join(here, name), "w") as f:
            json.dump(t, f, indent=2)
            f.write("\n")
        print(name)


if __name__ == "__main__":
    main()
