"""torch.distributed.checkpoint's get_state_dict (here its model half, get_model_state_dict) fails
for an FSDP1 model in which some rank gets no dim-0 chunk of a parameter (torch 2.6.0):
"NotImplementedError: Only single local shard is supported.", so such a model cannot be
checkpointed at all.

FSDP1's sharded state dict chunks each parameter along dim 0 over the ranks (torch.chunk): a
Linear(1, 1)'s weight and bias leave rank 1 a ShardedTensor with no local shard, and
_get_model_state_dict asks each value `is_meta`, which ShardedTensor answers through local_tensor(),
defined for exactly one local shard. Upstream: pytorch/pytorch issue 141799; torch 2.8.0 and
2.15.0 return the state dict (loading it is another matter: T2-17).

Plain PyTorch, no paradiff. Rediscovered by paradiff's unsteered campaign on
adapters/torch2/torch2_fsdp1-2.6.0.json (docs/TORCH2.md T2-19).
Usage: python fsdp1_get_state_dict_chunkless_rank.py   (two ranks; exits 1 when the bug shows)
"""
import os
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, store, out):
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    warnings.simplefilter("ignore")  # FSDP1's and ShardedTensor's deprecation warnings
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    net = FSDP(torch.nn.Linear(1, 1), sharding_strategy=ShardingStrategy.FULL_SHARD, use_orig_params=True,
               device_id=torch.device("cpu"))
    try:  # the model's half of get_state_dict: the optimizer's would wait on the failed rank
        get_model_state_dict(net)
        result = "returned"
    except NotImplementedError as e:
        result = "FAILED: NotImplementedError: %s" % e
    with open(out + str(rank), "w") as f:
        f.write(result)
    dist.destroy_process_group()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        mp.start_processes(run, args=(os.path.join(d, "store"), out), nprocs=2, start_method="fork")
        print("torch", torch.__version__, "FULL_SHARD Linear(1, 1) on two ranks: get_model_state_dict")
        bad = False
        for r in range(2):
            result = open(out + str(r)).read()
            print("rank %d: %s" % (r, result))
            bad = bad or result != "returned"
        sys.exit(1 if bad else 0)
