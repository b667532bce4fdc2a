"""FSDP2 on gloo sums the data-parallel gradients instead of averaging them (torch 2.8.0): each
rank's gradient shard is the truth times the number of ranks, silently.

fully_shard reduce-scatters fp32 gradients with ReduceOp.AVG (_get_gradient_divide_factors in
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py), and ProcessGroupGloo's
reduce_scatter_tensor on 2.8.0 returns the sum for AVG; this script checks both: the collective
alone and a fully_shard Linear against the same Linear in one process on the whole batch.
Upstream: pytorch/pytorch issue 162338 ("Incorrect AVG reduction for GLOO"); torch 2.15.0 averages.

Plain PyTorch, no paradiff. Rediscovered by paradiff's unsteered campaign on
adapters/torch2/torch2_fsdp2-2.8.0.json (docs/TORCH2.md T2-10).
Usage: python fsdp2_gloo_avg_sums.py [WORLD]   (default 2; exits 1 when the bug shows)
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
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    # The collective alone: every rank contributes rank + 1, so the average is (world + 1) / 2.
    got = torch.empty(2)
    dist.reduce_scatter_tensor(got, torch.full((2 * world,), float(rank + 1)), op=dist.ReduceOp.AVG)
    avg_ok = torch.allclose(got, torch.full((2,), (world + 1) / 2.0))
    # fully_shard: each rank its quarter of the batch, the mean loss; against one process.
    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 4 * world)
    x = torch.randn(4 * world, 8)
    ref(x).pow(2).mean().backward()
    lin = torch.nn.Linear(8, 4 * world)
    lin.load_state_dict(ref.state_dict())
    fully_shard(lin, mesh=init_device_mesh("cpu", (world,)))
    lin(x.chunk(world)[rank]).pow(2).mean().backward()
    shard = lin.weight.grad.to_local()
    truth = ref.weight.grad.chunk(world)[rank]
    ratio = float(shard.abs().sum() / truth.abs().sum())
    fsdp_ok = torch.allclose(shard, truth, rtol=1e-5, atol=1e-7)
    with open(out + str(rank), "w") as f:
        f.write("%d %d %.4f %s" % (avg_ok, fsdp_ok, ratio, got.tolist()))
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(run, args=(world, os.path.join(d, "store"), os.path.join(d, "out")),
                           nprocs=world, start_method="fork")
        bad = False
        print("torch", torch.__version__, "world", world)
        for r in range(world):
            avg_ok, fsdp_ok, ratio, got = open(os.path.join(d, "out%d" % r)).read().split(" ", 3)
            print("rank %d: reduce_scatter_tensor(AVG) -> %s (%s); fully_shard gradient / truth = %s (%s)"
                  % (r, got, "ok" if avg_ok == "1" else "WRONG", ratio, "ok" if fsdp_ok == "1" else "WRONG"))
            bad = bad or avg_ok != "1" or fsdp_ok != "1"
        sys.exit(1 if bad else 0)
