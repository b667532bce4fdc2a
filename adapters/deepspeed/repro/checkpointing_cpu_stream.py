#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed before 0.19.8, its activation checkpointing
(deepspeed.checkpointing.checkpoint and non_reentrant_checkpoint) fails on the CPU accelerator at
the first call: it creates a transport stream with get_accelerator().Stream(device=...), and the
CPU accelerator's Stream is None ("TypeError: 'NoneType' object is not callable"). 0.19.8's
checkpointing no longer creates that stream (its offload engine skips synchronized devices).
Found by an unsteered paradiff campaign against adapters/deepspeed/deepspeed-0.19.2_ckpt.json
while that file still varied DeepSpeed's checkpoint (docs/FINDINGS.md).

Run (one process, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.2 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/checkpointing_cpu_stream.py [--non-reentrant]
Exits 1 when the checkpointed call fails, 0 when its output and gradient equal the plain call's.
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "1")
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--non-reentrant", action="store_true")
    a = ap.parse_args()
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # a g++ build only inference uses
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
        deepspeed.init_distributed(dist_backend="gloo")
        deepspeed.checkpointing.configure(None)
        fn = deepspeed.checkpointing.non_reentrant_checkpoint if a.non_reentrant else deepspeed.checkpointing.checkpoint
        layer = torch.nn.Linear(3, 3)
        x = torch.ones(2, 3, requires_grad=True)
        print("deepspeed", deepspeed.__version__, fn.__name__, "on the CPU accelerator")
        try:
            y = fn(layer, x)
            y.sum().backward()
        except TypeError as e:
            print("BUG: the checkpointed call failed:", e)
            return 1
        got = x.grad.clone()
        x.grad = None
        want_y = layer(x)
        want_y.sum().backward()
        ok = torch.equal(y, want_y) and torch.equal(got, x.grad)
        print("checkpointed output and input gradient",
              "equal the plain call's" if ok else "DIFFER from the plain call's")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
