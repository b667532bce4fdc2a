#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed ZeRO-0 + bf16 steps the client optimizer once with
zero gradients at construction (FP16_UnfusedOptimizer.initialize_optimizer_states), so the first
real update is wrong.

Found by paradiff's update oracle on adapters/deepspeed (docs/DEEPSPEED.md, findings). With ZeRO
stage 0 and "bf16": {"enabled": true} (bf16 gradient accumulation, the only bf16 mode DeepSpeed
accepts without ZeRO) the engine wraps a client torch optimizer in FP16_UnfusedOptimizer, whose
constructor sets every gradient to zero and calls optimizer.step(). For Adam / AdamW that
advances state["step"] to 1, so the first real step uses step-2 bias correction (an update of
about 0.74 * lr instead of lr); AdamW's decoupled weight decay is applied once more; SGD / Adam
with L2 weight decay take a step along wd * param. ZeRO 1-3 and BF16_Optimizer lost that step in
DeepSpeed PR 5104 / 6485; the unfused (ZeRO-0) wrapper still has it, and so does the fused one
(FP16_Optimizer.initialize_optimizer_states, runtime/fp16/fused_optimizer.py) that wraps DeepSpeed's
own optimizer: --own-optimizer ("optimizer": {"type": "AdamW"} in the config, DeepSpeed's FusedAdam,
whose C++ op DeepSpeed JIT-builds on first use: a few minutes, into torch's default extensions
folder).

Run (one process, CPU):
  DS_ACCELERATOR=cpu LOCAL_SIZE=1 PYTHONPATH=work/venv/deepspeed-0.19.8 \
    work/venv/torch-2.15.0/bin/python adapters/deepspeed/repro/zero0_bf16_init_step.py
Prints the optimizer's step count after deepspeed.initialize (expected 0) and the first update of
the fp32 master weights next to plain torch AdamW on the same gradient; exits 1 when they differ.
"""
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "1")
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29517")

import torch  # noqa: E402
import deepspeed  # noqa: E402


def main():
    torch.manual_seed(0)
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    model = torch.nn.Linear(4, 3, bias=False)
    w0 = model.weight.detach().to(torch.bfloat16).float().clone()  # the bf16 weights DeepSpeed trains
    own = "--own-optimizer" in sys.argv
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "train_batch_size": 2,
           "zero_optimization": {"stage": 0}, "bf16": {"enabled": True}, "steps_per_print": 1 << 30}
    if own:
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}}
    opt = None if own else torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    steps = [s.get("step") for s in engine.basic_optimizer.state.values()]
    print("DeepSpeed", deepspeed.__version__, "optimizer", type(engine.optimizer).__name__)
    print("optimizer step count after deepspeed.initialize:", [float(s) for s in steps if s is not None],
          "(expected: none, no step taken yet)")
    if own:  # FP16_Optimizer: one flat fp32 copy per group
        master = engine.optimizer.fp32_groups_flat[0].view(model.weight.shape)
    else:  # FP16_UnfusedOptimizer: one fp32 copy per parameter
        master = engine.optimizer.fp32_groups[0][0]
    print("master weights changed by initialize:", not torch.equal(master, w0))

    x = torch.randn(2, 4).to(torch.bfloat16)
    loss = engine(x).float().pow(2).sum()
    engine.backward(loss)
    grad = model.weight.grad.detach().float().clone()
    engine.step()

    ref = torch.nn.Parameter(w0.clone())
    ref.grad = grad
    torch.optim.AdamW([ref], lr=0.01, weight_decay=0.1).step()
    print("first update, DeepSpeed:", (master - w0).flatten()[:4].tolist())
    print("first update, torch    :", (ref.detach() - w0).flatten()[:4].tolist())
    bad = not torch.allclose(master, ref.detach(), rtol=0, atol=1e-6)
    print("BUG: the first update differs from torch's AdamW" if bad else "OK: same first update")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
