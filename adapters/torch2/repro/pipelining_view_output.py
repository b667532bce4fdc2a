"""torch.distributed.pipelining: a last stage whose output is a view (a reshape, a view of the
logits) fails in backward: "RuntimeError: Can't detach views in-place. Use detach() instead"
(torch 2.6.0, CPU, gloo, any schedule: backward_one_chunk detaches the last stage's outputs in
place to free their graph). Passes on torch 2.15.0.

Plain PyTorch, no paradiff. Found by paradiff's unsteered campaign on
adapters/torch2/torch2_pp-2.6.0.json (docs/TORCH2.md, finding T2-4; docs/FINDINGS.md), minimized
to pp 2, one layer per stage, hidden 1, one micro-batch. Upstream: pytorch/pytorch issue 142229,
fixed by PR 143589 (the outputs returned to the user are detached out of place).

Usage: python pipelining_view_output.py   (exits 1 when the bug is present)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class First(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Last(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, h):
        return self.lin(h).reshape(-1, 3)  # a view of the logits, as a language model's head returns


def run(rank, store, failed):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    torch.manual_seed(0)
    stage = PipelineStage(First() if rank == 0 else Last(), rank, 2, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=1,
                             loss_fn=lambda out, y: torch.nn.functional.cross_entropy(out, y))
    try:
        if rank == 0:
            schedule.step(torch.randn(2, 1, 4))
        else:
            schedule.step(target=torch.tensor([0, 2]))
    except RuntimeError as e:
        print("rank %d: %s" % (rank, e))
        failed.value = 1
    dist.destroy_process_group()


def main():
    failed = mp.get_context("fork").Value("i", 0)
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(run, args=(os.path.join(d, "store"), failed), nprocs=2, start_method="fork")
    print("torch %s: %s" % (torch.__version__, "BUG: the last stage's view output broke backward"
                            if failed.value else "ok"))
    sys.exit(1 if failed.value else 0)


if __name__ == "__main__":
    main()
