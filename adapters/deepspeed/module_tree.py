"""paradiff's GPT (adapters/torch/model.py) with its parameters registered where ZeRO 3 gathers them:
on the module whose forward uses them, as registered parameters of that module (ZeRO 3 gathers a
module's own parameters around its forward and never those of a ParameterList, whose forward never
runs). The arithmetic is model.Gpt's, op for op; only where a parameter lives differs.

FlatGpt: every parameter on the root module (p0, p1, ... in model order): gathered for the whole
forward and backward, one module for ZeRO 3's hooks.
NestedGpt: the tree of a transformer written for DeepSpeed (the adapter's option
"adapter.module_tree": "nested"): the root keeps the embeddings, the final layer norm and the
untied head; `blocks` (a ModuleList) holds one Block per layer with its layer norms and the two
residual biases, and under it `attn` (q, kv and the projection's weight) and `mlp` (fc1 or gate
and up, fc2's weight). Each submodule's forward calls the root's method for its part, so ZeRO 3
gathers, prefetches and releases per submodule, traces the module order, and applies its
persistence threshold to real submodules.
"""
import torch

from model import Gpt

MODULE_TREE = "adapter.module_tree"


def register(module, names, tensors):
    """Registers a copy of tensors[n] for each of `names` on `module` as p0, p1, ... in that order;
    returns each name's k."""
    for k, n in enumerate(names):
        module.register_parameter("p%d" % k, torch.nn.Parameter(tensors[n].clone()))
    return {n: k for k, n in enumerate(names)}


class FlatGpt(Gpt):
    def __init__(self, model_cfg, names, tensors, exec_dtype):
        self.init_fields(model_cfg, names, exec_dtype)
        self.index = register(self, self.names, tensors)

    def named(self):
        return [(n, self.p(n)) for n in self.names]

    def p(self, name):
        return getattr(self, "p%d" % self.index[name])


class Part(torch.nn.Module):
    """A submodule holding the parameters `names` (p0, p1, ...); its forward is `run(x)`."""

    def __init__(self, names, tensors, run):
        super().__init__()
        self.__dict__["_run"] = run  # the root's arithmetic for this part: not a submodule
        self.index = register(self, names, tensors)

    def forward(self, x):
        return self._run(x)

    def get(self, name):
        return getattr(self, "p%d" % self.index[name])


def _part_of(name):
    """'root', or (layer, 'block' | 'attn' | 'mlp') for a parameter named `name`."""
    if not name.startswith("blocks."):
        return "root"
    _, i, rest = name.split(".", 2)
    if rest.startswith("attn.") and rest != "attn.proj.bias":  # the bias is added in Gpt.block
        return int(i), "attn"
    if rest.startswith("mlp.") and rest != "mlp.fc2.bias":
        return int(i), "mlp"
    return int(i), "block"


class NestedGpt(Gpt):
    def __init__(self, model_cfg, names, tensors, exec_dtype):
        self.init_fields(model_cfg, names, exec_dtype)
        self.where = {n: _part_of(n) for n in self.names}
        self.index = register(self, [n for n in self.names if self.where[n] == "root"], tensors)
        blocks = []
        for i in range(model_cfg["layers"]):
            prefix = "blocks.%d" % i

            def own(kind, i=i):
                return [n for n in self.names if self.where[n] == (i, kind)]

            block = Part(own("block"), tensors, lambda h, prefix=prefix: Gpt.block(self, prefix, h))
            block.attn = Part(own("attn"), tensors, lambda x, prefix=prefix: Gpt.attention(self, prefix, x))
            block.mlp = Part(own("mlp"), tensors, lambda x, prefix=prefix: Gpt.mlp(self, prefix, x))
            blocks.append(block)
        self.blocks = torch.nn.ModuleList(blocks)

    def p(self, name):
        w = self.where[name]
        if w == "root":
            return getattr(self, "p%d" % self.index[name])
        block = self.blocks[w[0]]
        return (block if w[1] == "block" else getattr(block, w[1])).get(name)

    def named(self):
        return [(n, self.p(n)) for n in self.names]

    def run_block(self, i, h):
        return self.blocks[i](h)

    def attention(self, b, x):  # from Gpt.block: through the block's attn submodule
        return self.blocks[int(b.split(".")[1])].attn(x)

    def mlp(self, b, x):
        return self.blocks[int(b.split(".")[1])].mlp(x)


def model_class(stage, tree):
    """The model class for a ZeRO stage and the option's value (None: the adapter's default, flat;
    at ZeRO 0-2 the plain Gpt, whose ParameterList every stage but 3 takes as it is)."""
    if tree == "nested":
        return NestedGpt
    if tree not in (None, "flat"):
        raise SystemExit("%s: %r is not one of flat, nested" % (MODULE_TREE, tree))
    return FlatGpt if stage == 3 else Gpt
