#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed's WarmupCosineLR rises again after
total_num_steps (DeepSpeed 0.19.2 and earlier; the rate must stay at cos_min_ratio).

Its cosine progress (last_batch_iteration - warmup_num_steps + 1) / (total_num_steps -
warmup_num_steps) was not clamped at 1, so past the end of the decay the ratio followed the cosine
back up: with warmup 2 and total 3 the update after the decay ends runs at the peak rate again,
and the rate keeps swinging between the floor and the peak.
A run that trains past total_num_steps (a resumed run, a schedule sized by a wrong step count)
silently trains at the peak rate again. Fixed by DeepSpeed PR 8142 (first shipped in 0.19.3), which
clamps the progress (and guards total_num_steps == warmup_num_steps). paradiff's update and numeric
oracles flag it on the first update past the end (docs/FINDINGS.md).

Run (one rank, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.2 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/warmup_cosine_past_end.py
Prints the rate of each update; exits 1 when a rate after the end of the decay is above its floor,
0 when every one stays there.
"""
import os
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")

import torch  # noqa: E402


def import_deepspeed():
    """deepspeed, without its CPU shared-memory all-reduce op: a g++ build of about 100 s that only
    inference_all_reduce uses (training's collectives are gloo's)."""
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    return deepspeed

PEAK, FLOOR, WARMUP, TOTAL, UPDATES = 1.0, 0.1, 2, 3, 7


def main():
    deepspeed = import_deepspeed()
    with tempfile.TemporaryDirectory() as store:  # a file store: no port to collide with
        torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(store, "store"),
                                             rank=0, world_size=1)
        model = torch.nn.Linear(4, 1)
        cfg = {"train_micro_batch_size_per_gpu": 1, "train_batch_size": 1, "steps_per_print": 1 << 30,
               "optimizer": {"type": "SGD", "params": {"lr": PEAK}},
               "scheduler": {"type": "WarmupCosineLR",
                             "params": {"warmup_num_steps": WARMUP, "total_num_steps": TOTAL,
                                        "warmup_min_ratio": 0.0, "cos_min_ratio": FLOOR, "warmup_type": "linear"}}}
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
        x = torch.ones(1, 4)
        rates = []
        for _ in range(UPDATES):
            rates.append(engine.get_lr()[0])  # the rate this update runs at
            engine.backward(engine(x).sum())
            engine.step()
        # The scheduler's iteration of update k is k - 1; from iteration TOTAL on the decay has ended.
        past_end = rates[TOTAL + 1:]
        print("deepspeed", deepspeed.__version__, "rates:", ["%.4f" % r for r in rates])
        bad = [r for r in past_end if r > FLOOR * PEAK + 1e-12]
        print("after the decay's end:", ["%.4f" % r for r in past_end],
              "BUG: above the floor %.4f" % (FLOOR * PEAK) if bad else "ok: at the floor")
        torch.distributed.destroy_process_group()
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
