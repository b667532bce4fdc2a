"""A pipeline stage whose output is the full tensor of an unevenly sharded DTensor fails at run
time (torch 2.8.0): "PipeliningShapeError: Stage 1 forward outputs: value 0 has a stride mismatch:
expected (5, 1) actual (6, 1)". full_tensor() of a Shard(-1) DTensor whose last dimension does not
divide over the mesh all-gathers padded shards and returns a narrowed view of the padded buffer
(stride 6 for width 5 over 2 ranks); the stage's metadata, taken from its first forward, says
contiguous; the runtime check compares strides. torch 2.15.0 runs it.

Layout: 4 ranks, 2 pipeline stages x 2 tensor-parallel ranks (each tp rank its own pipeline); the
last stage is a column-parallel Linear(4, 5) (ColwiseParallel, its output gathered with
full_tensor() for the loss). Plain PyTorch, no paradiff. Found by paradiff's campaign on
adapters/torch2/torch2_tp_pp-2.8.0.json (docs/TORCH2.md T2-12).
Usage: python pipelining_uneven_dtensor_output_stride.py   (exits 1 when the bug shows)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class Head(torch.nn.Module):
    def __init__(self, mesh):
        super().__init__()
        from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
        self.lin = torch.nn.Linear(4, 5)
        parallelize_module(self.lin, mesh, ColwiseParallel(use_local_output=False))

    def forward(self, x):
        return self.lin(x).full_tensor()  # Shard(-1) of width 5 over 2 ranks, gathered


def run(rank, world, store, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    tp = 2
    mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("pp", "tp"))
    stage_index, t = rank // tp, rank % tp
    pipes = [dist.new_group([t2, t2 + tp]) for t2 in range(tp)]  # one pipeline per tp rank
    torch.manual_seed(0)
    first = torch.nn.Linear(4, 4)
    head = Head(mesh["tp"])
    mod = first if stage_index == 0 else head
    stage = PipelineStage(mod, stage_index, 2, torch.device("cpu"), group=pipes[t])
    sched = ScheduleGPipe(stage, n_microbatches=2, loss_fn=lambda y, target: (y - target).pow(2).mean())
    x, target = torch.randn(4, 4), torch.randn(4, 5)
    result = "ok"
    try:
        sched.step(x) if stage_index == 0 else sched.step(target=target)
    except Exception as e:  # noqa: BLE001
        result = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
    with open(out + str(rank), "w") as f:
        f.write(result)
    os._exit(0)  # a failed step leaves the other stage waiting; nothing more to tear down


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        world = 4
        procs = [mp.get_context("fork").Process(target=run, args=(r, world, os.path.join(d, "store"),
                                                                     os.path.join(d, "out")))
                 for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
                p.join()
        results = [open(os.path.join(d, "out%d" % r)).read() if os.path.exists(os.path.join(d, "out%d" % r))
                   else "no result (hung)" for r in range(world)]
    print("torch", torch.__version__)
    for r, res in enumerate(results):
        print("rank %d (stage %d):" % (r, r // 2), res)
    sys.exit(0 if all(res == "ok" for res in results) else 1)
