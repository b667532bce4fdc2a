#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed before 0.19.5, ZeRO 3 with ZeRO++'s hierarchical
partitioning (zero_hpz_partition_size) fails at deepspeed.initialize when a parameter is smaller
than its secondary partition's groups: a rank whose secondary shard starts past the parameter's end
narrows the parameter at that start (partition_parameters.py _partition_param_sec), and torch
refuses the out-of-range start even for zero elements ("IndexError: start out of range").
Found by an unsteered paradiff campaign against adapters/deepspeed/deepspeed-0.19.2_ckpt.json
(docs/FINDINGS.md); fixed by DeepSpeed PR 8210 (issue 6659, first shipped in 0.19.5), which skips
the copy for an empty shard.

Run (four ranks as processes, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.2 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/zero3_hpz_small_param.py [--hpz 2|4]
Exits 1 when a rank fails to set the model up or to train a step, 0 when every rank trains it.
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "4")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def import_deepspeed():
    """deepspeed, without its CPU shared-memory all-reduce op: a g++ build of about 100 s that only
    inference_all_reduce uses (training's collectives are gloo's)."""
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    return deepspeed


WORLD = 4


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((1, 3), 0.5))
        self.bias = torch.nn.Parameter(torch.zeros(1))  # one element: smaller than the secondary groups

    def forward(self, x):
        return (x @ self.weight.t() + self.bias).sum()


def train(rank, hpz, store, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    deepspeed = import_deepspeed()
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": WORLD,
           "steps_per_print": 1 << 30, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": 3, "zero_hpz_partition_size": hpz,
                                 "stage3_param_persistence_threshold": 0}}
    model = Model()
    try:
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                               config=cfg)
        engine.backward(engine(torch.ones(1, 3)))
        engine.step()
        results[rank] = "trained a step"
    except (IndexError, RuntimeError) as e:
        results[rank] = "BUG: %s: %s" % (type(e).__name__, e)
    torch.distributed.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hpz", type=int, default=4, choices=[2, 4])
    a = ap.parse_args()
    deepspeed = import_deepspeed()
    results = mp.Manager().dict()
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")  # a file store: no port to collide with
        mp.start_processes(train, args=(a.hpz, store, results), nprocs=WORLD, start_method="fork")
    print("deepspeed", deepspeed.__version__, "ZeRO 3, dp", WORLD, "zero_hpz_partition_size", a.hpz,
          "a parameter of one element")
    for r in range(WORLD):
        print("rank %d:" % r, results.get(r, "BUG: no result"))
    return 1 if any(not results.get(r, "BUG").startswith("trained") for r in range(WORLD)) else 0


if __name__ == "__main__":
    sys.exit(main())
