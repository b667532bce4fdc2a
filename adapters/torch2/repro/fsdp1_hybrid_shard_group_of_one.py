"""FSDP1's hybrid sharding with shard groups of one rank never reduces the gradients across the
replicas (torch 2.15.0): every rank trains on its own gradient, silently.

FullyShardedDataParallel(sharding_strategy=HYBRID_SHARD or _HYBRID_SHARD_ZERO2) on a (replicate,
shard) device mesh whose shard dimension has size 1: FSDP1 sees a process group of size 1 and
switches the strategy to NO_SHARD (a UserWarning, torch/distributed/fsdp/_init_utils.py, "FSDP is
switching to use `NO_SHARD` ... since the world size is 1"); NO_SHARD all-reduces over that
size-1 group only, and the replicate dimension's all-reduce belongs to the hybrid strategies, which
no longer apply. This script checks a Linear under each hybrid strategy against the same Linear in
one process on the whole batch: each rank's gradient should be the truth (the average over the
ranks' batches), and the ranks' gradients should agree. Shard groups of two (WORLD 4: a mesh
(2, 2)) reduce correctly. Upstream: pytorch/pytorch issue 154888 (closed: FSDP1 is not changed
for it).

Plain PyTorch, no paradiff. Found by paradiff's unsteered campaign on
adapters/torch2/torch2_fsdp1_hsdp.json (docs/TORCH2.md T2-16).
Usage: python fsdp1_hybrid_shard_group_of_one.py [WORLD [SHARD]]   (default 2 1; exits 1 when the
bug shows)
"""
import os
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, shard, store, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    warnings.simplefilter("ignore")  # the switch to NO_SHARD is printed below, once, by rank 0
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world // shard, shard), mesh_dim_names=("replicate", "shard"))
    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 4, bias=False)  # 32 elements: whole shards of 32 / SHARD
    x = torch.randn(4 * world, 8)
    ref(x).pow(2).mean().backward()  # the truth: the mean loss over every rank's batch
    results = []
    for strategy in (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2):
        lin = torch.nn.Linear(8, 4, bias=False)
        lin.load_state_dict(ref.state_dict())
        net = FSDP(lin, sharding_strategy=strategy, device_mesh=mesh, use_orig_params=True,
                   device_id=torch.device("cpu"))
        net(x.chunk(world)[rank]).pow(2).mean().backward()
        got = lin.weight.grad.detach().reshape(-1)  # this rank's shard (whole under NO_SHARD)
        truth = ref.weight.grad.reshape(-1).chunk(32 // got.numel())[rank % shard if got.numel() < 32 else 0]
        ratio = float(got.sub(truth).norm() / truth.norm())
        ok = torch.allclose(got, truth, rtol=1e-5, atol=1e-7)
        results.append("%s %d %.3f %s" % (strategy.name, ok, ratio, net.sharding_strategy.name))
    with open(out + str(rank), "w") as f:
        f.write("\n".join(results))
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    shard = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(run, args=(world, shard, os.path.join(d, "store"), os.path.join(d, "out")),
                           nprocs=world, start_method="fork")
        bad = False
        print("torch", torch.__version__, "world", world, "shard groups of", shard)
        for r in range(world):
            for line in open(os.path.join(d, "out%d" % r)).read().splitlines():
                name, ok, ratio, runs = line.split()
                print("rank %d: %s (runs as %s): |grad - truth| / |truth| = %s (%s)"
                      % (r, name, runs, ratio, "ok" if ok == "1" else "WRONG"))
                bad = bad or ok != "1"
        sys.exit(1 if bad else 0)
