"""A column-parallel then row-parallel pair of nn.Linear(1, 1) (torch's own ColwiseParallel /
RowwiseParallel) fails in backward on a 1-rank mesh: "This operation would remove or reshape sharded
dimension 2, which requires redistribution". The forward runs; the backward's view of a gradient
whose sharded dimension has size 1 is refused by DTensor's view propagation. Width 2 passes, and so
does torch 2.6.0 at width 1: a regression after 2.6.0 (loud, not silent).

Plain PyTorch, no paradiff. Found by an unsteered paradiff campaign on
adapters/torch2/torch2_tp.json (docs/TORCH2.md T2-9): crash.target.-.-.run.exit, minimized to a
GPT of hidden 1 at world 1.
Usage: python colwise_width1_backward_view.py   (exits 1 when width 1 fails)
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, store, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    lines = []
    for width in (2, 1):
        m = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Linear(width, width))
        parallelize_module(m, mesh, {"0": ColwiseParallel(), "1": RowwiseParallel()})
        try:
            m(torch.randn(1, 1, width)).sum().backward()
            lines.append("width %d: ok" % width)
        except RuntimeError as e:
            lines.append("width %d: %s" % (width, str(e).splitlines()[0]))
    if rank == 0:
        with open(out, "w") as f:
            f.write("\n".join(lines))
    # Before torch 2.8 gloo's destructor can deadlock on the GIL (pytorch/pytorch issue 56297):
    # let the group's threads finish their work first.
    dist.barrier()
    time.sleep(0.05)
    dist.destroy_process_group()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        mp.start_processes(run, args=(1, os.path.join(d, "store"), out), nprocs=1, start_method="fork")
        text = open(out).read()
    print("torch", torch.__version__)
    print(text)
    sys.exit(0 if text.endswith("ok") else 1)
