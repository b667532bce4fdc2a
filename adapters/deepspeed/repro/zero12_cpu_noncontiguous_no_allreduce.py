#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed before 0.19.8, ZeRO 1 / 2 with
"contiguous_gradients": false on the CPU accelerator never all-reduces the gradients; every rank
steps on its own.

The non-contiguous reduction (buffered_reduce_fallback) groups the gradients by
split_half_float_double, which matched legacy type strings built from the accelerator's device
name ("torch.cpu.FloatTensor"); CPU tensors report "torch.FloatTensor", so every bucket came back
empty and the all-reduce was skipped without a word. Found by an unsteered paradiff campaign
against adapters/deepspeed/deepspeed-0.19.2.json (docs/FINDINGS.md); fixed by DeepSpeed PR 8382
(first shipped in 0.19.8), which compares dtypes instead.

Run (two ranks as processes, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.2 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/zero12_cpu_noncontiguous_no_allreduce.py [--stage 1|2]
Exits 1 when a rank's weights after one SGD step differ from the step on the averaged gradient,
0 when both ranks took that step.
"""
import argparse
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

WORLD, LR = 2, 1.0


def inputs(rank):
    return torch.full((1, 4), float(rank + 1))  # each rank its own sample: gradients differ


def train(rank, stage, store, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    deepspeed = import_deepspeed()
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    model = torch.nn.Linear(4, 1, bias=False)
    torch.nn.init.constant_(model.weight, 0.5)
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": WORLD,
           "steps_per_print": 1 << 30, "zero_allow_untested_optimizer": True, "gradient_clipping": 0.0,
           "zero_optimization": {"stage": stage, "contiguous_gradients": False}}
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    engine.backward(engine(inputs(rank)).sum())
    engine.step()
    results[rank] = engine.module.weight.detach().reshape(-1).tolist()
    torch.distributed.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", type=int, default=2, choices=[1, 2])
    a = ap.parse_args()
    deepspeed = import_deepspeed()
    results = mp.Manager().dict()
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")  # a file store: no port to collide with
        mp.start_processes(train, args=(a.stage, store, results), nprocs=WORLD, start_method="fork")
    # d(sum(w . x))/dw = x: the averaged gradient is the mean of the ranks' inputs.
    mean_grad = sum(inputs(r) for r in range(WORLD)).reshape(-1) / WORLD
    want = (0.5 - LR * mean_grad).tolist()
    print("deepspeed", deepspeed.__version__, "ZeRO", a.stage, "contiguous_gradients=false")
    print("expected weights (step on the averaged gradient):", want)
    bad = False
    for r in range(WORLD):
        ok = all(abs(x - y) < 1e-6 for x, y in zip(results[r], want))
        bad = bad or not ok
        print("rank %d weights:" % r, results[r], "ok" if ok else "BUG: not the averaged step")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
