"""An in-place scaling of a Partial(sum) DTensor is silently lost (torch 2.6.0, 2.8.0): after
x.div_(2) or x.mul_(0.5) the DTensor still holds its old value. DTensor redistributes the Partial
input to Replicate for the op and writes the result to that temporary, not to x.

Where it bites: under sequence parallelism the gradients of replicated parameters (a LayerNorm's
weight and bias under torch's SequenceParallel style) are Partial(sum) until the optimizer needs
them, and torch.distributed.pipelining scales every gradient in place by 1 / n_microbatches after
the step's backwards (PipelineStage.scale_grads: p.grad.div_(n)): those gradients stay n times too
large, silently. clip_grads_with_norm_'s in-place multiply is lost the same way. torch 2.15.0 keeps
the Partial placement for a scalar multiply (related upstream: pytorch/pytorch PR 170025, "preventing
redistribution when linearity is 0"). torch 2.6.0's schedules do not scale gradients at all (they
sum the micro-batches'), so there the pipeline's ratio 2 is by design and the first check shows it.

Plain PyTorch, no paradiff. Found by paradiff on adapters/torch2/torch2_tp_pp-2.8.0.json
(docs/TORCH2.md T2-11). Usage: python partial_inplace_scale_lost.py   (2 ranks; exits 1 when the
bug shows)
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
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    from torch.distributed.tensor import DTensor, Partial
    from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    # 1. The op alone: the ranks' addends 1 and 2 sum to 3; halved in place, 1.5.
    x = DTensor.from_local(torch.full((4,), float(rank + 1)), mesh, [Partial()])
    x.div_(2)
    halved = float(x.full_tensor()[0])
    # 2. A one-stage pipeline (each rank its own) of a sequence-parallel LayerNorm, 2 micro-batches,
    # against the same LayerNorm in one process on the whole batch (the mean of the two losses).
    torch.manual_seed(0)
    ref = torch.nn.LayerNorm(8)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
    inputs, targets = torch.randn(2, 4, 8), torch.randn(2, 4, 8)  # 2 micro-batches of [4, 8]
    sum((ref(inputs[m:m + 1]) - targets[m:m + 1]).pow(2).mean() for m in range(2)).div(2).backward()
    ln = torch.nn.LayerNorm(8)
    ln.load_state_dict(ref.state_dict())
    parallelize_module(ln, mesh, SequenceParallel(use_local_output=True))  # each rank its positions
    # Each rank's share of a micro-batch's mean: its positions' squared errors over all 4 x 8.
    loss_fn = lambda y, t: (y - t).pow(2).sum() / 32  # noqa: E731
    own = [dist.new_group([r]) for r in range(world)][rank]
    stage = PipelineStage(ln, 0, 1, torch.device("cpu"), group=own)
    mine = slice(2 * rank, 2 * rank + 2)
    ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn).step(inputs[:, mine], target=targets[:, mine])
    placement = str(ln.weight.grad.placements)
    grad = ln.weight.grad.full_tensor()
    ratio = float(grad.abs().sum() / ref.weight.grad.abs().sum())
    with open(out + str(rank), "w") as f:
        f.write("%.4f %.4f %s" % (halved, ratio, placement))
    # Before torch 2.8 gloo's destructor can deadlock on the GIL (pytorch/pytorch issue 56297):
    # let the group's threads finish their work first.
    dist.barrier()
    time.sleep(0.05)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = 2
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(run, args=(world, os.path.join(d, "store"), os.path.join(d, "out")),
                           nprocs=world, start_method="fork")
        halved, ratio, placement = open(os.path.join(d, "out0")).read().split(" ", 2)
    print("torch", torch.__version__)
    print("Partial(sum) DTensor of value 3, div_(2) in place:", halved, "(want 1.5)")
    print("sequence-parallel LayerNorm weight gradient %s after a 2-micro-batch pipeline step:"
          " %s x the single-process gradient (want 1)" % (placement, ratio))
    sys.exit(1 if abs(float(halved) - 1.5) > 1e-6 or abs(float(ratio) - 1) > 1e-4 else 0)
