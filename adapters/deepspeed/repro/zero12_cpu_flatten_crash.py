#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed 0.18.7-0.18.9 ZeRO 1 / 2 crash in the first
optimizer step on the CPU accelerator with more than one data-parallel rank.

Found by an unsteered paradiff campaign against adapters/deepspeed/deepspeed-0.18.9_fp32acc.json
(docs/FINDINGS.md). DeepSpeed PR 7828 (first shipped in 0.18.7) flattens the ZeRO 1 / 2 parameter
groups on the accelerator when it has room. It concatenates the nn.Parameters themselves, so the
flat buffer carries an autograd history (CatBackward0) and the parameters become SplitBackward0
views of it; the first step's all-gather into those views then fails with "Output 0 of
SplitBackward0 is a view and is being modified inplace". The CPU accelerator always reports room
(its available memory is the host's RAM), so on CPU every ZeRO 1 / 2 run with dp > 1 stops.
Fixed by PR 7948 (first shipped in 0.19.0), which detaches the buffer.

Run (two ranks as processes, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.18.9 work/venv/torch-2.15.0/bin/python \
    adapters/deepspeed/repro/zero12_cpu_flatten_crash.py [--stage 1|2] [--dtype fp32|bf16]
Exits 1 (and prints the error) when a rank's first step raises; 0 when both ranks train two steps.
"""
import argparse
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "2")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2


def train(rank, stage, dtype, port, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import deepspeed
    torch.distributed.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "train_batch_size": 2 * WORLD,
           "zero_optimization": {"stage": stage}, "steps_per_print": 1 << 30,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
    if dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
    try:
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
        for step in range(2):
            x = torch.randn(2, 8, generator=torch.Generator().manual_seed(10 * step + rank))
            loss = engine(x.to(next(engine.module.parameters()).dtype)).float().pow(2).mean()
            engine.backward(loss)
            engine.step()
        results[rank] = "ok"
    except Exception as e:  # noqa: BLE001 - the error is the finding; report it
        results[rank] = f"{type(e).__name__}: {e}".splitlines()[0]
    if rank == 0:
        print("DeepSpeed", deepspeed.__version__, f"ZeRO {stage} {dtype} dp {WORLD}:", results[rank])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stage", type=int, default=2, choices=[1, 2])
    p.add_argument("--dtype", default="bf16", choices=["fp32", "bf16"])
    p.add_argument("--port", type=int, default=29531)
    a = p.parse_args()
    results = mp.Manager().dict()
    mp.start_processes(train, args=(a.stage, a.dtype, a.port, results), nprocs=WORLD, start_method="fork")
    bad = any(v != "ok" for v in results.values()) or len(results) != WORLD
    print("BUG: a rank's optimizer step raised" if bad else "OK: both ranks trained two steps")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
