"""optimizer.schedule for the torch adapters (docs/CONFIG.md, "Learning-rate schedules").

ratio(s, applied): the share of the peak rate for the update that follows `applied` applied
updates; scheduler(torch, opt, optimizer_cfg): a LambdaLR whose epoch is that count (step it after
each update the optimizer applied), or None for a constant rate.
"""
import math


def ratio(s, applied):
    kind = s["kind"]
    if kind == "constant":
        return 1.0
    i, w, t = applied - 1, s["warmup_steps"], s.get("total_steps", 0)
    if i < 0:
        return 0.0
    if i < w:
        return i / w
    if kind == "warmup_linear":
        return max(0.0, (t - i) / max(1.0, t - w))
    if kind == "warmup_cosine":
        progress = min(1.0, (i - w + 1) / max(1.0, t - w))
        return max(0.0, s["min_ratio"] + (1.0 - s["min_ratio"]) * (1 + math.cos(math.pi * progress)) / 2)
    return 1.0


def scheduler(torch, opt, optimizer_cfg):
    s = optimizer_cfg.get("schedule")
    if s is None or s["kind"] == "constant":
        return None
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda applied: ratio(s, applied))
