"""torch.distributed (gloo): a rank deadlocks in ProcessGroupGloo's destructor at
destroy_process_group: the main thread holds the GIL while it joins the group's worker threads,
and a worker thread, releasing a finished work item's tensors, waits for the GIL (seen with gdb:
~ProcessGroupGloo -> std::thread::join on one side, PyObjectSlot::maybe_destroy_pyobj ->
take_gil on the other). Intermittent: torch 2.6.0 hung at iterations 2 and 22 of this loop on
this machine (2 cores); torch 2.15.0 ran 100 iterations without one.

Plain PyTorch, no paradiff. Found by paradiff's unsteered campaign on
adapters/torch2/torch2_ddp-2.6.0.json as a hang (a rank alive after writing all its outputs;
docs/TORCH2.md, finding T2-5); this loop is that config's shape (DDP + ZeroRedundancyOptimizer
(Adam), clipping, 2 ranks, 2 steps). Upstream: pytorch/pytorch issue 56297 (destructors of
pybind11-bound classes that block can deadlock), fixed for process groups by PR 154976 ("Release
GIL in PG destructor", June 2025).

Usage: python gloo_destroy_deadlock.py [ITERATIONS]   (default 100; exits 1 at the first hang)
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def rank(r, world, store):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=r, world_size=world)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(23, 16), torch.nn.Linear(16, 32), torch.nn.GELU(),
                            torch.nn.Linear(32, 23))
    net = DDP(m, bucket_cap_mb=31 * 4 / 2**20)
    opt = ZeroRedundancyOptimizer(list(m.parameters()), optimizer_class=torch.optim.Adam, lr=1e-5)
    for s in range(2):
        x = torch.randint(0, 23, (3, 5))
        loss = net(x).float().logsumexp(-1).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.82)
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    for i in range(n):
        with tempfile.TemporaryDirectory() as d:
            ctx = mp.start_processes(rank, args=(2, os.path.join(d, "store")), nprocs=2,
                                     start_method="fork", join=False)
            t0 = time.time()
            while not ctx.join(timeout=1):
                if time.time() - t0 > 30:
                    print("HANG at iteration", i, flush=True)
                    for p in ctx.processes:
                        p.kill()
                    sys.exit(1)
    print("no hang in", n, "iterations")
