#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): a ZeRO 1 or 2 checkpoint saved with
"elastic_checkpoint": true and a torch optimizer (torch.optim.Adam, AdamW, SGD: any optimizer that
keeps its step per parameter, or none) cannot be loaded: engine.load_checkpoint fails with an
AssertionError, in the same layout and with the same config that saved it.

stage_1_and_2.py state_dict() writes the elastic step (BASE_OPTIMIZER_STATE_STEP) only when the
optimizer's param_groups hold a "step", which DeepSpeed's own Adam does and torch's optimizers do
not (torch keeps it in each parameter's state); _restore_step_from_elastic_checkpoint() asserts that
key on every elastic load. DeepSpeed's own Adam (--optimizer deepspeed: its FusedAdam keeps a group
step) saves and loads; so does elastic_checkpoint false. DeepSpeed's CPU Adam, taken under
ZeRO-Offload (--optimizer deepspeed-offload: "offload_optimizer" to the CPU), keeps the step per
parameter like torch's and fails the same.

--universal: resume on another dp instead, the way DeepSpeed's engine asks for ("Automatic
adjustment of ZeRO's optimizer state partitioning with a new world size is not currently
supported": a universal checkpoint): its converter deepspeed.checkpoint.ds_to_universal fails on
every elastic checkpoint, whatever the optimizer (zero_checkpoint.py _get_param_group_states reads
the base optimizer state as a dict; an elastic checkpoint holds a list), so an elastic checkpoint
resumes on no other dp. elastic_checkpoint false converts.

Run (two ranks as processes, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.8 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/zero12_elastic_checkpoint.py [--stage 1|2]
        [--optimizer torch|deepspeed|deepspeed-offload] [--elastic 0|1] [--universal]
(DeepSpeed's Adam ops are JIT-built on first use, a few minutes on two cores; to reuse the ones
scripts/setup-targets built, set TORCH_EXTENSIONS_DIR=$(cd work/venv && pwd -P)/deepspeed-0.19.8/
.torch_extensions and spell PYTHONPATH and the interpreter through that resolved path too: torch's
JIT build hashes its include paths, and another spelling rebuilds the ops in place)
Exits 1 when load_checkpoint (or with --universal, ds_to_universal) fails on the checkpoint saved a
moment before, 0 when it succeeds.
"""
import argparse
import os
import sys
import tempfile
import traceback

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "2")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def import_deepspeed():
    """deepspeed, without its CPU shared-memory all-reduce op: a g++ build of about 100 s that only
    inference_all_reduce uses (training's collectives are gloo's)."""
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    return deepspeed


WORLD = 2


def engine_for(deepspeed, a):
    model = torch.nn.Linear(4, 2)
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": WORLD,
           "steps_per_print": 1 << 30, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": a.stage, "elastic_checkpoint": bool(a.elastic)}}
    if a.optimizer != "torch":  # DeepSpeed's own Adam (the CPU accelerator's C++ op, JIT-built)
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-3}}
        opt = None
        if a.optimizer == "deepspeed-offload":  # ZeRO-Offload: DeepSpeedCPUAdam on the host
            cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    return engine


def train(rank, a, store, ckpt, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    deepspeed = import_deepspeed()
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    engine = engine_for(deepspeed, a)
    engine.backward(engine(torch.full((1, 4), float(rank + 1))).sum())
    engine.step()
    from deepspeed.checkpoint import UNIVERSAL_CHECKPOINT_INFO  # the client state the converter requires
    engine.save_checkpoint(ckpt, tag="t", client_state={UNIVERSAL_CHECKPOINT_INFO: {}})
    if a.universal:  # main() converts it
        torch.distributed.destroy_process_group()
        return
    fresh = engine_for(deepspeed, a)  # the same layout and config, as a resumed job builds it
    try:
        path, _ = fresh.load_checkpoint(ckpt, tag="t")
        results[rank] = "loaded %s" % path
    except Exception as e:  # noqa: BLE001 (the failure is the finding)
        results[rank] = "load_checkpoint failed: %s\n%s" % (type(e).__name__, traceback.format_exc(limit=-2))
    torch.distributed.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", type=int, default=2, choices=[1, 2])
    ap.add_argument("--optimizer", default="torch", choices=["torch", "deepspeed", "deepspeed-offload"])
    ap.add_argument("--elastic", type=int, default=1, choices=[0, 1])
    ap.add_argument("--universal", action="store_true", help="convert with ds_to_universal instead of loading")
    a = ap.parse_args()
    deepspeed = import_deepspeed()
    results = mp.Manager().dict()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")  # a file store: no port to collide with
        mp.start_processes(train, args=(a, store, os.path.join(tmp, "ckpt"), results), nprocs=WORLD,
                           start_method="fork")
        print("deepspeed", deepspeed.__version__, "ZeRO", a.stage, "dp", WORLD, "elastic_checkpoint", bool(a.elastic),
              "optimizer:", {"torch": "torch.optim.AdamW", "deepspeed": "DeepSpeed's AdamW",
                             "deepspeed-offload": "DeepSpeed's CPU AdamW (ZeRO-Offload)"}[a.optimizer])
        if a.universal:
            import subprocess
            r = subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                                os.path.join(tmp, "ckpt", "t"), "--output_folder", os.path.join(tmp, "universal"),
                                "--num_extract_workers", "1", "--num_merge_workers", "1"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                print("ds_to_universal converted the checkpoint")
                return 0
            print("ds_to_universal failed:", (r.stderr.strip().splitlines() or ["?"])[-1])
            print("BUG: DeepSpeed's universal converter cannot convert the checkpoint DeepSpeed saved")
            return 1
        bad = False
        for r in range(WORLD):
            bad = bad or not results[r].startswith("loaded")
            print("rank %d: %s" % (r, results[r]))
        if bad:
            print("BUG: the checkpoint DeepSpeed saved cannot be loaded in the layout that saved it")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
