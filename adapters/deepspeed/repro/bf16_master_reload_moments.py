#!/usr/bin/env python3
"""Standalone reproducer (no paradiff): with bf16 master weights and gradients
("bf16": {"bf16_master_weights_and_grads": true}, the optimizer offloaded to the host with
DeepSpeed's CPU Adam, which keeps its moments in float32), saving a checkpoint and loading it back
turns Adam's float32 moments into bf16: training resumed from the checkpoint is not the training
that was saved (CPU + gloo).

Found by paradiff's campaign against adapters/deepspeed/deepspeed_bf16_master.json with checkpoints
(docs/FINDINGS.md): after the reload, exp_avg no longer followed from the saved state and the
reported gradient, and every value it held was a bf16 number. Where: a ZeRO 1/2 load goes through
torch.optim.Optimizer.load_state_dict, which casts floating-point state to its parameter's dtype,
and the optimizer's parameter is the flat bf16 master partition; the universal checkpoint's load
rebuilds each state as torch.zeros_like(flat bf16 partition) (utils/tensor_fragment.py
map_to_flat_opt_states); ZeRO 3 loads like ZeRO 1/2.

Run (the ranks as processes; DeepSpeed JIT-builds its CPU Adam op, about 100 s, unless
TORCH_EXTENSIONS_DIR holds a build from the same paths: the one scripts/setup-targets made, through
the resolved paths of work/venv, which is a link):
  V=$(cd work/venv && pwd -P)
  PYTHONPATH=$V/deepspeed-0.19.8 TORCH_EXTENSIONS_DIR=$V/deepspeed-0.19.8/.torch_extensions \
    $V/torch-2.15.0/bin/python adapters/deepspeed/repro/bf16_master_reload_moments.py \
    [--dp N] [--stage 1|2|3] [--sub-group-size N]
Trains one step and saves; a second step on that engine, and the same step on a new engine loaded
from the checkpoint. Compares Adam's moments saved and loaded, and the moments and parameters
after the second step, uninterrupted and resumed, bitwise; exits 1 when any differ (dtype or value).
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def import_deepspeed():
    """deepspeed, without its CPU shared-memory all-reduce op: a g++ build of about 100 s that only
    inference_all_reduce uses (training's collectives are gloo's)."""
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    return deepspeed


def engine_for(deepspeed, dp, stage, sub_group_size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    cfg = {"train_micro_batch_size_per_gpu": 2, "train_batch_size": 2 * dp, "steps_per_print": 1 << 30,
           "bf16": {"enabled": True, "bf16_master_weights_and_grads": True},
           "zero_optimization": {"stage": stage, "offload_optimizer": {"device": "cpu"},
                                 "sub_group_size": sub_group_size},
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    return engine


def moments(engine):
    """Each of Adam's state tensors on this rank, by (state entry, key): dtype and a copy. (The
    optimizer's state, not its param_groups: ZeRO 3 puts a sub-group's partition there only while
    it steps it.)"""
    out = {}
    for i, state in enumerate(engine.optimizer.optimizer.state.values()):
        for key in ("exp_avg", "exp_avg_sq"):
            out["state %d %s" % (i, key)] = (state[key].dtype, state[key].detach().float().clone())
    assert out, "no optimizer state found"
    return out


def train_step(engine, rank, step):
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(100 * step + rank)).to(torch.bfloat16)
    engine.backward(engine(x).float().pow(2).mean())
    engine.step()


def params(deepspeed, engine):
    """The full bf16 parameters (gathered under ZeRO 3), as float32 copies."""
    ps = list(engine.module.parameters())
    with deepspeed.zero.GatheredParameters(ps, enabled=hasattr(ps[0], "ds_id")):
        return {"param %d" % i: (p.dtype, p.detach().float().clone()) for i, p in enumerate(ps)}


def differences(a, b, what):
    out = []
    for name, (dtype, value) in a.items():
        bdtype, bvalue = b[name]
        if bdtype != dtype or not torch.equal(bvalue, value):
            out.append("%s, %s: %s vs %s, max |diff| %.3g" % (what, name, dtype, bdtype,
                                                              (bvalue - value).abs().max().item()))
    return out


def rank_main(rank, dp, stage, sub_group_size, port, folder, results):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(dp), LOCAL_SIZE=str(dp),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    deepspeed = import_deepspeed()
    torch.distributed.init_process_group("gloo", rank=rank, world_size=dp)
    engine = engine_for(deepspeed, dp, stage, sub_group_size)
    train_step(engine, rank, 1)
    saved = moments(engine)
    engine.save_checkpoint(folder, tag="step1")
    train_step(engine, rank, 2)  # uninterrupted
    reloaded = engine_for(deepspeed, dp, stage, sub_group_size)
    reloaded.load_checkpoint(folder, tag="step1")
    diffs = differences(saved, moments(reloaded), "moments saved / loaded")
    train_step(reloaded, rank, 2)  # resumed from the checkpoint
    diffs += differences(moments(engine), moments(reloaded), "moments after step 2, uninterrupted / resumed")
    diffs += differences(params(deepspeed, engine), params(deepspeed, reloaded),
                         "after step 2, uninterrupted / resumed")
    results[rank] = diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dp", type=int, default=2, help="ranks (processes)")
    ap.add_argument("--stage", type=int, default=2, choices=[1, 2, 3])
    ap.add_argument("--sub-group-size", type=int, default=1000000000, help="ZeRO 3's sub_group_size")
    a = ap.parse_args()
    deepspeed = import_deepspeed()
    results = mp.Manager().dict()
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(rank_main, args=(a.dp, a.stage, a.sub_group_size, 29561, folder, results), nprocs=a.dp, start_method="fork")
    diffs = [d for r in range(a.dp) for d in results[r]]
    print("DeepSpeed", deepspeed.__version__, "ZeRO %d dp %d, bf16 master weights and grads, CPU Adam:" % (a.stage, a.dp))
    for d in diffs:
        print("  " + d)
    print("BUG: training resumed from the checkpoint is not the training saved" if diffs
          else "OK: the moments come back bitwise and the resumed step is the uninterrupted one")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
