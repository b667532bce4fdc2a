#!/usr/bin/env python3
"""No include points up the layers.

The libraries form layers, each including only its own and lower ones:
core < comm < sut < kernels < oracles < targets < fuzz < tools (tests/ and bench/ may include any).
An `#include "LAYER/..."` in a file of a lower layer is reported with its file and line, and the
test fails. Usage: layering_test.py SOURCE_DIR
"""
import re
import subprocess
import sys

LAYERS = ["core", "comm", "sut", "kernels", "oracles", "targets", "fuzz", "tools"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main(root):
    files = subprocess.check_output(["git", "-C", root, "ls-files", *LAYERS], text=True).split()
    bad, checked = 0, 0
    for f in files:
        if not f.endswith((".h", ".cpp", ".cu", ".cuh")):
            continue
        checked += 1
        own = LAYERS.index(f.split("/")[0])
        for n, line in enumerate(open(f"{root}/{f}", encoding="utf-8"), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in LAYERS and LAYERS.index(m.group(1)) > own:
                bad += 1
                print(f"FAIL: {f}:{n}: {line.strip()} points up ({f.split('/')[0]} < {m.group(1)})")
    print(f"{checked} files, {bad} includes pointing up")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
