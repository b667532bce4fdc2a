#!/usr/bin/env python3
"""Writes the target files of the older torch releases (docs/TORCH2.md, "Releases").

Usage: python3 adapters/torch2/make_targets.py     (rewrites torch2_*-X.json here; idempotent)

The newest release's files (torch2_ddp.json, ...) are written by hand; each older release X gets a
copy of the ones it runs, whose command runs work/venv/torch-X's python, named NAME-X. A release is
a pinned file adapters/envs/torch-X.txt plus its X in RELEASES below, with the files it runs (what
it cannot run, with the reason, in docs/TORCH2.md "Releases").
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
NEWEST = "2.15.0"
# release -> the newest release's files it runs. 2.6.0: no FSDP2 on CPU (its all-gather records an
# event on a CPU stream, which has none), so neither torch2_tp_fsdp2; no torch2_tp_pp (every pp > 1
# run there is T2-4). 2.8.0: the oldest release here whose FSDP2 runs on CPU.
RELEASES = {
    "2.6.0": ["torch2_ddp", "torch2_fsdp1", "torch2_fsdp1_accum", "torch2_pp", "torch2_tp", "torch2_tp_sp"],
    "2.8.0": ["torch2_ddp", "torch2_fsdp1", "torch2_fsdp1_accum", "torch2_fsdp2", "torch2_hsdp", "torch2_hsdp_accum",
              "torch2_pp", "torch2_tp", "torch2_tp_sp", "torch2_tp_fsdp2", "torch2_tp_pp"],
}


def main():
    for release, bases in RELEASES.items():
        for base in bases:
            with open(os.path.join(HERE, base + ".json")) as f:
                t = json.load(f)
            t.pop("options", None)  # added after the older releases' recorded campaigns (docs/TORCH2.md)
            if base.startswith("torch2_tp"):  # tp checkpoints came after them too
                t["supports"].pop("checkpoint", None)
            t["name"] += "-" + release
            t["description"] = t["description"].replace("PyTorch " + NEWEST.rsplit(".", 1)[0],
                                                        "PyTorch " + release)
            t["command"] = [a.replace("torch-" + NEWEST, "torch-" + release) for a in t["command"]]
            path = os.path.join(HERE, "%s-%s.json" % (base, release))
            with open(path, "w") as f:
                json.dump(t, f, indent=2)
                f.write("\n")
            print(os.path.basename(path))


if __name__ == "__main__":
    main()
