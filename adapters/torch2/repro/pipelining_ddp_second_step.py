"""torch.distributed.pipelining with DistributedDataParallel stages (pp 2 x dp 2, CPU, gloo): the
second schedule.step() fails in DDP's forward, "params_.size() == rebuilt_param_indices_.size()
INTERNAL ASSERT FAILED ... rebuilt parameter indices size is not same as original model parameters
size" (torch 2.15.0, GPipe and 1F1B, two micro-batches). The reducer's first-iteration record of
the gradients' ready order holds twice as many entries as the module has parameters (4 against 2
here), as if both micro-batches' backward passes had been recorded, not only the last one (the
others run under the stage's no_sync); not traced further. torch 2.6.0 runs it.

Plain PyTorch, no paradiff. Found by paradiff's unsteered campaign on
adapters/torch2/torch2_pp_dp.json (docs/TORCH2.md, finding T2-6; docs/FINDINGS.md), minimized to
pp 2 x dp 2, two micro-batches, two steps. Needs pp >= 2, dp >= 2 and >= 2 micro-batches: pp 1 or
one micro-batch passes. No upstream issue found.

Usage: python pipelining_ddp_second_step.py [1f1b]   (exits 1 when the bug is present)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.nn.parallel import DistributedDataParallel as DDP

PP, DP, MICRO, STEPS = 2, 2, 2, 2


def run(rank, world, store, cls):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    stage, replica = rank // DP, rank % DP  # rank = replica + DP * stage
    pp_groups = [dist.new_group([d + DP * s for s in range(PP)]) for d in range(DP)]
    dp_groups = [dist.new_group([d + DP * s for d in range(DP)]) for s in range(PP)]
    torch.manual_seed(stage)
    mod = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
    ddp = DDP(mod, process_group=dp_groups[stage])
    pipe_stage = PipelineStage(ddp, stage, PP, torch.device("cpu"), group=pp_groups[replica])
    sched = cls(pipe_stage, n_microbatches=MICRO, loss_fn=lambda out, tgt: ((out - tgt) ** 2).mean())
    opt = torch.optim.SGD(mod.parameters(), lr=0.1)
    torch.manual_seed(100 + replica)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(STEPS):
        opt.zero_grad()
        if stage == 0:
            sched.step(x)
        else:
            sched.step(target=y, losses=[])
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    cls = Schedule1F1B if "1f1b" in sys.argv[1:] else ScheduleGPipe
    with tempfile.TemporaryDirectory() as d:
        try:
            mp.start_processes(run, args=(PP * DP, os.path.join(d, "store"), cls), nprocs=PP * DP,
                               start_method="fork")
        except mp.ProcessRaisedException as e:
            bug = "rebuilt parameter indices size is not same" in str(e)
            print("torch %s %s: %s" % (torch.__version__, cls.__name__,
                                       "BUG: the second step fails in DDP's forward" if bug else "failed otherwise"))
            print(str(e).strip().splitlines()[-1][:300])
            sys.exit(1 if bug else 2)
    print("torch %s %s: OK, %d steps" % (torch.__version__, cls.__name__, STEPS))
