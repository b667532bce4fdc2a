"""A vocabulary-parallel embedding (torch's own API: nn.Embedding under RowwiseParallel, weight
Shard(0) over the tp ranks) gets a *replicated* weight gradient: every tp rank computes and holds
the full [vocab, hidden] gradient, tp times the memory of the shard it updates. The values are
right (the optimizer redistributes them to Shard(0) locally); the memory the layout exists to save
is not saved for the gradient. Cause (torch 2.15.0,
torch/distributed/tensor/_ops/_embedding_ops.py, embedding_dense_backward_strategy): its strategies
are column-wise (grad Shard(1)), batch-sharded (Partial) and partial, none row-wise, so the backward
of a Shard(0) table with a replicated incoming gradient runs replicated. With tied embeddings the
head's Shard(0) gradient is accumulated first and the sum stays sharded; untied, it does not.

Plain PyTorch, no paradiff. Found by paradiff's tiling oracle on adapters/torch2/torch2_tp.json
(docs/TORCH2.md T2-7): "grad:embed.wte[0] is held by 4 ranks, expected 1".
Usage: python vocab_parallel_embedding_grad_replicated.py [WORLD]   (default 2; exits 1 when the
gradient is replicated)
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

VOCAB, HIDDEN = 32, 16


def run(rank, world, store, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    torch.manual_seed(0)
    emb = torch.nn.Embedding(VOCAB, HIDDEN)
    reference = emb.weight.detach().clone().requires_grad_()
    ids = torch.tensor([[1, 5, 7, 3, 30]])
    parallelize_module(emb, init_device_mesh("cpu", (world,)), RowwiseParallel(input_layouts=Replicate()))
    emb(ids).sum().backward()
    torch.nn.functional.embedding(ids, reference).sum().backward()
    w, g = emb.weight, emb.weight.grad
    if rank == 0:
        with open(out, "w") as f:
            f.write("param %s local %s\ngrad  %s local %s\nvalues equal the single-process gradient: %s\n" % (
                w.placements, tuple(w.to_local().shape), g.placements, tuple(g.to_local().shape),
                torch.equal(g.full_tensor(), reference.grad)))
            f.write("replicated" if g.to_local().numel() > w.to_local().numel() else "sharded")
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
    sys.exit(1 if text.endswith("replicated") else 0)
