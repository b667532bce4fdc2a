"""torch 2.6.0: torch.distributed.pipelining's interleaved 1F1B hangs on gloo. The schedule sends
and receives activations through `_batch_p2p`, which returned `dist.batch_isend_irecv(ops).pop()`:
one Work for the whole batch, as NCCL coalesces it; gloo returns one Work per operation, so the
schedule waits on the last one only and the ranks end up waiting on each other's receives.

Plain PyTorch, no paradiff: two ranks, four one-layer chunks (two per rank), four micro-batches,
`ScheduleInterleaved1F1B`. Found by paradiff's unsteered campaign on
adapters/torch2/torch2_pp-2.6.0.json as a hang (docs/TORCH2.md, finding T2-14). Upstream:
pytorch/pytorch issue 132644, fixed by PR 152938 ("Fix _batch_p2p bug for non-NCCL backends",
May 2025); 2.8.0 and 2.15.0 run this script.

Usage: python interleaved_gloo_batch_p2p_hang.py [SECONDS]   (default 10: exits 1 if the ranks are
still running after that; 0 when both finish their two steps)
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B

RANKS, CHUNKS_PER_RANK, MICROBATCHES, WIDTH = 2, 2, 4, 4


def rank(r, store):
    dist.init_process_group("gloo", init_method="file://" + store, rank=r, world_size=RANKS)
    torch.manual_seed(0)
    n = RANKS * CHUNKS_PER_RANK
    chunks = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(n)]
    stages = [PipelineStage(chunks[c], c, n, torch.device("cpu")) for c in range(r, n, RANKS)]
    schedule = ScheduleInterleaved1F1B(stages, n_microbatches=MICROBATCHES,
                                       loss_fn=lambda y, t: ((y - t) ** 2).mean())
    x, target = torch.randn(MICROBATCHES, WIDTH), torch.randn(MICROBATCHES, WIDTH)
    for _ in range(2):
        if r == 0:  # the first stage's rank feeds the inputs, the last stage's the targets
            schedule.step(x)
        else:
            schedule.step(target=target)
    dist.destroy_process_group()


if __name__ == "__main__":
    limit = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.start_processes(rank, args=(os.path.join(d, "store"),), nprocs=RANKS,
                                 start_method="fork", join=False)
        t0 = time.time()
        while not ctx.join(timeout=1):
            if time.time() - t0 > limit:
                print("HANG: the ranks are still running after %.0f s" % limit, flush=True)
                for p in ctx.processes:
                    p.kill()
                sys.exit(1)
    print("torch", torch.__version__, "ran two interleaved steps")
