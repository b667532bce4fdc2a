#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): with "round_robin_gradients": true, DeepSpeed ZeRO 2's own
gradient accessor deepspeed.utils.safe_get_full_grad fails after backward (dp 2, CPU + gloo).

Found while wiring DeepSpeed's options into paradiff's campaigns (docs/DEEPSPEED.md, "Options"):
the adapter reads each rank's gradient fragment through the same fragment mapping
(param._hp_mapping.get_lp_grad_fragment(param._index_in_param_group)) and got an IndexError.
link_hp_params numbers a parameter's gradient by its position in the round-robin-reordered
partition (utils/mixed_precision_linkage.py), but the list get_lp_grad_fragment indexes does not
follow that numbering, so the accessor returns another parameter's gradient piece (a shape error
here) or indexes past the end. Training itself is not shown wrong by this script: only the
accessor DeepSpeed documents for reading gradients under ZeRO.

Run (two ranks as processes):
  PYTHONPATH=work/venv/deepspeed-0.19.8 work/venv/torch-2.15.0/bin/python \
    adapters/deepspeed/repro/zero2_round_robin_full_grad.py
Compares safe_get_full_grad with and without round_robin_gradients on the same model and data;
exits 1 when they differ or the accessor raises.
"""
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "2")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def rank_main(rank, round_robin, port, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import deepspeed
    from deepspeed.utils import safe_get_full_grad
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 3),
              torch.nn.GELU(), torch.nn.Linear(3, 1)]
    model = torch.nn.Sequential(*layers)
    cfg = {"train_micro_batch_size_per_gpu": 2, "train_batch_size": 4, "steps_per_print": 1 << 30,
           "zero_optimization": {"stage": 2, "round_robin_gradients": round_robin},
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(rank))
    engine.backward(engine(x).pow(2).mean())
    try:
        results[rank] = [safe_get_full_grad(p).tolist() for p in engine.module.parameters()]
    except Exception as e:  # noqa: BLE001 - the error is the finding; report it
        results[rank] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])


def run(round_robin, port):
    results = mp.Manager().dict()
    mp.start_processes(rank_main, args=(round_robin, port, results), nprocs=2, start_method="fork")
    return results[0]


def main():
    import deepspeed
    plain, rr = run(False, 29551), run(True, 29552)
    what = rr if isinstance(rr, str) else ("same gradients" if rr == plain else "different gradients")
    print("DeepSpeed", deepspeed.__version__, "ZeRO 2 dp 2, safe_get_full_grad with round_robin_gradients:", what)
    bad = what != "same gradients"
    print("BUG: round_robin_gradients breaks safe_get_full_grad" if bad else "OK: the same gradients")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
