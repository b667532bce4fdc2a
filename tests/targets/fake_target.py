#!/usr/bin/python3
"""A broken external target for paradiff's tests (standard library only, no torch).

Usage: fake_target.py MODE RUN_DIR, MODE one of crash | hang | silent | shape | params | nan_loss.
"crash" exits 3, "hang" sleeps forever, "silent" exits 0 writing nothing, "shape" writes
observations whose first parameter has one extra row, "params" writes every parameter (zeros, the
right shapes) and nothing else, whatever run.json's "kinds" ask for, "nan_loss" writes every
parameter at its initial value and a NaN loss as Python's json writes it (the bare token NaN).

fake_target.py serve MODE: the same as a protocol-2 warm worker (adapters/torch/serve.py), and
two broken workers: "die" exits 5 on its first run dir without answering, "garbage" answers a
line that is not the protocol's.
"""
import json
import os
import struct
import sys
import time


def write_safetensors(path, tensors):  # tensors: name -> (shape, raw F32 bytes)
    header, off, body = {}, 0, b""
    for name, (shape, raw) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        body += raw
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def serve(mode):
    if mode == "die":
        sys.stdin.readline()
        sys.exit(5)
    if mode == "garbage":
        reply = os.fdopen(3, "w", buffering=1)
        for _ in sys.stdin:
            reply.write("hello\n")
        return
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "adapters", "torch"))
    import serve as protocol2
    protocol2.serve(lambda run_dir: run(mode, run_dir))


def main():
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        run(sys.argv[1], sys.argv[2])


def run(mode, run_dir):
    if mode == "crash":
        print("fake target: crashing on purpose", file=sys.stderr)
        sys.exit(3)
    if mode == "hang":
        while True:
            time.sleep(1)
    if mode == "silent":
        return
    run = json.load(open(os.path.join(run_dir, "run.json")))
    with open(os.path.join(run_dir, "init.safetensors"), "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        body = f.read()
    tensors = {}
    for name in run["params"] if mode in ("params", "nan_loss") else run["params"][:1]:
        shape = list(header[name]["shape"])
        if mode == "shape":
            shape[0] += 1
        count = 1
        for d in shape:
            count *= d
        begin, end = header[name]["data_offsets"]
        tensors["param:" + name] = (shape, body[begin:end] if mode == "nan_loss" else b"\0" * (4 * count))
    loss = float("nan") if mode == "nan_loss" else 1.0
    out = os.path.join(run_dir, "out")
    for r in range(run["world"]):
        for s in range(run["steps"]):
            write_safetensors(os.path.join(out, "rank%d.step%d.safetensors" % (r, s)), tensors)
        with open(os.path.join(out, "rank%d.json" % r), "w") as f:
            json.dump({"steps": [{"loss_sum": loss, "loss_count": 1, "grad_norm": 1.0}] * run["steps"]}, f)


if __name__ == "__main__":
    main()
