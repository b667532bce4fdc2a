"""paradiff's GPT (adapters/torch/model.py) with each transformer block's parameters in a submodule of
its own, for nested wrapping (FSDP2's fully_shard per block, then the root; FSDP1's wrapper per
block). The arithmetic is model.Gpt's, op for op: the attention, MLP, layer norm and casts are its
methods; only where a parameter lives differs (the root keeps the embeddings and the head, block i
its "blocks.<i>.*").
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

    def forward(self, h):
        return self._owner.block(self.prefix, h)


class NestedGpt(Gpt):
    def __init__(self, model_cfg, names, tensors, exec_dtype):
        self.init_fields(model_cfg, names, exec_dtype)
        top = [n for n in self.names if not n.startswith("blocks.")]
        self.index = {n: k for k, n in enumerate(top)}
        self.params = torch.nn.ParameterList([torch.nn.Parameter(tensors[n].clone()) for n in top])
        self.blocks = torch.nn.ModuleList([
            Block(self, i, [n for n in self.names if n.startswith("blocks.%d." % i)], tensors)
            for i in range(model_cfg["layers"])])
        # The blocks themselves, not submodules: FSDP1 puts a wrapper in each block's place in
        # self.blocks, and the wrapper's own `params` attribute hides the block's.
        self.__dict__["_own"] = list(self.blocks)

    def p(self, name):
        if name.startswith("blocks."):
            blk = self._own[int(name.split(".")[1])]
            return blk.params[blk.index[name]]
        return self.params[self.index[name]]

    def named(self):
        return [(n, self.p(n)) for n in self.names]

    def run_block(self, i, h):  # Gpt.forward runs the blocks as submodules
        return self.blocks[i](h)
