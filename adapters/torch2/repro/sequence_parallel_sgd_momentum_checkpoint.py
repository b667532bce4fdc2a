"""A model under sequence parallelism trained with SGD and momentum cannot be checkpointed with
torch.distributed.checkpoint: a LayerNorm under SequenceParallel (torch's own style; its weight and
bias Replicate, its input Shard(1) along the sequence) leaves its gradients Partial(sum), SGD's first
step clones the gradient into the momentum buffer, and the buffer stays Partial(sum) through every
later step. The training is right (the update redistributes the buffer), but get_state_dict returns
the Partial buffer, and:
- torch 2.6.0 and 2.8.0 save it without a word, and the checkpoint holds another momentum than the
  optimizer's (read back whole, it differs by up to 4.15 here): a reload resumes from it;
- torch 2.15.0's dcp.save refuses it: "Any checkpointing related operations are not supported for
  DTensor with partial placements!" (pytorch/pytorch PR 163940 made DCP raise on Partial DTensors,
  whose checkpoint "is not correct"), so such a run cannot be checkpointed at all.
Adam and AdamW pass (this script with Adam exits 0 on all three): their moments start as zeros of
the parameter's Replicate placement.

Plain PyTorch, no paradiff. Found by paradiff's campaign on adapters/torch2/torch2_tp_sp.json
(docs/TORCH2.md T2-15): a checkpointed sequence-parallel config with SGD and momentum,
crash.target.-.-.run.exit.CheckpointException-reduce_scatter at the save.
Usage: python sequence_parallel_sgd_momentum_checkpoint.py [WORLD]   (default 2; exits 1 when the
save fails or the checkpoint's momentum differs from the optimizer's, 0 when they are equal)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BATCH, SEQ, HIDDEN, LR, MOMENTUM = 2, 8, 6, 0.1, 0.9


def run(rank, world, tmp, results):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"), rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, HIDDEN)
    w = torch.randn(BATCH, SEQ, HIDDEN)
    norm = torch.nn.LayerNorm(HIDDEN)
    mesh = init_device_mesh("cpu", (world,))
    parallelize_module(norm, mesh, SequenceParallel())
    opt = torch.optim.SGD(norm.parameters(), lr=LR, momentum=MOMENTUM)
    rows = SEQ // world
    y = norm(DTensor.from_local(x[:, rank * rows:(rank + 1) * rows], mesh, [Shard(1)]))
    (y.to_local() * w[:, rank * rows:(rank + 1) * rows]).sum().backward()
    opt.step()
    buf = opt.state[norm.weight]["momentum_buffer"]
    placements, true_buf = str(buf.placements), buf.full_tensor()  # the momentum the update uses
    model_sd, optim_sd = get_state_dict(norm, opt)
    ckpt = os.path.join(tmp, "ckpt")
    try:
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=ckpt)
        saved = True
    except CheckpointException as e:  # on every rank; a BaseException, each rank's error inside
        saved, why = False, str(e).split("ValueError: ")[-1].splitlines()[0]
    dist.barrier()
    if rank == 0:
        if saved:  # what the checkpoint holds, read back whole
            from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
            dcp_to_torch_save(ckpt, os.path.join(tmp, "whole.pt"))
            held = torch.load(os.path.join(tmp, "whole.pt"))["optim"]["state"]["weight"]["momentum_buffer"]
            ok = torch.equal(held, true_buf)
            result = "saved; the checkpoint's momentum %s the optimizer's (max difference %.3g)" % (
                "equals" if ok else "differs from", (held - true_buf).abs().max())
        else:
            ok, result = False, "save failed: " + why
        text = "momentum buffer placements after one step: %s\ndcp.save: %s" % (placements, result)
        results.put((ok, text))
    dist.barrier()
    os._exit(0)  # no group teardown: gloo's destructor can deadlock on torch 2.6.0 (T2-5)


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    results = mp.get_context("fork").SimpleQueue()
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(run, args=(world, tmp, results), nprocs=world, start_method="fork")
        ok, text = results.get()
    print("torch", torch.__version__, "world", world)
    print(text)
    sys.exit(0 if ok else 1)
