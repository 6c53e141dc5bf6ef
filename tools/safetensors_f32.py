"""Reads a safetensors file of F32 tensors into torch tensors, with nothing but the standard
library and numpy (the spec: huggingface/safetensors README, "Format"). Shared by the layout
checks (tools/medusa_layout_check.py, tools/eagle_layout_check.py)."""
import json
import struct

import numpy as np
import torch


def read_safetensors(path):
    """{name: torch.Tensor} of every tensor in `path`; asserts each is F32."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{name}: {info['dtype']}"
        begin, end = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[begin:end], dtype=np.float32).copy().reshape(info["shape"]))
    return out
