"""torch.distributed.checkpoint cannot load an FSDP1 model + optimizer whose sharded state dict
leaves a rank without a chunk of some parameter (torch 2.15.0): "Missing key in checkpoint
state_dict: optim." (or "optim.param_groups."), though the checkpoint holds every key the ranks ask for.

FSDP1's sharded state dict chunks each parameter along dim 0 over the ranks (torch.chunk): a
parameter with fewer rows than ranks leaves the last ranks a ShardedTensor with no local shard,
and the load planner's flattening drops it from that rank's keys
(torch/distributed/checkpoint/default_planner.py, DefaultLoadPlanner.create_local_plan). The
planner then reads any checkpoint key the rank lacks as the sign of a checkpoint saved before
torch 2.4 and flattens the rank's state dict the old way, where a container holding no tensor is one
key: the optimizer's param_groups (and, with no optimizer state, the whole "optim" entry) become
keys the checkpoint does not have, and that rank's plan fails. Here: Linear(1, 1) + Linear(1, 2)
and SGD, saved on one rank, loaded into two under SHARD_GRAD_OP (FULL_SHARD alike); the same
with Linear(2, 2) + Linear(2, 2), every parameter with a row per rank, loads.

Plain PyTorch, no paradiff. Found by paradiff's unsteered campaign on
adapters/torch2/torch2_fsdp1.json (docs/TORCH2.md T2-17).
Usage: python fsdp1_dcp_load_empty_chunk.py [WIDTH [STRATEGY]]   (default 1 SHARD_GRAD_OP; exits
1 when the load fails)
"""
import os
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, width, strategy, store, path, out):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    warnings.simplefilter("ignore")  # FSDP1's and ShardedTensor's deprecation warnings
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Linear(width, 2))
    net = FSDP(model, sharding_strategy=getattr(ShardingStrategy, strategy if world > 1 else "NO_SHARD"),
               use_orig_params=True, device_id=torch.device("cpu"))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    model_sd, optim_sd = get_state_dict(net, opt)
    if out is None:  # the save: one step, then the checkpoint
        net(torch.randn(2, width)).sum().backward()
        opt.step()
        model_sd, optim_sd = get_state_dict(net, opt)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
    else:
        state = {"model": model_sd, "optim": optim_sd}
        try:
            dcp.load(state, checkpoint_id=path)
            set_state_dict(net, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
            result = "loaded"
        except BaseException as e:  # DCP's CheckpointException is a BaseException
            result = "FAILED: " + [x for x in str(e).splitlines() if x.strip()][-1].strip()
        with open(out + str(rank), "w") as f:
            f.write(result)
    dist.destroy_process_group()


if __name__ == "__main__":
    width = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    strategy = sys.argv[2] if len(sys.argv) > 2 else "SHARD_GRAD_OP"
    with tempfile.TemporaryDirectory() as d:
        ckpt, out = os.path.join(d, "ckpt"), os.path.join(d, "out")
        mp.start_processes(run, args=(1, width, strategy, os.path.join(d, "s1"), ckpt, None), nprocs=1,
                           start_method="fork")
        mp.start_processes(run, args=(2, width, strategy, os.path.join(d, "s2"), ckpt, out), nprocs=2,
                           start_method="fork")
        print("torch", torch.__version__, "Linear(%d, %d) + Linear(%d, 2), saved on 1 rank, loaded into 2 under %s"
              % (width, width, width, strategy))
        bad = False
        for r in range(2):
            result = open(out + str(r)).read()
            print("rank %d: %s" % (r, result))
            bad = bad or result != "loaded"
        sys.exit(1 if bad else 0)
