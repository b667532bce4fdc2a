#!/usr/bin/python3
"""paradiff external target: PyTorch DistributedDataParallel (gloo, CPU) and ZeroRedundancyOptimizer.

Usage: adapter.py RUN_DIR | --serve [--plant NAME]   (protocol 1 | 2, docs/TARGETS.md; target
       file: torch.json)

Reads RUN_DIR/{config.json, run.json, init.safetensors, data/step<S>.safetensors}, trains the
config's GPT (model.py) on dp ranks, and writes RUN_DIR/out/rank<R>.json and
rank<R>.step<S>.safetensors with the tensor kinds run.json asks for ("kinds": the target file's
"reports"). Ranks come from torchrun's environment (RANK, WORLD_SIZE) when set, otherwise this
process forks them (serve.py); --serve is a warm worker whose ranks outlive configs (crew.py).
ZeRO stage 0: DDP + the torch optimizer; stage 1: DDP + ZeroRedundancyOptimizer. DDP's bucket
size is zero.bucket_elems elements; accumulation runs the first micro-steps under no_sync.
grad_norm is torch's own: the float32 total norm returned by clip_grad_norm_ (the target file
declares "grad_norm_dtype": "fp32").

Planted bugs for paradiff's self-test (never on by default):
--plant sum_not_average: a DDP comm hook that all-reduces gradients without dividing by the world
size.
--plant lr_scaled_by_world: the optimizer's learning rate multiplied by the world size (a linear
scaling rule applied on top of a config that already holds the global rate); the gradients and
their norm stay right, only the parameter update is wrong.
"""
import argparse
import contextlib
import ctypes
import json
import math
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crew  # noqa: E402
import lr_schedule  # noqa: E402
import safetensors_io  # noqa: E402
import serve  # noqa: E402
from model import Gpt  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SLOTS = {"sgd": ["momentum"], "adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"]}
TORCH_SLOT = {"momentum": "momentum_buffer", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}


def optimizer_class(o, lr):
    kind = o["kind"]
    if kind == "sgd":
        return torch.optim.SGD, dict(lr=lr, momentum=o["momentum"], weight_decay=o["weight_decay"])
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    return cls, dict(lr=lr, betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])


def sum_not_average(state, bucket):  # the planted bug: no division by the world size
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def single_threaded_blas():
    """Runs OpenBLAS's gemm in the calling thread, as paradiff's reference does (kernels/numerics.cpp,
    see Note [Single-threaded BLAS]). torch.set_num_threads does not reach Debian's OpenBLAS (its
    pthreads build keeps a pool of one thread per core), which splits a large enough gemm over its
    pool, and a split gemm rounds some elements differently from one thread's: the adapter then
    no longer computes what the twin computes (a vocab of 401, hidden 52 and 48 tokens, at world
    1: 1024 ulp in the embedding's gradient). Looked up at run time: another BLAS is left alone."""
    try:
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(1)
    except (OSError, AttributeError):
        pass


def train(rank, world, run_dir, plant):
    torch.set_num_threads(1)
    # paradiff's reference runs without oneDNN (kernels/numerics.cpp, see Note [No oneDNN]) and
    # with a single-threaded BLAS; the adapter does too, so that at world 1 it computes exactly
    # what the reference twin computes.
    torch.backends.mkldnn.enabled = False
    single_threaded_blas()
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    run = json.load(open(os.path.join(run_dir, "run.json")))
    if world > 1:
        crew.join_group(dist, rank, world, run_dir)
    prec, opt_cfg = cfg["precision"], cfg["optimizer"]
    init, _ = safetensors_io.read(os.path.join(run_dir, "init.safetensors"))
    model = Gpt(cfg["model"], run["params"], init, DTYPES[prec["compute"]])
    net = model
    if world > 1:
        net = DDP(model, bucket_cap_mb=cfg["zero"]["bucket_elems"] * 4 / 2.0 ** 20)
        if plant == "sum_not_average":
            net.register_comm_hook(None, sum_not_average)
    params = [p for _, p in model.named()]
    cls, kwargs = optimizer_class(opt_cfg, opt_cfg["lr"] * (world if plant == "lr_scaled_by_world" else 1))
    zero = cfg["zero"]["stage"] == 1 and world > 1
    opt = ZeroRedundancyOptimizer(params, optimizer_class=cls, **kwargs) if zero else cls(params, **kwargs)
    local = opt.optim if zero else opt  # the optimizer holding this rank's state
    sched = lr_schedule.scheduler(torch, opt, opt_cfg)
    owned = {id(p) for g in local.param_groups for p in g["params"]}
    kinds = set(run["kinds"])  # what to report: param always, grad and the slots as declared
    A = cfg["batch"]["accumulation_steps"]
    clip = cfg.get("clip_grad_norm", 0.0)
    out_dir = os.path.join(run_dir, run["out_dir"])
    steps = []
    for s in range(run.get("first_step", 0), run["steps"]):  # this run's steps (docs/TARGETS.md)
        data, _ = safetensors_io.read(os.path.join(run_dir, "data", "step%d.safetensors" % s))
        for p in params:
            p.grad = None
        loss_sum = 0.0
        for m in range(A):
            g = rank * A + m
            last = m == A - 1
            ctx = net.no_sync() if (world > 1 and not last) else contextlib.nullcontext()
            with ctx:
                loss = net(data["inputs"][g], data["targets"][g])
                loss_sum += loss.item()
                (loss * (1.0 / A)).backward()
        grads = {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)) for n, p in model.named()}
        # grad_norm is torch's own total norm (float32, a norm of per-tensor norms), the one its
        # clipping used; paradiff bounds its rounding by the declared grad_norm_dtype.
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else math.inf)
        derived = {}
        if opt_cfg["kind"] == "sgd" and opt_cfg["momentum"] == 0:
            # torch keeps no buffer at momentum 0; the update direction is grad + wd * param.
            derived = {n: p.grad + opt_cfg["weight_decay"] * p.detach() for n, p in model.named()}
        opt.step()
        if sched is not None:
            sched.step()
        tensors = {}
        for n, p in model.named():
            if "grad" in kinds:
                tensors["grad:" + n] = grads[n]
            tensors["param:" + n] = p.detach()
            if id(p) not in owned:
                continue
            for slot in (s for s in SLOTS[opt_cfg["kind"]] if s in kinds):
                st = local.state.get(p, {})
                if slot == "momentum" and n in derived:
                    tensors[slot + ":" + n] = derived[n]
                elif TORCH_SLOT[slot] in st:
                    tensors[slot + ":" + n] = st[TORCH_SLOT[slot]]
        safetensors_io.write(os.path.join(out_dir, "rank%d.step%d.safetensors" % (rank, s)), tensors)
        steps.append({"loss_sum": loss_sum, "loss_count": A, "grad_norm": float(norm)})
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump({"steps": steps}, f)
    if world > 1:
        serve.end_group(dist)
    if rank == 0:
        serve.record_imports()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", nargs="?")
    ap.add_argument("--serve", action="store_true", help="protocol 2: serve run dirs from stdin (serve.py)")
    ap.add_argument("--plant", default="", choices=["", "sum_not_average", "lr_scaled_by_world"])
    a = ap.parse_args()
    if a.serve:
        serve.serve(crews=crew.Crews(train, (a.plant,)))
    elif a.run_dir is None:
        ap.error("a run dir, or --serve")
    elif "RANK" in os.environ:  # under torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a.run_dir, a.plant)
    else:
        serve.fork_ranks(train, a.run_dir, a.plant)


if __name__ == "__main__":
    main()
