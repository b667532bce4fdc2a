#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed before 0.19.4, ZeRO 3 with
"stage3_use_all_reduce_for_fetch_params": true gathers a parameter wrong when the one before it in
a fetch does not divide evenly over the ranks.

The all-reduce fetch (partition_parameters.py Init._all_gather_coalesced) sizes its flat buffer
with each parameter's padded size (ds_numel_aligned) but steps through it with the unpadded one
(ds_numel), so a parameter's span starts inside its predecessor's padding; the last rank's
partition leaves that padding as torch.empty left it, and the sum adds it to the next parameter's
first elements. Found by an unsteered paradiff campaign against
adapters/deepspeed/deepspeed-0.19.2_ckpt.json (docs/FINDINGS.md); fixed by DeepSpeed PR 8158 (first
shipped in 0.19.4), which steps by the padded size.

What the padding holds is whatever the allocator hands back; in a fresh process that is often
zeros, and the sum then changes nothing (a long-running process hands back used memory: paradiff's
campaign saw NaN losses). The reproducer runs with torch.use_deterministic_algorithms(True), under
which torch.empty fills new memory with NaN (torch.utils.deterministic.fill_uninitialized_memory),
so that the padding holds NaN every run; nothing of DeepSpeed's is touched.

Run (two ranks as processes, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.2 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/zero3_allreduce_fetch_padding.py
Exits 1 when a parameter seen inside the forward differs from its initial value, 0 when all are
exact.
"""
import os
import sys
import tempfile

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


WORLD, SENTINEL = 2, 7777.0
SIZES = [(3, 3), (3, 3), (3, 1)]  # 9, 9 and 3 elements: each padded to a multiple of 2


def initial(i, shape):
    return torch.arange(1, shape[0] * shape[1] + 1, dtype=torch.float32).reshape(shape) + 100 * i


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for i, shape in enumerate(SIZES):
            self.register_parameter("w%d" % i, torch.nn.Parameter(initial(i, shape)))
        self.seen = []

    def forward(self, x):  # the parameters as ZeRO 3 gathered them for this forward
        self.seen = [getattr(self, "w%d" % i).detach().clone() for i in range(len(SIZES))]
        for i in range(len(SIZES)):
            x = x @ getattr(self, "w%d" % i).t() if i < len(SIZES) - 1 else x @ getattr(self, "w%d" % i)
        return x.sum()


def train(rank, store, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    deepspeed = import_deepspeed()
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    # torch.empty fills what it allocates with NaN under deterministic algorithms
    # (torch.utils.deterministic.fill_uninitialized_memory): the padding then holds NaN every run.
    torch.use_deterministic_algorithms(True)
    model = Model()
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": WORLD,
           "steps_per_print": 1 << 30, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": 3, "stage3_use_all_reduce_for_fetch_params": True,
                                 "stage3_param_persistence_threshold": 0}}
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    engine(torch.ones(1, 3))
    results[rank] = [t.reshape(-1).tolist() for t in engine.module.seen]
    torch.distributed.destroy_process_group()


def main():
    deepspeed = import_deepspeed()
    results = mp.Manager().dict()
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")  # a file store: no port to collide with
        mp.start_processes(train, args=(store, results), nprocs=WORLD, start_method="fork")
    print("deepspeed", deepspeed.__version__, "ZeRO 3, stage3_use_all_reduce_for_fetch_params=true, dp", WORLD)
    bad = False
    for r in range(WORLD):
        for i, shape in enumerate(SIZES):
            want = initial(i, shape).reshape(-1).tolist()
            ok = results[r][i] == want
            bad = bad or not ok
            print("rank %d w%d (%d elements) in forward:" % (r, i, len(want)), results[r][i],
                  "ok" if ok else "BUG: expected %s" % want)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
