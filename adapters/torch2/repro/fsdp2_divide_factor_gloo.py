"""FSDP2's set_gradient_divide_factor(f) fails on gloo for any f other than the data-parallel size:
fully_shard then reduce-scatters with ReduceOp.PREMUL_SUM(1/f) (torch 2.15.0,
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, _get_gradient_divide_factors), which
ProcessGroupGloo does not implement: "RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo".
A CPU / gloo limitation of the public API (no silent error); at world 1 no collective runs and the
factor is applied by a division instead.

Plain PyTorch, no paradiff. Found while writing adapters/torch2's planted bug (docs/TORCH2.md T2-2).
Usage: python fsdp2_divide_factor_gloo.py [WORLD]   (default 2; exits 1 when the limitation holds)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, store, factor, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    fully_shard(lin, mesh=init_device_mesh("cpu", (world,)))
    if factor is not None:
        lin.set_gradient_divide_factor(factor)
    lin(torch.randn(2, 8)).sum().backward()
    if rank == 0:
        open(out, "w").write("ok")
    dist.destroy_process_group()


def trial(world, factor):
    with tempfile.TemporaryDirectory() as d:
        try:
            mp.start_processes(run, args=(world, os.path.join(d, "store"), factor, os.path.join(d, "ok")),
                               nprocs=world, start_method="fork")
            return "ok"
        except Exception as e:  # noqa: BLE001
            return [line for line in str(e).splitlines() if "Error" in line][-1]


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    print("torch", torch.__version__, "world", world)
    default = trial(world, None)
    custom = trial(world, 1.0)
    print("default divide factor:        ", default)
    print("set_gradient_divide_factor(1):", custom)
    sys.exit(1 if default == "ok" and custom != "ok" else 0)
