#!/usr/bin/python3
"""Loads an EAGLE-1 head folder (config.json + model.safetensors) into a PyTorch module with the
parameter names and structure of SafeAILab/EAGLE's eagle/model/cnets.py `Model` (EAGLE-1
release): embed_tokens (nn.Embedding), fc = nn.Linear(2 * hidden, hidden, bias=config["bias"]),
layers = nn.ModuleList([one LlamaDecoderLayer of index 0]) whose layer has self_attn
(q_proj, k_proj, v_proj, o_proj, no biases), mlp (gate_proj, up_proj, down_proj, SiLU) and
post_attention_layernorm but no input_layernorm, and no final norm; written here after that file,
not copied. load_state_dict(strict=True): every tensor of the folder must be a parameter of the
module and every parameter must be in the folder.

Then runs it as cnets.py's forward does on the tokens and features of INPUTS (JSON: "tokens"
x_0..x_T, "features" [T][hidden] f_0..f_{T-1}): row i = fc(cat(embed(x_{i+1}), f_i)), causal
attention with Hugging Face's rotate_half RoPE (base rope_theta) at position i, residual,
post_attention_layernorm, SwiGLU, residual.

Usage: tools/eagle_layout_check.py DIR INPUTS
Prints T lines, row i holding the hidden values of the predicted feature f^_{i+1} ("%.9g").
Exits non-zero when the folder does not fit the structure.
"""
import json
import math
import sys

import torch
from torch import nn

from safetensors_f32 import read_safetensors


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        self.head_dim = c.get("head_dim", c["hidden_size"] // self.heads)
        self.theta = c.get("rope_theta", 10000.0)
        hidden = c["hidden_size"]
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)

    def rope(self, x):  # x [heads, T, head_dim]; rotate_half pairing (i, i + head_dim / 2)
        T = x.shape[1]
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos().float(), emb.sin().float()
        half = self.head_dim // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, h):  # h [T, hidden]
        T = h.shape[0]
        q = self.rope(self.q_proj(h).view(T, self.heads, self.head_dim).transpose(0, 1))
        k = self.rope(self.k_proj(h).view(T, self.kv_heads, self.head_dim).transpose(0, 1))
        v = self.v_proj(h).view(T, self.kv_heads, self.head_dim).transpose(0, 1)
        group = self.heads // self.kv_heads  # query head j reads K/V head j // group (repeat_kv)
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
        scores = q @ k.transpose(1, 2) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        out = (torch.softmax(scores, -1) @ v).transpose(0, 1).reshape(T, self.heads * self.head_dim)
        return self.o_proj(out)


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):  # index 0: no input_layernorm
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = Mlp(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c.get("rms_norm_eps", 1e-6))

    def forward(self, h):
        h = h + self.self_attn(h)
        return h + self.mlp(self.post_attention_layernorm(h))


class EagleModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([DecoderLayer(c)])
        self.fc = nn.Linear(2 * c["hidden_size"], c["hidden_size"], bias=c.get("bias", True))

    def forward(self, features, next_tokens):
        h = self.fc(torch.cat((self.embed_tokens(next_tokens), features), dim=-1))
        for layer in self.layers:
            h = layer(h)
        return h


def main():
    folder, inputs = sys.argv[1], json.load(open(sys.argv[2]))
    config = json.load(open(f"{folder}/config.json"))
    assert config["num_hidden_layers"] == 1
    model = EagleModel(config)
    model.load_state_dict(read_safetensors(f"{folder}/model.safetensors"), strict=True)
    tokens = torch.tensor(inputs["tokens"], dtype=torch.long)
    features = torch.tensor(inputs["features"], dtype=torch.float32)
    with torch.no_grad():
        predicted = model(features, tokens[1:])
    for row in predicted:
        print(" ".join("%.9g" % v for v in row.tolist()))


if __name__ == "__main__":
    main()
