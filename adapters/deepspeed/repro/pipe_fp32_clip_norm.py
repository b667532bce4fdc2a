#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): DeepSpeed's pipeline engine in fp32 without ZeRO clips with
a gradient norm that leaves out every stage but the first.

Found by paradiff's numeric oracle on adapters/deepspeed/deepspeed_pp.json (docs/DEEPSPEED.md,
findings): the reduced gradients and the true global norm agree with the reference, the updated
parameters do not. In fp32 without ZeRO, DeepSpeedEngine._take_model_step clips with
runtime.utils.clip_grad_norm_(..., mpu=self.mpu). With a PipelineModule, mpu is the pipeline grid,
whose "model parallel" rank is the pipeline stage; clip_grad_norm_ counts a gradient only on model
parallel rank 0 (or when it is a tensor-parallel parameter), so only stage 0's gradients enter the
norm that every stage then clips with.

Run (two pipeline stages as processes, CPU + gloo):
  PYTHONPATH=work/venv/deepspeed-0.19.8 work/venv/torch-2.15.0/bin/python \
    adapters/deepspeed/repro/pipe_fp32_clip_norm.py
Trains one SGD step (lr 1, gradient_clipping 0.01) through deepspeed.pipe and the same model in one
process with torch.nn.utils.clip_grad_norm_ over all its parameters; exits 1 when a stage's update
differs from the single-process one.
"""
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("LOCAL_SIZE", "2")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

CLIP, LR = 0.01, 1.0


def layers():
    torch.manual_seed(0)
    return [torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)]


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(2, 4, generator=g), torch.randn(2, 1, generator=g)


def loss_fn(out, y):
    return (out - y).pow(2).mean()


def reference():
    """The update of every layer's weight in one process: global clip over all parameters."""
    model = torch.nn.Sequential(*layers())
    before = [m.weight.detach().clone() for m in model]
    x, y = data()
    loss_fn(model(x), y).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    torch.optim.SGD(model.parameters(), lr=LR).step()
    return [(m.weight.detach() - b) for m, b in zip(model, before)]


def stage(rank, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT="29561")
    import deepspeed
    from deepspeed.pipe import PipelineModule
    deepspeed.init_distributed(dist_backend="gloo")
    net = PipelineModule(layers=layers(), num_stages=2, loss_fn=loss_fn, partition_method="uniform")
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "train_batch_size": 2,
           "gradient_clipping": CLIP, "steps_per_print": 1 << 30,
           "optimizer": {"type": "SGD", "params": {"lr": LR}}, "zero_allow_untested_optimizer": True}
    engine, _, _, _ = deepspeed.initialize(model=net, model_parameters=net.parameters(), config=cfg)
    mods = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    before = [m.weight.detach().clone() for m in mods]
    engine.train_batch(iter([data()]))
    first = 0 if rank == 0 else 2  # partition_method uniform: layers 0-1 on stage 0, 2-3 on stage 1
    results[rank] = {first + i: (m.weight.detach() - b).tolist() for i, (m, b) in enumerate(zip(mods, before))}


def main():
    import deepspeed
    ref = reference()
    results = mp.Manager().dict()
    mp.start_processes(stage, args=(results,), nprocs=2, start_method="fork")
    bad = False
    for rank in range(2):
        for layer, upd in results[rank].items():
            got, want = torch.tensor(upd), ref[layer]
            ratio = float(got.norm() / want.norm())
            ok = torch.allclose(got, want, rtol=1e-4, atol=1e-7)
            bad |= not ok
            print("stage %d layer %d: |update| / |single-process update| = %.4f %s" % (rank, layer, ratio,
                                                                                         "" if ok else "<- differs"))
    print("DeepSpeed", deepspeed.__version__, "pipeline fp32 clipping:",
          "BUG: a stage clips with another norm" if bad else "OK: the single-process updates")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
