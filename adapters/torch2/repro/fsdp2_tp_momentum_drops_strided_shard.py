"""Under FSDP2 over tensor parallelism (a 2-D (dp, tp) mesh), SGD with weight decay gives a
sharded parameter a momentum buffer without the parameter's _StridedShard placement (torch 2.8.0):
the parameter and its gradient are (_StridedShard(dim=0, sf=2), Shard(dim=0)), the buffer torch
builds from grad.add(param, alpha=weight_decay) says (Shard(dim=0), Shard(dim=0)) while its local
tensor keeps the strided layout (without weight decay the buffer keeps the placement), so its
metadata names the wrong rows on some ranks (local shape and global offset disagree with the
placement; full_tensor() and checkpoints of the state read it at the wrong rows). torch 2.15.0 keeps
the placement.

Layout: 4 ranks, mesh (dp 2, tp 2); a ColwiseParallel Linear(2, 2) then fully_shard on dp; one SGD
step with momentum. Plain PyTorch, no paradiff. Found by paradiff's first campaign on
adapters/torch2/torch2_tp_fsdp2-2.8.0.json (the adapter's own check that each reported local
tensor matches its placement; docs/TORCH2.md T2-13).
Usage: python fsdp2_tp_momentum_drops_strided_shard.py   (exits 1 when the bug shows)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, store, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2, bias=False))
    parallelize_module(model[0], mesh["tp"], ColwiseParallel())
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    model(torch.randn(2, 2)).sum().backward()
    opt.step()
    w = model[0].weight
    buf = opt.state[w]["momentum_buffer"]
    with open(out + str(rank), "w") as f:
        f.write("%s | %s" % (w.placements, buf.placements))
    dist.destroy_process_group()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        world = 4
        mp.start_processes(run, args=(world, os.path.join(d, "store"), os.path.join(d, "out")),
                           nprocs=world, start_method="fork")
        print("torch", torch.__version__)
        bad = False
        for r in range(world):
            param, buf = open(os.path.join(d, "out%d" % r)).read().split(" | ")
            print("rank %d: weight %s, momentum_buffer %s" % (r, param, buf))
            bad = bad or param != buf
        sys.exit(1 if bad else 0)
