"""Measures how this torch's gloo collectives and DDP / FSDP2 reduce gradients (docs/TORCH2.md,
"Reduction structure"): which rounding each candidate formula reproduces bit for bit.

Usage: probe_reduction.py [WORLD]   (default 3; plain PyTorch, CPU + gloo, forks WORLD ranks)

For each mechanism the probe gathers every rank's own input and recomputes the reduced value with
each candidate formula; the one matching on all elements is what the mechanism does. Candidates:
  sum_rank/dp      ((x0 + x1) + x2 ...) / dp          sum in rank order, then divide
  sum_rank*(1/dp)  ((x0 + x1) + x2 ...) * (1/dp)      sum in rank order, then multiply
  pre*(1/dp)       (x0 * (1/dp) + x1 * (1/dp)) + ...  each rank multiplies, then rank-order sum
  pre/dp           (x0 / dp + x1 / dp) + ...          each rank divides, then rank-order sum
and "ordered" says whether a plain SUM adds ranks in order (rank order) for this size.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

N = 1 << 15


def candidates(xs, dp):
    s = xs[0].clone()
    for x in xs[1:]:
        s = s + x
    p_mul = xs[0] * (1.0 / dp)
    p_div = xs[0] / dp
    for x in xs[1:]:
        p_mul = p_mul + x * (1.0 / dp)
        p_div = p_div + x / dp
    return {"sum_rank": s, "sum_rank/dp": s / dp, "sum_rank*(1/dp)": s * (1.0 / dp),
            "pre*(1/dp)": p_mul, "pre/dp": p_div}


def verdict(got, cands, names):
    out = []
    for n in names:
        eq = (got == cands[n]).float().mean().item()
        out.append("%s %.4f" % (n, eq))
    return ", ".join(out)


def gather(x, world):
    xs = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(xs, x)
    return xs


def run(rank, world, store):
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = False
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    g = torch.Generator().manual_seed(100 + rank)
    names = ["sum_rank/dp", "sum_rank*(1/dp)", "pre*(1/dp)", "pre/dp"]
    lines = []
    # all_reduce SUM of random floats: are ranks added in order?
    x = torch.randn(world * N, generator=g) * torch.exp(torch.randn(world * N, generator=g) * 3)
    y = x.clone()
    dist.all_reduce(y)
    lines.append("all_reduce SUM: ordered %.4f" % (y == candidates(gather(x, world), world)["sum_rank"]).float().mean().item())
    # Integer-valued inputs below 2^20: every sum is exact in any order, so only the averaging
    # (divide / multiply, before / after the sum) decides the rounding.
    x = torch.randint(-(1 << 20), 1 << 20, (world * N,), generator=g).float()
    xs = gather(x, world)
    c = candidates(xs, world)
    for op in ("AVG",):
        try:
            y = x.clone()
            dist.all_reduce(y, op=getattr(dist.ReduceOp, op))
            lines.append("all_reduce %s: %s" % (op, verdict(y, c, names)))
        except Exception as e:  # noqa: BLE001
            lines.append("all_reduce %s: unsupported (%s)" % (op, str(e).splitlines()[0]))
    chunk = slice(rank * N, (rank + 1) * N)
    cc = {k: v[chunk] for k, v in c.items()}
    for op in ("SUM", "AVG"):
        out = torch.empty(N)
        try:
            dist.reduce_scatter_tensor(out, x.clone(), op=getattr(dist.ReduceOp, op))
            if op == "SUM":
                lines.append("reduce_scatter_tensor SUM: ordered %.4f" % (out == cc["sum_rank"]).float().mean().item())
            else:
                lines.append("reduce_scatter_tensor AVG: %s" % verdict(out, cc, names))
        except Exception as e:  # noqa: BLE001
            lines.append("reduce_scatter_tensor %s: unsupported (%s)" % (op, str(e).splitlines()[0]))
    # DDP: one linear layer under a linear loss with integer inputs, so that every gradient is an
    # exact integer and only the averaging decides the rounding.
    from torch.nn.parallel import DistributedDataParallel as DDP
    for bucket_view in (False, True):
        torch.manual_seed(0)
        lin = torch.nn.Linear(64, 64, bias=False)
        net = DDP(lin, gradient_as_bucket_view=bucket_view)
        inp = torch.randint(-64, 64, (8, 64), generator=g).float()
        tgt = torch.randint(-64, 64, (8, 64), generator=g).float()
        for it in range(2):  # the second iteration: grads already alias the bucket (bucket view)
            lin.weight.grad = None if not bucket_view else lin.weight.grad
            if lin.weight.grad is not None:
                lin.weight.grad.zero_()
            with net.no_sync():
                (lin(inp) * tgt).sum().backward()
            local = lin.weight.grad.detach().clone()
            lin.weight.grad.zero_() if bucket_view else None
            lin.weight.grad = None if not bucket_view else lin.weight.grad
            (net(inp) * tgt).sum().backward()
            got = lin.weight.grad.detach().clone()
            ls = gather(local, world)
            lines.append("DDP bucket_view=%s iteration %d: %s" % (bucket_view, it, verdict(got, candidates(ls, world), names)))
    # FSDP2 (fully_shard, fp32): the sharded gradient against the ranks' own full gradients.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    lin = torch.nn.Linear(48, 6 * world, bias=False)
    ref = torch.nn.Linear(48, 6 * world, bias=False)
    ref.load_state_dict(lin.state_dict())
    fully_shard(lin, mesh=mesh)
    inp = torch.randint(-64, 64, (4, 48), generator=g).float()
    tgt = torch.randint(-64, 64, (4, 6 * world), generator=g).float()
    (ref(inp) * tgt).sum().backward()
    (lin(inp) * tgt).sum().backward()
    local = ref.weight.grad.detach().reshape(-1).clone()
    mine = lin.weight.grad.to_local().reshape(-1)
    cf = {k: v.view(world, -1)[rank] for k, v in candidates(gather(local, world), world).items()}
    lines.append("FSDP2 fully_shard fp32: %s" % verdict(mine, cf, names))
    if rank == 0:
        print("torch %s, world %d" % (torch.__version__, world))
        print("\n".join(lines))
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    d = tempfile.mkdtemp()
    mp.start_processes(run, args=(world, os.path.join(d, "store")), nprocs=world, start_method="fork")
