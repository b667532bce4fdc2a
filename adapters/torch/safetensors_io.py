"""Safetensors read / write with the standard library and torch only (no pip package).

Format: 8-byte little-endian header length N, a JSON header {name: {dtype, shape, data_offsets}},
optional "__metadata__": {str: str}, then the raw little-endian bytes (docs/TARGETS.md).
"""
import json
import struct

import torch

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def read(path):
    """Returns ({name: tensor}, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dtype = _DTYPES[e["dtype"]]
        raw = bytearray(body[begin:end])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"]).clone()
    return out, meta


def write(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    chunks, offset = [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
    import os
    os.replace(tmp, path)
