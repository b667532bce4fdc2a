"""Which CPU kernels of paradiff's GPT round differently between two torch releases (docs/TORCH2.md,
"World-1 parity"). Run it under each torch, then compare:

  /usr/bin/python3 probe_kernels.py a.pt                       # Debian's torch 1.13 (paradiff's libtorch)
  work/venv/torch-2.15.0/bin/python probe_kernels.py b.pt
  /usr/bin/python3 probe_kernels.py --compare a.pt b.pt

Each entry is one op's forward or backward on fixed inputs (torch.Generator draws the same values
in both releases), oneDNN off and one thread, as the adapters run.
"""
import sys

import torch
import torch.nn.functional as F

if sys.argv[1] == "--compare":
    a, b = torch.load(sys.argv[2]), torch.load(sys.argv[3])
    for k in a:
        print("%-8s %s  %d of %d elements differ" % (k, "equal " if torch.equal(a[k], b[k]) else "DIFFER",
                                                    (a[k] != b[k]).sum().item(), a[k].numel()))
    sys.exit(0)
torch.backends.mkldnn.enabled = False
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
out = {}
def T(*s): return torch.randn(*s, generator=g)
# loss backward
logits = T(12, 23).requires_grad_()
tg = torch.randint(0, 23, (12,), generator=g)
F.nll_loss(torch.log_softmax(logits, -1), tg).backward(); out["nll_ls"] = logits.grad
# linear backward
x = T(2, 6, 16).requires_grad_(); w = T(32, 16).requires_grad_(); b = T(32).requires_grad_()
go = T(2, 6, 32)
F.linear(x, w, b).backward(go); out["lin_x"] = x.grad; out["lin_w"] = w.grad; out["lin_b"] = b.grad
# layer norm backward
x = T(2, 6, 16).requires_grad_(); w = T(16).requires_grad_(); b = T(16).requires_grad_()
F.layer_norm(x, (16,), w, b, 1e-5).backward(T(2, 6, 16)); out["ln_x"] = x.grad; out["ln_w"] = w.grad; out["ln_b"] = b.grad
# broadcast add backward
wpe = T(6, 16).requires_grad_(); h = T(2, 6, 16)
(h + wpe.unsqueeze(0)).backward(T(2, 6, 16)); out["bcast"] = wpe.grad
# embedding
wte = T(23, 16).requires_grad_(); idx = torch.randint(0, 23, (12,), generator=g)
wte.index_select(0, idx).backward(T(12, 16)); out["emb"] = wte.grad
# gelu, softmax, matmul
x = T(2, 6, 32).requires_grad_(); F.gelu(x).backward(T(2, 6, 32)); out["gelu"] = x.grad
x = T(2, 2, 6, 6).requires_grad_(); torch.softmax(x, -1).backward(T(2, 2, 6, 6)); out["softmax"] = x.grad
q = T(2, 2, 6, 8).requires_grad_(); k = T(2, 2, 8, 6).requires_grad_()
torch.matmul(q, k).backward(T(2, 2, 6, 6)); out["mm_q"] = q.grad; out["mm_k"] = k.grad
# forwards
x = T(2, 6, 32); out["gelu_fw"] = F.gelu(x)
x = T(2, 6, 16); out["ln_fw"] = F.layer_norm(x, (16,), T(16), T(16), 1e-5)
x = T(12, 23); out["lsm_fw"] = torch.log_softmax(x, -1)
torch.save(out, sys.argv[1])
