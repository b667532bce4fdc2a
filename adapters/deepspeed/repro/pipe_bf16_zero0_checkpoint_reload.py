#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): a deepspeed.pipe model in bf16 without ZeRO cannot load
its own checkpoint: engine.load_checkpoint fails with KeyError: <dp rank>.

Found by paradiff on adapters/deepspeed/deepspeed_pp_bf16.json with checkpoints (docs/DEEPSPEED.md,
findings), minimized to world 1, a one-stage pipeline, reloaded into the same layout. Under a
pipeline, bf16 with bf16 accumulation and ZeRO stage 0 gets the BF16_Optimizer
(engine.py _do_optimizer_sanity_check). save_checkpoint writes its state_dict() (a dict) as the
model file's "optimizer", since zero_optimization() is false (engine.py _common_checkpoint_state),
and the per-dp bf16_zero_pp_rank_* files; load_checkpoint at ZeRO 0 passes that dict to
BF16_Optimizer.load_state_dict, whose _load_legacy_checkpoint indexes it as the per-dp-rank list
the ZeRO files hold (state_dict_list[dp_rank]).

Run (one process, CPU):
  DS_ACCELERATOR=cpu LOCAL_SIZE=1 PYTHONPATH=work/venv/deepspeed-0.19.8 \
    work/venv/torch-2.15.0/bin/python adapters/deepspeed/repro/pipe_bf16_zero0_checkpoint_reload.py
Trains one step, saves, builds the same engine again and loads; exits 1 when the load fails.
"""
import os
import sys
import tempfile

# One process on the CPU accelerator, as the Run line says.
for key, value in dict(DS_ACCELERATOR="cpu", LOCAL_SIZE="1", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT="29518").items():
    os.environ.setdefault(key, value)

import torch  # noqa: E402
import deepspeed  # noqa: E402
import deepspeed.comm.torch  # noqa: E402
from deepspeed.pipe import PipelineModule  # noqa: E402

# Without DeepSpeed's CPU shared-memory all-reduce op: a g++ build of about 100 s the first time,
# used only by inference_all_reduce (training's collectives are gloo's).
sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None


def engine():
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)]
    module = PipelineModule(layers=layers, num_stages=1, loss_fn=lambda out, y: (out.float() - y).pow(2).mean())
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "train_batch_size": 2,
           "zero_optimization": {"stage": 0}, "bf16": {"enabled": True}, "steps_per_print": 1 << 30}
    opt = torch.optim.AdamW(module.parameters(), lr=0.01)
    e, _, _, _ = deepspeed.initialize(model=module, optimizer=opt, config=cfg)
    return e


def main():
    deepspeed.init_distributed(dist_backend="gloo")
    first = engine()
    print("DeepSpeed", deepspeed.__version__, "optimizer", type(first.optimizer).__name__)
    batch = (torch.randn(2, 4).to(torch.bfloat16), torch.randn(2, 4))
    first.train_batch(data_iter=iter([batch]))
    with tempfile.TemporaryDirectory() as ckpt:
        first.save_checkpoint(ckpt, tag="t")
        print("saved:", sorted(os.listdir(os.path.join(ckpt, "t"))))
        try:
            engine().load_checkpoint(ckpt, tag="t")
        except KeyError as e:
            print("BUG: load_checkpoint of the engine's own checkpoint fails: KeyError", e)
            return 1
    print("OK: the checkpoint loads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
