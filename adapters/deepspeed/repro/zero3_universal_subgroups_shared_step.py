#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed's ZeRO 3, reloading a universal checkpoint into
an optimizer with more than one sub-group, gives every sub-group the same `step` tensor; torch's
Adam / AdamW increment their step in place, so after the reload each update advances that one
tensor once per sub-group and the later sub-groups' bias corrections use a step that runs ahead.

stage3.py `load_hp_checkpoint_state_from_checkpoint_dir_stage3` reads one step
(`optim_sd[...]['state'][0]['step']`, a tensor for torch's optimizers) and assigns that object to
`self.optimizer.state[fp32_param]['step']` of every sub-group. ZeRO 3 splits its partition into
sub-groups of `zero_optimization.sub_group_size` elements (default 1e9, so a rank's partition of
more than 1e9 elements has several) and steps each with the client optimizer in turn. A resumed
run's updates are silently wrong from the first step after the reload (Adam's first-moment
correction 1 - beta1^step with a step too large). Found by an unsteered paradiff campaign against
adapters/deepspeed/deepspeed.json (DeepSpeed 0.19.8, `sub_group_size` varied), the update oracle:
"master ... does not follow from the run's own gradient and state" at the first step after a
reload (docs/FINDINGS.md).

Run (two ranks as processes, then one, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.8 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/zero3_universal_subgroups_shared_step.py [--sub-group-size N]
Trains one step at dp 2 (ZeRO 3, torch.optim.Adam, sub_group_size 1: one sub-group per
parameter), saves, converts with ds_to_universal, reloads into dp 1 and trains one more step.
Prints each sub-group's step after it; exits 1 when a sub-group's step is not 2 or the
sub-groups share one step tensor, 0 when each holds its own step 2 (as with the default
sub_group_size, one sub-group here).
"""
import argparse
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def import_deepspeed():
    """deepspeed, without its CPU shared-memory all-reduce op: a g++ build of about 100 s that only
    inference_all_reduce uses (training's collectives are gloo's)."""
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    return deepspeed


TAG = "step1"


def engine_for(world, sub_group_size, universal):
    deepspeed = import_deepspeed()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1))  # four parameters
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2 // world,
           "train_batch_size": 2, "steps_per_print": 1 << 30, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": 3, "sub_group_size": sub_group_size}}
    if universal:
        cfg["checkpoint"] = {"load_universal": True}
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    return engine


def train_step(engine, world, rank):
    for m in range(2 // world):  # the same two samples per update at either dp
        x = torch.full((1, 4), float(rank * (2 // world) + m + 1))
        engine.backward(engine(x).sum())
        engine.step()


def save_phase(rank, sub_group_size, store, ckpt):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_SIZE="2")
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    engine = engine_for(2, sub_group_size, universal=False)
    train_step(engine, 2, rank)
    engine.save_checkpoint(ckpt, tag=TAG)
    # Past a barrier no rank owes a peer a byte; exit without tearing the gloo group down, which
    # once aborted a rank here on a loaded machine ("terminate called without an active
    # exception"), a teardown matter apart from the bug shown.
    torch.distributed.barrier()
    sys.stdout.flush()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sub-group-size", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        ckpt = os.path.join(work, "ckpt")
        mp.start_processes(save_phase, args=(a.sub_group_size, os.path.join(work, "store1"), ckpt), nprocs=2,
                           start_method="fork")
        subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                        os.path.join(ckpt, TAG), "--output_folder", os.path.join(ckpt, TAG + "_universal"),
                        "--num_extract_workers", "1", "--num_merge_workers", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_SIZE="1")
        torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(work, "store2"),
                                             rank=0, world_size=1)
        engine = engine_for(1, a.sub_group_size, universal=True)
        engine.load_checkpoint(ckpt, tag=TAG + "_universal")
        zero = engine.optimizer
        flats = zero.fp32_partitioned_groups_flat
        shared = len({id(zero.optimizer.state[p]["step"]) for p in flats}) < len(flats)
        train_step(engine, 1, 0)
        steps = [float(zero.optimizer.state[p]["step"]) for p in flats]
        import deepspeed
        print("deepspeed", deepspeed.__version__, "torch", torch.__version__, "sub-groups:", len(flats))
        print("step of each sub-group after one update past the reload (each should be 2):", steps)
        bad = shared or any(s != 2 for s in steps)
        if bad:
            print("BUG: %s; Adam's bias correction uses the wrong step" %
                  ("the sub-groups share one step tensor" if shared else "a sub-group's step is not 2"))
        else:
            print("ok: each sub-group has its own step")
        torch.distributed.destroy_process_group()
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
