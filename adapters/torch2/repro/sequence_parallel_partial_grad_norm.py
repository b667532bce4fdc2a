"""clip_grad_norm_ over a sequence-parallel model returns the wrong norm, and clips with it: a
LayerNorm under SequenceParallel (torch's own style; its weight and bias Replicate, its input
Shard(1) along the sequence) leaves its gradients Partial(sum) until the optimizer reads them, and
torch 2.6.0's DTensor takes the 2-norm of a Partial(sum) tensor as the sum of the ranks' local norms
(the norm strategy treats the norm as linear in its input) instead of the norm of their sum. The
norm clip_grad_norm_ reports is inflated, and with max_norm below it every gradient is scaled by a
coefficient computed from it: silently wrong training. Fixed in later releases (torch 2.15.0 passes
this script); upstream: pytorch/pytorch PR 159856 describes the same cause.

Plain PyTorch, no paradiff. Found by paradiff's numeric oracle on
adapters/torch2/torch2_tp_sp-2.6.0.json (docs/TORCH2.md T2-8): "grad_norm reported by the engine
differs from the norm of the gradients it reports".
Usage: python sequence_parallel_partial_grad_norm.py [WORLD]   (default 2; exits 1 when the norm or
the clipped gradients differ from a single process's)
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BATCH, SEQ, HIDDEN, MAX_NORM = 2, 8, 6, 0.1


def run(rank, world, store, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, HIDDEN)
    w = torch.randn(BATCH, SEQ, HIDDEN)
    norm = torch.nn.LayerNorm(HIDDEN)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    reference = torch.nn.LayerNorm(HIDDEN)
    reference.load_state_dict(norm.state_dict())
    (reference(x) * w).sum().backward()
    want = torch.nn.utils.clip_grad_norm_(reference.parameters(), MAX_NORM)

    mesh = init_device_mesh("cpu", (world,))
    parallelize_module(norm, mesh, SequenceParallel())
    rows = SEQ // world
    local = x[:, rank * rows:(rank + 1) * rows]
    y = norm(DTensor.from_local(local, mesh, [Shard(1)]))
    (y.to_local() * w[:, rank * rows:(rank + 1) * rows]).sum().backward()
    placements = str(norm.weight.grad.placements)
    got = torch.nn.utils.clip_grad_norm_(norm.parameters(), MAX_NORM)
    got = got.full_tensor() if isinstance(got, DTensor) else got
    grads_ok = all(torch.allclose(p.grad.full_tensor(), q.grad, rtol=1e-4, atol=1e-6)
                   for p, q in zip(norm.parameters(), reference.parameters()))
    if rank == 0:
        with open(out, "w") as f:
            f.write("gradient placements before the clip: %s\n" % placements)
            f.write("clip_grad_norm_: %.6f, single process: %.6f\n" % (float(got), float(want)))
            f.write("clipped gradients equal the single process's: %s\n" % grads_ok)
            ok = abs(float(got) - float(want)) <= 1e-5 * float(want) and grads_ok
            f.write("ok" if ok else "wrong")
    # Before torch 2.8 gloo's destructor can deadlock on the GIL (pytorch/pytorch issue 56297):
    # let the group's threads finish their work first.
    dist.barrier()
    time.sleep(0.05)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        mp.start_processes(run, args=(world, os.path.join(d, "store"), out), nprocs=world, start_method="fork")
        text = open(out).read()
    print("torch", torch.__version__, "world", world)
    print(text)
    sys.exit(1 if text.endswith("wrong") else 0)
