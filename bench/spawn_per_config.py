#!/usr/bin/env python3
"""Baseline of the target-throughput figure (docs/PERFORMANCE.md): configs checked the way
framework test suites check a parallel layout, one fresh interpreter per config that spawns a
process group (torch.multiprocessing.spawn, gloo), trains DDP, and compares the result with a
single-process run of the same steps (torch.testing.assert_close, its default float32 tolerances).

It checks the run dirs bench_target_throughput --keep wrote for the torch (1.13) target: paradiff's
GPT (adapters/torch/model.py), its initial parameters and data; dp only, fp32 (bf16 compute is
skipped), ZeRO 0 and 1 (ZeroRedundancyOptimizer), SGD / Adam / AdamW, accumulation, clipping,
learning-rate schedules (adapters/torch/lr_schedule.py); no checkpoint (skipped).
Usage: spawn_per_config.py RUN_DIR...   (prints one JSON object: configs checked per second)
       spawn_per_config.py --one RUN_DIR (one config, in this process; exit 1 when it differs)
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "adapters", "torch"))


def supported(cfg):
    p = cfg["parallel"]
    prec = cfg["precision"]
    return (p["tp"] == p["pp"] == 1 and not p["sp"] and prec["param"] == prec["compute"] == "fp32"
            and cfg["zero"]["stage"] <= 1 and cfg["checkpoint"]["save_at"] <= 0)


def build(run_dir, zero=False):
    import torch
    import lr_schedule
    import safetensors_io
    from model import Gpt
    from torch.distributed.optim import ZeroRedundancyOptimizer
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    run = json.load(open(os.path.join(run_dir, "run.json")))
    init, _ = safetensors_io.read(os.path.join(run_dir, "init.safetensors"))
    model = Gpt(cfg["model"], run["params"], init, torch.float32)
    o = cfg["optimizer"]
    if o["kind"] == "sgd":
        cls, kw = torch.optim.SGD, dict(lr=o["lr"], momentum=o["momentum"], weight_decay=o["weight_decay"])
    else:
        cls = torch.optim.Adam if o["kind"] == "adam" else torch.optim.AdamW
        kw = dict(lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])
    if zero:
        opt = ZeroRedundancyOptimizer(list(model.parameters()), optimizer_class=cls, **kw)
    else:
        opt = cls(model.parameters(), **kw)
    return cfg, run, model, opt, lr_schedule.scheduler(torch, opt, o)


def train(model, opt, sched, cfg, run, run_dir, micro_batches, wrap=None):
    """Trains every step on `micro_batches(step_data)`, a list of (inputs, targets, weight)."""
    import torch
    import safetensors_io
    net = wrap(model) if wrap else model
    clip = cfg.get("clip_grad_norm", 0.0)
    for s in range(run["steps"]):
        data, _ = safetensors_io.read(os.path.join(run_dir, "data", "step%d.safetensors" % s))
        opt.zero_grad()
        for x, y, w in micro_batches(data):
            (net(x, y) * w).backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
    return [p.detach().clone() for p in model.parameters()]


def rank_main(rank, world, run_dir, store, out):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    cfg, run, model, opt, sched = build(run_dir, zero=cfg["zero"]["stage"] == 1)
    A = cfg["batch"]["accumulation_steps"]
    # DDP averages over ranks; each rank weights its micro-batches 1/A.
    params = train(model, opt, sched, cfg, run, run_dir,
                   lambda d: [(d["inputs"][rank * A + m], d["targets"][rank * A + m], 1.0 / A) for m in range(A)],
                   wrap=lambda m: DDP(m))
    if rank == 0:
        torch.save(params, out)
    dist.destroy_process_group()


def check_one(run_dir):
    import torch
    import torch.multiprocessing as mp
    torch.set_num_threads(1)
    cfg = json.load(open(os.path.join(run_dir, "config.json")))
    world = cfg["parallel"]["dp"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "params.pt")
        mp.spawn(rank_main, args=(world, run_dir, os.path.join(tmp, "store"), out), nprocs=world)
        distributed = torch.load(out)
    _, run, model, opt, sched = build(run_dir)
    M = world * cfg["batch"]["accumulation_steps"]
    single = train(model, opt, sched, cfg, run, run_dir,
                   lambda d: [(d["inputs"][g], d["targets"][g], 1.0 / M) for g in range(M)])
    for a, b in zip(distributed, single):
        torch.testing.assert_close(a, b)


def main():
    if sys.argv[1] == "--one":
        check_one(sys.argv[2])
        return
    checked, skipped, failed = 0, 0, 0
    t0 = time.monotonic()
    for run_dir in sys.argv[1:]:
        if not supported(json.load(open(os.path.join(run_dir, "config.json")))):
            skipped += 1
            continue
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", run_dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        checked += 1
        if r.returncode != 0:
            failed += 1
            print(r.stderr[-2000:], file=sys.stderr)
    seconds = time.monotonic() - t0
    print(json.dumps({"checked": checked, "skipped": skipped, "failed": failed,
                      "checked_per_s": checked / seconds if seconds > 0 else 0.0}, indent=2))


if __name__ == "__main__":
    main()
