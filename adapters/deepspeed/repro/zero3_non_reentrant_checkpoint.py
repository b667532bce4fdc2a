#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed 0.19.8, ZeRO 3 with its own
deepspeed.checkpointing.non_reentrant_checkpoint around a block whose parameters live in a
submodule fails in backward: the recomputation sees the submodule's parameter as ZeRO 3 left it
after the forward (partitioned, size 0), "RuntimeError: The size of tensor a (0) must match the size
of tensor b (...)". torch.utils.checkpoint.checkpoint(use_reentrant=False) and DeepSpeed's
reentrant checkpoint train the same model. DeepSpeed issue 4595 (open since 2023) reports the same
error. Found by an unsteered paradiff campaign against adapters/deepspeed/deepspeed.json, whose
configs then put the model's parameters in submodules ("adapter.module_tree": "nested";
docs/FINDINGS.md).

Run (one process, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.8 work/venv/torch-2.15.0/bin/python \\
    adapters/deepspeed/repro/zero3_non_reentrant_checkpoint.py [--checkpoint deepspeed_non_reentrant|torch|deepspeed]
Exits 1 when the training step fails, 0 when it trains.
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "1")
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")

import torch  # noqa: E402
import torch.utils.checkpoint  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(8, 8)  # the block's parameters, in a submodule

    def forward(self, h):
        return h + self.inner(h)


class Model(torch.nn.Module):
    """A token embedding, one checkpointed block, the embedding again as the output layer."""

    def __init__(self, run):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(11, 8))
        self.blocks = torch.nn.ModuleList([Block()])
        self.run = run

    def forward(self, ids):
        h = self.emb.index_select(0, ids.reshape(-1))
        for block in self.blocks:
            h = self.run(block, h)
        return torch.nn.functional.cross_entropy(h @ self.emb.t(), ids.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default="deepspeed_non_reentrant",
                    choices=["deepspeed_non_reentrant", "deepspeed", "torch"])
    a = ap.parse_args()
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # a g++ build only inference uses
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
        deepspeed.init_distributed(dist_backend="gloo")
        deepspeed.checkpointing.configure(None)
        run = {"deepspeed_non_reentrant": deepspeed.checkpointing.non_reentrant_checkpoint,
               "deepspeed": deepspeed.checkpointing.checkpoint,
               "torch": lambda fn, x: torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)}[a.checkpoint]
        torch.manual_seed(0)
        model = Model(run)
        cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "train_batch_size": 1,
               "steps_per_print": 1 << 30, "zero_allow_untested_optimizer": True,
               "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                               config=cfg)
        print("deepspeed", deepspeed.__version__, "ZeRO 3, a block with a submodule under", a.checkpoint)
        try:
            engine.backward(engine(torch.tensor([1, 2, 3, 4])))
            engine.step()
        except RuntimeError as e:
            print("BUG: the step failed in backward:", e)
            return 1
        print("trained a step")
        return 0


if __name__ == "__main__":
    sys.exit(main())
