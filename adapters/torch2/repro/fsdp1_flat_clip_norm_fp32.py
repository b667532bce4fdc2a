"""FSDP1 with use_orig_params=False clips with a gradient norm that torch's CPU L2 norm kernel
computes with a float32 error that grows with the flat parameter's size (torch 2.15.0).

FullyShardedDataParallel.clip_grad_norm_ takes the 2-norm of each flat parameter's gradient with
torch.linalg.vector_norm(grad, 2, dtype=torch.float32) (torch/distributed/fsdp/_common_utils.py
_get_grad_norm); one flat parameter holds every parameter of its module, and the CPU kernel adds the
squares of a float32 tensor into one float32 accumulator per vector lane, so its relative error
grows with the element count (on normal random data: 1.3e-6 at 2e5 elements, 8.8e-5 at 4e6),
while torch's own pow(2).sum() (cascade summation) stays near 1e-8. Every clipped update then
moves by that relative error. With use_orig_params=True FSDP1 takes one norm per original
parameter, each far smaller (here 64 layers of 65,792 elements: 1.8e-6 flat, 2.6e-7 per
parameter).
Upstream: the CPU norm's accumulation, pytorch/pytorch issues 68326, 151761 and 169237.

Plain PyTorch, no paradiff. Found by paradiff's unsteered campaign on
adapters/torch2/torch2_fsdp1_flat.json (docs/TORCH2.md T2-18): a clipped SGD momentum
1.8e-5 off at 224,384 elements.
Usage: python fsdp1_flat_clip_norm_fp32.py [LAYERS]   (default 64 Linear(256, 256): a 4-million-element
flat parameter; exits 1 when its clip norm is off by more than 1e-6, relative)
"""
import os
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist


def main():
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    warnings.simplefilter("ignore")  # FSDP1's deprecation warning
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(layers)])
        print("torch", torch.__version__, "%d x Linear(256, 256), one rank" % layers)
        bad = False
        for orig in (False, True):
            torch.manual_seed(1)
            m = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(layers)])
            m.load_state_dict(model.state_dict())
            net = FSDP(m, sharding_strategy=ShardingStrategy.NO_SHARD, use_orig_params=orig,
                       device_id=torch.device("cpu"))
            net(torch.randn(8, 256)).pow(2).mean().backward()
            grads = [p.grad for p in net.parameters() if p.grad is not None]
            truth = torch.cat([g.double().reshape(-1) for g in grads]).norm().item()
            summed = torch.cat([g.reshape(-1) for g in grads]).pow(2).sum().sqrt().item()
            norm = net.clip_grad_norm_(float("inf")).item()
            err, sum_err = abs(norm / truth - 1), abs(summed / truth - 1)
            print("use_orig_params=%s: %d element(s); clip_grad_norm_ %.9g, float64 %.9g: relative "
                  "error %.2e (float32 pow(2).sum(): %.2e)"
                  % (orig, sum(g.numel() for g in grads), norm, truth, err, sum_err))
            bad = bad or (not orig and err > 1e-6)
        dist.destroy_process_group()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
