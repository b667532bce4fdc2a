"""DDP(static_graph=True) + no_sync() gradient accumulation: the first backward inside no_sync()
raises "expect_autograd_hooks_ INTERNAL ASSERT FAILED at .../reducer.cpp" (torch 2.15.0, CPU, gloo;
also at world size 1). Without static_graph, or without no_sync(), the same loop trains.

Plain PyTorch, no paradiff. Found by paradiff's campaign on adapters/torch2/torch2_ddp_static.json
(docs/TORCH2.md, finding T2-1). Upstream: pytorch/pytorch issue 143580 (open); fix PRs 166388 and
187732 (open at the time of writing; 187732 also reports that once the assert is bypassed the
gradients silently stop being all-reduced from the second iteration on).

Usage: python ddp_static_graph_no_sync.py [WORLD]   (default 1; exits 1 when the bug is present)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world, store, static_graph):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    torch.manual_seed(0)
    net = DDP(torch.nn.Linear(4, 4), static_graph=static_graph)
    x = torch.randn(3, 2, 4)
    for step in range(2):
        for m in range(3):  # gradient accumulation: sync only on the last micro-batch
            if m < 2:
                with net.no_sync():
                    net(x[m]).sum().backward()
            else:
                net(x[m]).sum().backward()
        net.zero_grad()
    dist.destroy_process_group()


def trial(world, static_graph):
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        try:
            mp.start_processes(run, args=(world, store, static_graph), nprocs=world, start_method="fork")
            return "ok"
        except Exception as e:  # noqa: BLE001
            return [line for line in str(e).splitlines() if "Error" in line][-1]


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    print("torch", torch.__version__, "world", world)
    plain = trial(world, False)
    static = trial(world, True)
    print("static_graph=False:", plain)
    print("static_graph=True: ", static)
    sys.exit(1 if plain == "ok" and static != "ok" else 0)
