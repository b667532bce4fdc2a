#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed ZeRO 3 with "gradient_predivide_factor" equal to
the data-parallel world size (and "reduce_scatter": false, which ZeRO 3 needs for any factor other
than 1) divides the gradients by dp twice: every update is dp times too small, silently.

stage3.py divides the gradient buffer by the factor and then by dp before the sum, and multiplies
the factor back only when it differs from dp (`__avg_scatter_contiguous_grads`: "!=
averaging_world_sz"; `__avg_scatter_grads`: "!= dist.get_world_size(...)", after a reduce-scatter
that divides by dp itself). The skip is right in the ZeRO 0-2 path it was taken from, which
divides by the factor only and then multiplies by factor / dp; here the factor was divided out on
its own, so skipping it leaves gradient / dp^2. Any other factor (1, 4 at dp 2) gives the averaged
gradient, and ZeRO 0 and 2 take the same factor correctly.

Run (two ranks as processes, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.8 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/zero3_predivide_factor_equal_dp.py [--stage 0|2|3] [--factor F]
        [--contiguous-gradients 0|1]
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


WORLD, LR, W0 = 2, 1.0, 0.5


def inputs(rank):
    return torch.full((1, 4), float(rank + 1))  # each rank its own sample: gradients differ


def train(rank, a, store, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD))
    deepspeed = import_deepspeed()
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    model = torch.nn.Linear(4, 1, bias=False)
    torch.nn.init.constant_(model.weight, W0)
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": WORLD,
           "steps_per_print": 1 << 30, "zero_allow_untested_optimizer": True, "gradient_clipping": 0.0,
           "gradient_predivide_factor": a.factor,
           "zero_optimization": {"stage": a.stage, "reduce_scatter": False,
                                 "contiguous_gradients": bool(a.contiguous_gradients)}}
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    engine.backward(engine(inputs(rank)).sum())
    engine.step()
    weight = engine.module.weight
    if a.stage == 3:  # each rank's own shard, gathered by DeepSpeed's accessor for the fp32 master
        from deepspeed.utils import safe_get_full_fp32_param
        weight = safe_get_full_fp32_param(weight)
    results[rank] = weight.detach().reshape(-1).tolist()
    torch.distributed.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", type=int, default=3, choices=[0, 2, 3])
    ap.add_argument("--factor", type=float, default=float(WORLD))
    ap.add_argument("--contiguous-gradients", type=int, default=1, choices=[0, 1])
    a = ap.parse_args()
    deepspeed = import_deepspeed()
    results = mp.Manager().dict()
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")  # a file store: no port to collide with
        mp.start_processes(train, args=(a, store, results), nprocs=WORLD, start_method="fork")
    # d(sum(w . x))/dw = x: the averaged gradient is the mean of the ranks' inputs.
    mean_grad = sum(inputs(r) for r in range(WORLD)).reshape(-1) / WORLD
    want = (W0 - LR * mean_grad).tolist()
    print("deepspeed", deepspeed.__version__, "ZeRO", a.stage, "dp", WORLD, "gradient_predivide_factor", a.factor,
          "reduce_scatter=false contiguous_gradients=%s" % bool(a.contiguous_gradients))
    print("expected weights (one SGD step on the averaged gradient):", want)
    bad = False
    for r in range(WORLD):
        ok = all(abs(x - y) < 1e-6 for x, y in zip(results[r], want))
        bad = bad or not ok
        step = [(W0 - x) / (W0 - y) for x, y in zip(results[r], want)]
        print("rank %d weights:" % r, results[r],
              "ok" if ok else "BUG: the step is %.4g x the averaged gradient's" % step[0])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
