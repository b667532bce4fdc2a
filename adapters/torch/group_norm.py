"""The gradient norm of a model split over ranks (pipeline stages), as the adapters report it."""
import torch


def group_norm(grads, group=None):
    """torch's float32 total norm (get_total_norm) of this rank's `grads`, combined over `group`'s
    ranks (None: the default group) as the root of the sum of their squares."""
    local = torch.nn.utils.get_total_norm([g.float() for g in grads], 2.0) if grads else torch.zeros(())
    if hasattr(local, "full_tensor"):  # DTensor gradients: their norm over their mesh, replicated
        local = local.full_tensor()
    sq = (local.to(torch.float32) ** 2).reshape(1)
    torch.distributed.all_reduce(sq, group=group)
    return sq.sqrt()[0]
