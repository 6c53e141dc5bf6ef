#!/usr/bin/python3
"""Loads a Medusa head folder (config.json + medusa_lm_head.safetensors) into the module structure
of FasterDecoding/Medusa's medusa_model.py (an nn.ModuleList of heads, each
nn.Sequential(ResBlock x medusa_num_layers, nn.Linear(hidden, vocab, bias=False)), ResBlock =
Linear(hidden, hidden) + SiLU with a residual; the published checkpoints have one ResBlock, and
Medusa's code repeats one block object when asked for more, here they are distinct) with
load_state_dict(strict=True), and
prints each head's output for a fixed input, so a test can compare them with Peregrine's.

Usage: tools/medusa_layout_check.py DIR
Prints one line per head: the argmax token of the head's logits for the input x = ones(hidden) / 4.
Exits non-zero when the file does not fit the structure.
"""
import json
import sys

import torch
from torch import nn

from safetensors_f32 import read_safetensors


class ResBlock(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        self.act = nn.SiLU()

    def forward(self, x):
        return x + self.act(self.linear(x))


def main():
    folder = sys.argv[1]
    config = json.load(open(f"{folder}/config.json"))
    state = read_safetensors(f"{folder}/medusa_lm_head.safetensors")
    heads, layers = config["medusa_num_heads"], config["medusa_num_layers"]
    vocab, hidden = state[f"0.{layers}.weight"].shape
    medusa_head = nn.ModuleList([nn.Sequential(*[ResBlock(hidden) for _ in range(layers)], nn.Linear(hidden, vocab, bias=False))
                                 for _ in range(heads)])
    medusa_head.load_state_dict(state, strict=True)
    x = torch.ones(hidden) / 4
    with torch.no_grad():
        for k in range(heads):
            print(int(torch.argmax(medusa_head[k](x))))


if __name__ == "__main__":
    main()
