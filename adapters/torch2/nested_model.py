"""paradiff's GPT (adapters/torch/model.py) with each transformer block's parameters in a submodule of
its own, for FSDP2's nested wrapping (fully_shard per block, then the root). The arithmetic is
model.Gpt's, op for op: the attention, MLP, layer norm and casts are its methods; only where a
parameter lives differs (the root keeps the embeddings and the head, block i its "blocks.<i>.*").
"""
import torch

from model import Gpt


class Block(torch.nn.Module):
    def __init__(self, owner, i, names, tensors):
        super().__init__()
        self.__dict__["_owner"] = owner  # not a submodule: the owner holds the blocks
        self.prefix = "blocks.%d" % i
        self.index = {n: k for k, n in enumerate(names)}
        self.params = torch.nn.ParameterList([torch.nn.Parameter(tensors[n].clone()) for n in names])

    def forward(self, h):  # Gpt.forward's block body
        g, b = self._owner, self.prefix
        a = g.attention(b, g.layer_norm(b + ".ln1", h))
        h = h + (a + g.inp(g.p(b + ".attn.proj.bias")))
        f = g.mlp(b, g.layer_norm(b + ".ln2", h))
        h = h + (f + g.inp(g.p(b + ".mlp.fc2.bias")))
        return h


class NestedGpt(Gpt):
    def __init__(self, model_cfg, names, tensors, exec_dtype):
        torch.nn.Module.__init__(self)
        self.m = model_cfg
        self.names = list(names)
        self.exec = exec_dtype
        top = [n for n in self.names if not n.startswith("blocks.")]
        self.index = {n: k for k, n in enumerate(top)}
        self.params = torch.nn.ParameterList([torch.nn.Parameter(tensors[n].clone()) for n in top])
        self.blocks = torch.nn.ModuleList([
            Block(self, i, [n for n in self.names if n.startswith("blocks.%d." % i)], tensors)
            for i in range(model_cfg["layers"])])

    def p(self, name):
        if name.startswith("blocks."):
            blk = self.blocks[int(name.split(".")[1])]
            return blk.params[blk.index[name]]
        return self.params[self.index[name]]

    def named(self):
        return [(n, self.p(n)) for n in self.names]

    def forward(self, inputs, targets):  # Gpt.forward, the blocks run as submodules
        import torch.nn.functional as F
        m = self.m
        h = self.inp(self.p("embed.wte")).index_select(0, inputs.reshape(-1))
        h = h.view(inputs.size(0), inputs.size(1), m["hidden"])
        if m["position_embeddings"]:
            h = h + self.inp(self.p("embed.wpe")).unsqueeze(0)
        for i in range(m["layers"]):
            h = self.blocks[i](h)
        h = self.layer_norm("head.ln_f", h)
        w = "embed.wte" if m["tied_embeddings"] else "head.lm_head.weight"
        logits = self.linear(h, w).to(torch.float32).reshape(-1, m["vocab"])
        return F.nll_loss(torch.log_softmax(logits, -1), targets.reshape(-1))
