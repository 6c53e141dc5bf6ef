#!/usr/bin/python3
"""Write small seeded random-weight Llama models in every supported format, plus oracle logits.

    make_test_models.py --out DIR

Writes llama2.c .bin (legacy v0), GGUF (v3 and one v2; F32/F16/BF16/Q8_0/Q4_0) and Hugging Face
folders (safetensors F32/BF16, and F16 in 2 shards) into DIR, copies tok512.bin beside the .bin
files, and writes DIR/manifest.json, a list of entries
    {"name", "format", "model", "tokens", "logits", "vocab"} (+ "lora": an adapter applied unmerged)
where "model" is relative to DIR (absolute for the real models in ../shared: stories260K .bin/.gguf, aidreams260K .bin) and "logits" names
a raw little-endian float32 [len(tokens), vocab] file in DIR computed by reference.forward,
with the inputs of Q8_0/Q4_0 matmuls rounded to 8-bit blocks (act_quant, as the engine does).

Weights are generated in the Hugging Face layout; the GGUF and llama2.c writers permute Q/K
rows into interleaved RoPE order exactly as convert_hf_to_gguf.py / llama2.c export.py do.
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402
from reference import GGML_BF16, GGML_F16, GGML_F32, GGML_Q4_0, GGML_Q8_0, QK  # noqa: E402

# The read-only data folder: $PEREGRINE_SHARED_DIR, else ../shared beside the repository.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("PEREGRINE_SHARED_DIR", os.path.join(REPO, "..", "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K")
AIDREAMS = os.path.join(SHARED, "models", "aidreams260K", "aidreams260K.bin")
DIM, N_HEADS, VOCAB, SEQ_LEN = 64, 4, 512, 128
# "Once upon a time" + stories260K's greedy continuation (llama2.c tok512 ids).
STORY_TOKENS = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                338, 401, 396, 267, 337, 410, 408, 419]
# Ids spread over the whole 512 vocab, edges and repeats included.
RANDOM_TOKENS = [1, 403, 407, 261, 378, 0, 511, 2, 255, 256, 17, 17, 499, 300, 128, 64, 450,
                 33, 222, 377, 19, 508, 403, 3]


@dataclass(frozen=True)
class Variant:
    """One synthetic model. fmt: llama2c | gguf | hf; dtype: f32 f16 bf16 q8_0 q4_0."""
    name: str
    fmt: str
    dtype: str
    n_layers: int
    n_kv_heads: int
    hidden_dim: int
    tied: bool
    rope_theta: float
    rms_eps: float
    seed: int
    gguf_version: int = 3
    shards: int = 1
    rope_scaling: tuple = ()  # config.json rope_scaling as (key, value) pairs; () = none
    arch: str = "llama"       # llama, qwen2 (Q/K/V biases), qwen3 (Q/K norms), phi3, gemma2
    head_dim: int = 0         # 0 = DIM // N_HEADS (Qwen3 sets it apart: q_dim != dim)
    experts: tuple = ()       # Mixture-of-Experts (n_experts, top_k, expert_ffn, shared_ffn); () = dense
    window: int = 0           # sliding window (llama: Mistral-style on every layer); 0 = none
    pre_attn_scalar: int = 0  # Gemma 2 query_pre_attn_scalar (0: head_dim)
    softcaps: tuple = ()      # Gemma 2 (attn_logit_softcapping, final_logit_softcapping)
    gguf_defaults: bool = False  # GGUF without the soft-cap / scale keys (llama.cpp's defaults)
    mistral: bool = False     # HF config as MistralForCausalLM / model_type mistral
    original_context: int = 0  # Phi-3's top-level original_max_position_embeddings (GGUF:
                               # rope.scaling.original_context_length); 0 = none


# RoPE scaling of the test shape (head_dim 16, theta 1e4: pair wavelengths 6.3, 20, 63, 199, ...
# positions) with a pre-training context of 64, so the llama3 rule keeps pair 0, blends pairs 1
# and 2 and divides the rest by the factor.
LLAMA3_ROPE = (("rope_type", "llama3"), ("factor", 8.0), ("low_freq_factor", 1.0),
               ("high_freq_factor", 4.0), ("original_max_position_embeddings", 64))
LINEAR_ROPE = (("rope_type", "linear"), ("factor", 4.0))
# YaRN over the same pre-training context of 64: pairs 0-2 ramp between kept and interpolated
# frequencies, the rest are divided by the factor; cos/sin scaled by 0.1 ln 4 + 1 (GGUF, default)
# or by an explicit attention_factor with non-default betas (HF).
YARN_ROPE = (("rope_type", "yarn"), ("factor", 4.0), ("original_max_position_embeddings", 64))
YARN_ROPE_EXPLICIT = YARN_ROPE + (("beta_fast", 16.0), ("beta_slow", 2.0), ("attention_factor", 1.25))
# Scalings that follow the sequence length, over a pre-training context of 16 the 24 test tokens
# cross (a prefill of them and a token-by-token decode differ): LongRoPE as Phi-3 128k writes it
# (original_max_position_embeddings at the top level, Variant.original_context; factor 128 / 16,
# so cos/sin scale by sqrt(1 + ln 8 / ln 16)), per-pair divisors for head_dim 16; dynamic NTK
# with its original context inside rope_scaling.
LONG_CONTEXT = 16
LONGROPE = (("type", "longrope"),
            ("short_factor", (1.0, 1.02, 1.1, 1.25, 1.5, 1.8, 2.2, 2.6)),
            ("long_factor", (1.0, 1.4, 2.3, 3.6, 5.2, 6.8, 7.7, 8.0)))
DYNAMIC_ROPE = (("rope_type", "dynamic"), ("factor", 4.0), ("original_max_position_embeddings", LONG_CONTEXT))


VARIANTS = [
    Variant("llama2c-mha-tied", "llama2c", "f32", 2, 4, 172, True, 1e4, 1e-5, 101),
    Variant("llama2c-gqa-untied", "llama2c", "f32", 3, 2, 160, False, 1e4, 1e-5, 102),
    Variant("gguf-f32-gqa", "gguf", "f32", 2, 2, 172, False, 1e4, 1e-5, 201),
    Variant("gguf-f16-gqa", "gguf", "f16", 3, 1, 172, True, 5e5, 1e-6, 202),
    Variant("gguf-bf16-gqa", "gguf", "bf16", 2, 2, 160, False, 5e5, 1e-5, 203),
    Variant("gguf-q8_0-gqa", "gguf", "q8_0", 2, 2, 160, False, 1e4, 1e-5, 204),
    Variant("gguf-q4_0-gqa", "gguf", "q4_0", 2, 2, 172, True, 5e5, 1e-5, 205),
    Variant("gguf-v2-f16-mha", "gguf", "f16", 2, 4, 172, False, 1e4, 1e-5, 206, gguf_version=2),
    Variant("hf-f32-gqa", "hf", "f32", 2, 2, 172, False, 1e4, 1e-5, 301),
    Variant("hf-bf16-gqa", "hf", "bf16", 2, 2, 160, True, 5e5, 1e-6, 302),
    Variant("hf-f16-sharded", "hf", "f16", 3, 2, 172, False, 1e6, 1e-5, 303, shards=2),
    Variant("gguf-f32-llama3-rope", "gguf", "f32", 2, 2, 172, True, 1e4, 1e-5, 207, rope_scaling=LLAMA3_ROPE),
    Variant("gguf-f16-linear-rope", "gguf", "f16", 2, 2, 160, False, 1e4, 1e-5, 208, rope_scaling=LINEAR_ROPE),
    Variant("hf-f32-llama3-rope", "hf", "f32", 2, 2, 172, True, 1e4, 1e-5, 304, rope_scaling=LLAMA3_ROPE),
    Variant("hf-bf16-linear-rope", "hf", "bf16", 2, 2, 160, False, 1e4, 1e-5, 305, rope_scaling=LINEAR_ROPE),
    Variant("gguf-f32-qwen2-yarn", "gguf", "f32", 2, 2, 172, True, 1e4, 1e-6, 229, arch="qwen2", rope_scaling=YARN_ROPE),
    Variant("hf-f32-qwen2-yarn", "hf", "f32", 2, 2, 172, False, 1e4, 1e-6, 329, arch="qwen2", rope_scaling=YARN_ROPE_EXPLICIT),
    Variant("hf-f32-phi3-longrope", "hf", "f32", 2, 2, 172, False, 1e4, 1e-5, 330, arch="phi3", rope_scaling=LONGROPE,
            original_context=LONG_CONTEXT),
    Variant("gguf-f32-phi3-longrope", "gguf", "f32", 2, 4, 172, True, 1e4, 1e-5, 230, arch="phi3", rope_scaling=LONGROPE,
            original_context=LONG_CONTEXT),
    Variant("hf-f32-dynamic-rope", "hf", "f32", 2, 2, 160, False, 1e4, 1e-5, 331, rope_scaling=DYNAMIC_ROPE),
    Variant("gguf-f32-qwen2", "gguf", "f32", 2, 4, 172, True, 1e6, 1e-6, 209, arch="qwen2"),  # MHA: scale folding
    Variant("gguf-q8_0-qwen2", "gguf", "q8_0", 2, 1, 160, False, 1e6, 1e-6, 210, arch="qwen2"),
    Variant("gguf-f32-qwen3", "gguf", "f32", 2, 2, 172, True, 1e6, 1e-6, 211, arch="qwen3", head_dim=32),
    Variant("hf-f32-qwen2", "hf", "f32", 2, 2, 172, False, 1e6, 1e-6, 306, arch="qwen2"),
    Variant("hf-bf16-qwen3", "hf", "bf16", 2, 1, 160, True, 1e6, 1e-6, 307, arch="qwen3", head_dim=32),
    Variant("gguf-f32-phi3", "gguf", "f32", 2, 4, 172, False, 1e4, 1e-5, 212, arch="phi3"),
    Variant("gguf-q8_0-phi3", "gguf", "q8_0", 2, 2, 160, True, 1e4, 1e-5, 213, arch="phi3"),
    Variant("hf-f32-phi3", "hf", "f32", 2, 4, 172, False, 1e4, 1e-5, 308, arch="phi3"),
    # Mixture-of-Experts: Mixtral (the llama architecture with experts), Qwen2-MoE (+ shared
    # expert), OLMoE (whole-projection Q/K norms); expert widths multiples of 32 for Q8_0.
    Variant("gguf-f32-mixtral", "gguf", "f32", 2, 2, 96, False, 1e6, 1e-5, 224, experts=(4, 2, 96, 0)),
    Variant("gguf-q8_0-mixtral", "gguf", "q8_0", 2, 2, 64, True, 1e6, 1e-5, 225, experts=(4, 2, 64, 0)),
    Variant("hf-f32-mixtral", "hf", "f32", 2, 2, 96, False, 1e6, 1e-5, 319, experts=(4, 2, 96, 0)),
    Variant("gguf-f32-qwen2moe", "gguf", "f32", 2, 2, 172, False, 1e6, 1e-6, 226, arch="qwen2moe", experts=(6, 3, 32, 96)),
    Variant("gguf-q8_0-qwen2moe", "gguf", "q8_0", 2, 4, 160, True, 1e6, 1e-6, 227, arch="qwen2moe", experts=(6, 3, 32, 64)),
    Variant("hf-bf16-qwen2moe", "hf", "bf16", 2, 2, 172, False, 1e6, 1e-6, 320, arch="qwen2moe", experts=(6, 3, 32, 96)),
    Variant("gguf-f32-olmoe", "gguf", "f32", 2, 4, 64, False, 1e4, 1e-5, 228, arch="olmoe", experts=(8, 2, 64, 0)),
    Variant("hf-f32-olmoe", "hf", "f32", 2, 4, 64, False, 1e4, 1e-5, 321, arch="olmoe", experts=(8, 2, 64, 0)),
    # Mistral: a sliding window of 5 positions on every layer, well under the 24 test tokens.
    Variant("gguf-f32-mistral-swa", "gguf", "f32", 2, 2, 172, False, 1e4, 1e-5, 214, window=5),
    Variant("hf-f32-mistral-swa", "hf", "f32", 2, 2, 172, True, 1e6, 1e-5, 309, window=5, mistral=True),
    # Gemma 2: head_dim 32 (q_dim 128 != dim 64), local layers 0, 2 with a window of 6, caps that
    # bite on these scores (the q8_0 file keeps llama.cpp's 50 / 30 defaults and the head_dim
    # scale by omitting the keys), query_pre_attn_scalar apart from head_dim.
    Variant("gguf-f32-gemma2", "gguf", "f32", 3, 2, 160, True, 1e4, 1e-6, 215, arch="gemma2", head_dim=32,
            window=6, pre_attn_scalar=24, softcaps=(2.0, 3.0)),
    Variant("gguf-q8_0-gemma2", "gguf", "q8_0", 2, 1, 160, True, 1e4, 1e-6, 216, arch="gemma2", head_dim=32,
            window=6, softcaps=(50.0, 30.0), gguf_defaults=True),
    Variant("hf-f32-gemma2", "hf", "f32", 3, 2, 160, True, 1e4, 1e-6, 310, arch="gemma2", head_dim=32,
            window=6, pre_attn_scalar=24, softcaps=(2.0, 3.0)),
    Variant("hf-bf16-gemma2", "hf", "bf16", 2, 1, 160, False, 1e4, 1e-6, 311, arch="gemma2", head_dim=32,
            window=6, pre_attn_scalar=32, softcaps=(1.5, 5.0)),
]


def variant_config(v):
    """reference.LlamaConfig of a Variant (dim 64, 4 heads of 16, vocab 512, context 128)."""
    n_experts, top_k, expert_ffn, shared_ffn = v.experts or (0, 0, 0, 0)
    caps = v.softcaps or (0.0, 0.0)
    return reference.LlamaConfig(DIM, v.hidden_dim, v.n_layers, N_HEADS, v.n_kv_heads,
                                 v.head_dim or DIM // N_HEADS, VOCAB, v.rope_theta, v.rms_eps, SEQ_LEN,
                                 arch=v.arch, sliding_window=v.window,
                                 query_pre_attn_scalar=float(v.pre_attn_scalar or (v.head_dim if v.arch == "gemma2" else 0)),
                                 attn_softcap=caps[0], final_softcap=caps[1],
                                 n_experts=n_experts, n_experts_used=top_k, expert_ffn=expert_ffn,
                                 shared_expert_ffn=shared_ffn, norm_topk_prob=v.arch == "llama")


def random_weights(cfg, tied, seed):
    """Seeded float32 HF-layout weights: norms 1 + N(0, 0.1); Linear [out, in] ~ N(0, 1/in) so
    blocks move the residual stream as much as the embedding (attention changes logits by ~1
    std; tied models do not just echo the input token); embeddings / lm_head N(0, 0.3) so
    logits have std ~2.4. Tied models hold lm_head.weight as the same array as the embedding."""
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in reference.expected_shapes(cfg).items():
        if name == "lm_head.weight" and tied:
            continue
        if name.endswith(".bias"):
            std, mean = 0.3, 0.0
        elif len(shape) == 1:  # Gemma 2 norms scale by 1 + w
            std, mean = 0.1, 0.0 if cfg.arch == "gemma2" else 1.0
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            std, mean = 0.3, 0.0
        else:
            std, mean = 1.0 / math.sqrt(shape[1]), 0.0
        w[name] = (mean + std * rng.standard_normal(shape)).astype(np.float32)
    if tied:
        w["lm_head.weight"] = w["model.embed_tokens.weight"]
    return w


def permute_qk(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: half-split -> interleaved RoPE row order.
    w: float32 [n_head * head_dim, dim] -> same shape."""
    rows, dim = w.shape
    return np.ascontiguousarray(
        w.reshape(n_head, 2, rows // n_head // 2, dim).swapaxes(1, 2).reshape(rows, dim))


# --------------------------------------------------------------------------------------------
# Element encodings


def f32_to_bf16_bits(x):
    """float32 array -> uint16 bfloat16 bits, round-to-nearest-even (finite inputs)."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def quantize_q8_0(x):
    """float32 [..., k*32] -> Q8_0 bytes.
    As ggml quantize_row_q8_0_ref: d = amax/127, q = round(x/d), d stored as f16."""
    x = x.reshape(-1, QK).astype(np.float32)
    d = np.abs(x).max(axis=1) / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    blocks = np.empty(len(x), dtype=reference.Q8_0_BLOCK)
    blocks["d"] = d.astype(np.float16)
    blocks["q"] = np.round(x * inv[:, None]).astype(np.int8)
    return blocks.tobytes()


def quantize_q4_0(x):
    """float32 [..., k*32] -> Q4_0 bytes.
    As ggml quantize_row_q4_0_ref: d = max/-8 where max is the signed value of largest
    magnitude, q = min(15, trunc(x/d + 8.5)); byte j = q[j] | q[j+16] << 4; d stored as f16."""
    x = x.reshape(-1, QK).astype(np.float32)
    signed_max = np.take_along_axis(x, np.abs(x).argmax(axis=1)[:, None], axis=1)[:, 0]
    d = signed_max / -8.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, np.trunc(x * inv[:, None] + 8.5)).astype(np.uint8)
    blocks = np.empty(len(x), dtype=reference.Q4_0_BLOCK)
    blocks["d"] = d.astype(np.float16)
    blocks["qs"] = q[:, :QK // 2] | (q[:, QK // 2:] << 4)
    return blocks.tobytes()


GGML_ENCODERS = {
    GGML_F32: lambda x: x.astype("<f4").tobytes(),
    GGML_F16: lambda x: x.astype("<f2").tobytes(),
    GGML_BF16: lambda x: f32_to_bf16_bits(x).tobytes(),
    GGML_Q8_0: quantize_q8_0,
    GGML_Q4_0: quantize_q4_0,
}
GGML_TYPES = {"f32": GGML_F32, "f16": GGML_F16, "bf16": GGML_BF16, "q8_0": GGML_Q8_0,
              "q4_0": GGML_Q4_0}
# llama_ftype values written to general.file_type.
GGUF_FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "bf16": 32}


# --------------------------------------------------------------------------------------------
# llama2.c legacy v0


def write_llama2c(path, cfg, w, tied):
    """Write a llama2.c legacy v0 checkpoint (theta 10000 only); vocab_size < 0 when untied."""
    assert cfg.rope_theta == 1e4, "llama2.c checkpoints have a fixed RoPE theta of 10000"
    n_heads = {"self_attn.q_proj": cfg.n_heads, "self_attn.k_proj": cfg.n_kv_heads}
    sections = [w["model.embed_tokens.weight"]]
    for name in ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                 "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj",
                 "mlp.down_proj", "mlp.up_proj"):
        for i in range(cfg.n_layers):
            t = w[f"model.layers.{i}.{name}.weight"]
            sections.append(permute_qk(t, n_heads[name]) if name in n_heads else t)
    hs = cfg.head_dim
    freqs = 1.0 / (10000.0 ** (np.arange(0, hs, 2, dtype=np.float32) / hs))
    angles = np.outer(np.arange(cfg.max_seq_len, dtype=np.float32), freqs)
    sections += [w["model.norm.weight"], np.cos(angles), np.sin(angles)]
    if not tied:
        sections.append(w["lm_head.weight"])
    header = (cfg.dim, cfg.hidden_dim, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads,
              cfg.vocab_size if tied else -cfg.vocab_size, cfg.max_seq_len)
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", *header))
        for s in sections:
            f.write(s.astype("<f4").tobytes())


# --------------------------------------------------------------------------------------------
# GGUF


def gguf_string(s):
    """GGUF string: u64 byte length + UTF-8 bytes."""
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value_bytes(vtype, value):
    """Encode one GGUF metadata value; arrays are (element type, list)."""
    if vtype == reference.GGUF_STRING:
        return gguf_string(value)
    if vtype == reference.GGUF_ARRAY:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(
            gguf_value_bytes(etype, item) for item in items)
    return struct.pack(reference.GGUF_SCALARS[vtype], value)


def gguf_tensor_type(name, shape, dtype):
    """ggml type for tensor `name` (numpy shape) under file dtype: 1-D norms stay F32, and
    Q8_0/Q4_0 fall back to F32 for rows whose length is not a multiple of 32."""
    if len(shape) == 1 or (dtype in ("q8_0", "q4_0") and shape[-1] % QK):
        return GGML_F32
    return GGML_TYPES[dtype]


def write_gguf(path, version, metadata, tensors, align=32):
    """Write a GGUF v2/v3 file. metadata: list of (key, gguf type, value);
    tensors: list of (name, float32 array in numpy shape [ne1, ne0], ggml type)."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata)))
    for key, vtype, value in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value_bytes(vtype, value)
    blobs, offset = [], 0
    for name, array, ggml_type in tensors:
        dims = tuple(reversed(array.shape))
        out += gguf_string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims,
                                               ggml_type, offset)
        blob = GGML_ENCODERS[ggml_type](array)
        blob += b"\0" * (-len(blob) % align)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % align)
    with open(path, "wb") as f:
        f.write(bytes(out) + b"".join(blobs))


def gguf_metadata(v, cfg, tokenizer_kv):
    """llama.* / general.* metadata of a variant followed by the copied tokenizer.* entries;
    linear RoPE scaling as llama.cpp's rope.scaling keys (llama3's is the rope_freqs tensor)."""
    u32, f32, s = 4, 6, reference.GGUF_STRING
    a = v.arch  # every key under the architecture's prefix, as llama.cpp's gguf writer does
    scaling = dict(v.rope_scaling)
    extra = []
    if scaling.get("rope_type") == "linear":
        extra = [(f"{a}.rope.scaling.type", s, "linear"), (f"{a}.rope.scaling.factor", f32, scaling["factor"])]
    if scaling.get("rope_type") == "yarn":  # llama.cpp's keys (its default betas 32 / 1)
        extra = [(f"{a}.rope.scaling.type", s, "yarn"), (f"{a}.rope.scaling.factor", f32, scaling["factor"]),
                 (f"{a}.rope.scaling.original_context_length", u32, scaling["original_max_position_embeddings"])]
    if scaling.get("type") == "longrope":  # convert_hf_to_gguf.py Phi3MiniModel: no type key, the
        scale = cfg.max_seq_len / v.original_context  # attention factor of its scale
        attn = math.sqrt(1 + math.log(scale) / math.log(v.original_context)) if scale > 1 else 1.0
        extra = [(f"{a}.rope.scaling.original_context_length", u32, v.original_context),
                 (f"{a}.rope.scaling.attn_factor", f32, attn)]
    if cfg.head_dim * cfg.n_heads != cfg.dim:
        extra += [(f"{a}.attention.key_length", u32, cfg.head_dim),
                  (f"{a}.attention.value_length", u32, cfg.head_dim)]
    if cfg.n_experts:  # llama.cpp's LLM_KV_EXPERT_* keys (Mixtral's files leave the expert width
        extra += [(f"{a}.expert_count", u32, cfg.n_experts),  # to feed_forward_length)
                  (f"{a}.expert_used_count", u32, cfg.n_experts_used)]
        if cfg.expert_ffn != cfg.hidden_dim:
            extra.append((f"{a}.expert_feed_forward_length", u32, cfg.expert_ffn))
        if cfg.shared_expert_ffn:
            extra.append((f"{a}.expert_shared_feed_forward_length", u32, cfg.shared_expert_ffn))
    if v.window:
        extra.append((f"{a}.attention.sliding_window", u32, v.window))
    if v.softcaps and not v.gguf_defaults:  # convert_hf_to_gguf.py Gemma2Model's keys
        extra += [(f"{a}.attn_logit_softcapping", f32, v.softcaps[0]),
                  (f"{a}.final_logit_softcapping", f32, v.softcaps[1])]
    if v.pre_attn_scalar and not v.gguf_defaults:  # llama.cpp has no key: Peregrine's writer's
        extra.append((f"{a}.attention.scale", f32, v.pre_attn_scalar ** -0.5))
    return extra + [
        ("general.architecture", s, a), ("general.name", s, v.name),
        ("general.alignment", u32, 32), ("general.file_type", u32, GGUF_FILE_TYPES[v.dtype]),
        (f"{a}.vocab_size", u32, cfg.vocab_size),
        (f"{a}.context_length", u32, cfg.max_seq_len),
        (f"{a}.embedding_length", u32, cfg.dim), (f"{a}.block_count", u32, cfg.n_layers),
        (f"{a}.feed_forward_length", u32, cfg.hidden_dim),
        (f"{a}.attention.head_count", u32, cfg.n_heads),
        (f"{a}.attention.head_count_kv", u32, cfg.n_kv_heads),
        (f"{a}.rope.dimension_count", u32, cfg.head_dim),
        (f"{a}.rope.freq_base", f32, cfg.rope_theta),
        (f"{a}.attention.layer_norm_rms_epsilon", f32, cfg.rms_eps),
    ] + tokenizer_kv


def gguf_tensors(v, cfg, w):
    """(GGUF name, float32 array, ggml type) for every tensor; Q/K permuted, output.weight
    omitted when tied."""
    names = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight"}
    if not v.tied:
        names["lm_head.weight"] = "output.weight"
    for i in range(cfg.n_layers):
        for g, hf in reference.gguf_to_hf_names(v.arch).items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{g}.weight"
        # Phi-3: llama.cpp's fused ffn_up (gate rows, then up rows)
        names[f"model.layers.{i}.mlp.gate_up_proj.weight"] = f"blk.{i}.ffn_up.weight"
        for g, hf in reference.GGUF_TO_HF_EXTRA.items():
            if f"model.layers.{i}.{hf}" in w:
                names[f"model.layers.{i}.{hf}"] = f"blk.{i}.{g}"
    if cfg.n_experts:
        names |= gguf_moe_names(cfg, w)
    out = []
    for hf, name in names.items():
        if not isinstance(hf, str):  # a stacked expert tensor: the experts' arrays
            array = np.stack([w[e] for e in hf])
            out.append((name, array, gguf_tensor_type(name, array.shape, v.dtype)))
            continue
        if hf not in w:  # the other family's form (fused or split projections)
            continue
        array = w[hf]
        if v.arch == "gemma2" and hf.endswith("norm.weight"):  # convert_hf_to_gguf.py Gemma2Model
            array = array + np.float32(1)
        if v.arch != "llama":  # Qwen2 / Qwen3 / Phi-3 / Gemma 2 are NEOX rope types: rows stay in HF order
            pass
        elif hf.endswith("q_proj.weight"):
            array = permute_qk(array, cfg.n_heads)
        elif hf.endswith("k_proj.weight"):
            array = permute_qk(array, cfg.n_kv_heads)
        if name.endswith("ffn_gate_inp_shexp.weight"):
            array = array.reshape(-1)
        out.append((name, array, gguf_tensor_type(name, array.shape, v.dtype)))
    scaling = dict(v.rope_scaling)
    if scaling.get("rope_type") == "llama3":
        out.append(("rope_freqs.weight", llama3_rope_freqs(cfg, scaling), GGML_F32))
    if scaling.get("type") == "longrope":  # Phi3MiniModel.generate_extra_tensors
        out += [(f"rope_factors_{k}.weight", np.array(scaling[f"{k}_factor"], dtype=np.float32), GGML_F32)
                for k in ("long", "short")]
    return out


def gguf_moe_names(cfg, w):
    """HF name (or tuple of the experts' HF names, stacked) -> GGUF name of a MoE model's
    router, experts (llama.cpp's blk.L.ffn_{gate,up,down}_exps [n_experts, rows, cols]) and
    shared expert (its gate GGUF [dim], HF [1, dim])."""
    names = {}
    router, expert, projections = reference.moe_names(cfg)
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        names[p + router + ".weight"] = f"blk.{i}.ffn_gate_inp.weight"
        for g, k in reference.GGUF_EXPERTS.items():
            names[tuple(f"{p}{expert.format(e)}{projections[k]}.weight" for e in range(cfg.n_experts))] = f"blk.{i}.{g}.weight"
        for g, hf in reference.GGUF_MOE_TO_HF.items():
            if p + hf + ".weight" in w:
                names[p + hf + ".weight"] = f"blk.{i}.{g}.weight"
    return names


def llama3_rope_freqs(cfg, scaling):
    """The rope_freqs.weight tensor llama.cpp's convert_hf_to_gguf.py writes for Llama 3.1+
    (LlamaModel.generate_extra_tensors): per RoPE pair the divisor of its frequency, 1 for
    wavelengths under original context / high_freq_factor, factor past original context /
    low_freq_factor, 1 / ((1 - smooth) / factor + smooth) in between."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    out = []
    for i in range(0, cfg.head_dim, 2):
        wavelen = 2 * math.pi * cfg.rope_theta ** (i / cfg.head_dim)
        if wavelen < old_context / high:
            out.append(1.0)
        elif wavelen > old_context / low:
            out.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def stories_tokenizer_kv():
    """The tokenizer.* metadata of stories260K.gguf as (key, type, value), types preserved."""
    gguf = reference.read_gguf(os.path.join(STORIES, "stories260K.gguf"))
    return [(k, t, val) for k, (t, val) in gguf.metadata.items() if k.startswith("tokenizer.")]


# --------------------------------------------------------------------------------------------
# Hugging Face safetensors


SAFETENSORS_ENCODERS = {"f32": ("F32", GGML_ENCODERS[GGML_F32]),
                        "f16": ("F16", GGML_ENCODERS[GGML_F16]),
                        "bf16": ("BF16", GGML_ENCODERS[GGML_BF16])}
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def write_safetensors(path, tensors, dtype):
    """Write {name: float32 array} as one safetensors file, every tensor encoded as `dtype`.
    Returns the number of data bytes written."""
    st_dtype, encode = SAFETENSORS_ENCODERS[dtype]
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        blob = encode(tensors[name])
        header[name] = {"dtype": st_dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    return offset


def hf_config_json(v, cfg):
    """config.json contents of a LlamaForCausalLM variant."""
    hf_class, model_type = {"llama": ("LlamaForCausalLM", "llama"), "qwen2": ("Qwen2ForCausalLM", "qwen2"),
                            "qwen3": ("Qwen3ForCausalLM", "qwen3"), "phi3": ("Phi3ForCausalLM", "phi3"),
                            "qwen2moe": ("Qwen2MoeForCausalLM", "qwen2_moe"), "olmoe": ("OlmoeForCausalLM", "olmoe"),
                            "gemma2": ("Gemma2ForCausalLM", "gemma2")}[v.arch]
    if v.arch == "llama" and cfg.n_experts:
        hf_class, model_type = "MixtralForCausalLM", "mixtral"
    if v.mistral:
        hf_class, model_type = "MistralForCausalLM", "mistral"
    extra = {"sliding_window": v.window} if v.window else {}
    if v.original_context:  # Phi3Config's field
        extra["original_max_position_embeddings"] = v.original_context
    if v.arch == "gemma2":  # Gemma2Config's fields
        extra |= {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": v.pre_attn_scalar or cfg.head_dim,
                  "attn_logit_softcapping": v.softcaps[0], "final_logit_softcapping": v.softcaps[1]}
    return extra | {"architectures": [hf_class], "model_type": model_type,
            "hidden_act": "gelu_pytorch_tanh" if v.arch == "gemma2" else "silu",
            "hidden_size": cfg.dim, "intermediate_size": cfg.hidden_dim,
            "num_hidden_layers": cfg.n_layers, "num_attention_heads": cfg.n_heads,
            "num_key_value_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim, "rms_norm_eps": cfg.rms_eps,
            "rope_theta": cfg.rope_theta, "vocab_size": cfg.vocab_size,
            "max_position_embeddings": cfg.max_seq_len, "tie_word_embeddings": v.tied,
            "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": TORCH_DTYPES[v.dtype]} | (
                {"rope_scaling": dict(v.rope_scaling)} if v.rope_scaling else {}) | hf_moe_config(cfg)


def hf_moe_config(cfg):
    """The MoE fields of MixtralConfig (num_local_experts; intermediate_size is the experts'),
    Qwen2MoeConfig (num_experts, moe_intermediate_size, shared_expert_intermediate_size,
    norm_topk_prob) and OlmoeConfig (num_experts, norm_topk_prob); {} for a dense model."""
    if not cfg.n_experts:
        return {}
    if cfg.arch == "llama":
        return {"num_local_experts": cfg.n_experts, "num_experts_per_tok": cfg.n_experts_used,
                "intermediate_size": cfg.expert_ffn}
    out = {"num_experts": cfg.n_experts, "num_experts_per_tok": cfg.n_experts_used, "norm_topk_prob": cfg.norm_topk_prob}
    if cfg.arch == "olmoe":
        return out | {"intermediate_size": cfg.expert_ffn}
    return out | {"moe_intermediate_size": cfg.expert_ffn, "shared_expert_intermediate_size": cfg.shared_expert_ffn,
                  "decoder_sparse_step": 1, "mlp_only_layers": []}


def write_hf(folder, v, cfg, w):
    """Write config.json and model.safetensors (or v.shards shards + index.json); tied models
    store no lm_head.weight, as transformers does."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config_json(v, cfg), f, indent=2)
    names = [n for n in reference.expected_shapes(cfg) if not (v.tied and n == "lm_head.weight")]
    if v.shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"),
                          {n: w[n] for n in names}, v.dtype)
        return
    weight_map, total = {}, 0
    for k, part in enumerate(np.array_split(np.array(names), v.shards)):
        shard = f"model-{k + 1:05d}-of-{v.shards:05d}.safetensors"
        total += write_safetensors(os.path.join(folder, shard), {n: w[n] for n in part}, v.dtype)
        weight_map.update({str(n): shard for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


# --------------------------------------------------------------------------------------------
# Driver


def write_variant_path(v):
    """A variant's model path relative to the output folder."""
    return {"llama2c": v.name + ".bin", "gguf": v.name + ".gguf"}.get(v.fmt, v.name)


def write_variant(out_dir, v, tokenizer_kv):
    """Write one variant's model; returns its path relative to out_dir."""
    cfg = variant_config(v)
    w = random_weights(cfg, v.tied, v.seed)
    rel = write_variant_path(v)
    if v.fmt == "llama2c":
        write_llama2c(os.path.join(out_dir, rel), cfg, w, v.tied)
    elif v.fmt == "gguf":
        write_gguf(os.path.join(out_dir, rel), v.gguf_version,
                   gguf_metadata(v, cfg, tokenizer_kv), gguf_tensors(v, cfg, w))
    else:
        write_hf(os.path.join(out_dir, rel), v, cfg, w)
    return rel


def manifest_entry(out_dir, name, fmt, model, tokens, decode=False, lora=None):
    """Run the reference on `model` (relative to out_dir, or absolute; the inputs of Q8_0/Q4_0
    matmuls quantized like the engine's), write name.logits.f32 ([len(tokens), vocab] float32
    LE) and return the manifest entry. decode: also name.decode_logits.f32, the logits of a
    token-by-token decode (reference.forward's decode), for RoPE scalings that follow the
    sequence length. lora: a LoRA adapter (relative to out_dir) applied unmerged, named in the
    entry as "lora"."""
    path = os.path.join(out_dir, model)
    entry = {"name": name, "format": fmt, "model": model, "tokens": tokens}
    specs = [os.path.join(out_dir, lora)] if lora else []
    if lora:
        entry["lora"] = lora
    for key, step_by_step in (("logits", False), ("decode_logits", True))[:1 + decode]:
        logits = reference.compute_logits(path, tokens, act_quant=True, decode=step_by_step, lora_specs=specs)
        entry[key] = f"{name}.{key}.f32"
        logits.astype("<f4").tofile(os.path.join(out_dir, entry[key]))
    return entry | {"vocab": int(logits.shape[1])}


# --------------------------------------------------------------------------------------------
# LoRA adapters: random, in Hugging Face PEFT's layout and llama.cpp's LoRA GGUF layout

LORA_MODULES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                "ffn_down": "mlp.down_proj"}
LORA_RANK, LORA_ALPHA = 4, 8.0
# (manifest name, base model: a variant name or a real model path, adapter format, seed)
LORA_CASES = [("stories260K-gguf+peft", os.path.join(STORIES, "stories260K.gguf"), "peft", 41),
              ("stories260K-bin+gguf-lora", os.path.join(STORIES, "stories260K.bin"), "gguf", 42),
              ("gguf-q4_0-gqa+peft", "gguf-q4_0-gqa", "peft", 43),
              ("hf-f32-gqa+gguf-lora", "hf-f32-gqa", "gguf", 44),
              ("gguf-f32-qwen2+gguf-lora", "gguf-f32-qwen2", "gguf", 45)]


def random_lora(cfg, weights, seed):
    """{(layer, GGUF module): (A [r, in], B [out, r])} for every layer's seven projections of
    the HF-layout `weights`, N(0, 0.1) entries (B non-zero, so the adapter changes the output)."""
    rng = np.random.default_rng(seed)
    out = {}
    for layer in range(cfg.n_layers):
        for module, hf in LORA_MODULES.items():
            rows, cols = weights[f"model.layers.{layer}.{hf}.weight"].shape
            out[(layer, module)] = (rng.normal(0, 0.1, (LORA_RANK, cols)).astype(np.float32),
                                    rng.normal(0, 0.1, (rows, LORA_RANK)).astype(np.float32))
    return out


def write_peft_lora(folder, lora):
    """Hugging Face PEFT's LoRA folder: adapter_config.json + adapter_model.safetensors with
    base_model.model.model.layers.L.<module>.lora_A.weight [r, in] / .lora_B.weight [out, r]."""
    os.makedirs(folder, exist_ok=True)
    config = {"peft_type": "LORA", "r": LORA_RANK, "lora_alpha": LORA_ALPHA, "use_rslora": False, "bias": "none",
              "target_modules": sorted({hf.split(".")[1] for hf in LORA_MODULES.values()}), "task_type": "CAUSAL_LM"}
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tensors = {}
    for (layer, module), (a, b) in lora.items():
        prefix = f"base_model.model.model.layers.{layer}.{LORA_MODULES[module]}"
        tensors[prefix + ".lora_A.weight"], tensors[prefix + ".lora_B.weight"] = a, b
    write_safetensors(os.path.join(folder, "adapter_model.safetensors"), tensors, "f32")


def write_gguf_lora(path, lora, cfg):
    """llama.cpp's LoRA GGUF (convert_lora_to_gguf.py): general.type = adapter, adapter.type =
    lora, adapter.lora.alpha; blk.L.<module>.weight.lora_a ne {in, r} and .lora_b ne {r, out},
    B's Q/K rows permuted into the interleaved order of llama-architecture GGUFs."""
    metadata = [("general.architecture", reference.GGUF_STRING, cfg.arch),
                ("general.type", reference.GGUF_STRING, "adapter"),
                ("adapter.type", reference.GGUF_STRING, "lora"),
                ("adapter.lora.alpha", 6, LORA_ALPHA)]
    tensors = []
    for (layer, module), (a, b) in sorted(lora.items()):
        if cfg.arch == "llama" and module in ("attn_q", "attn_k"):
            b = permute_qk(b, cfg.n_heads if module == "attn_q" else cfg.n_kv_heads)
        name = f"blk.{layer}.{module}.weight"
        tensors += [(name + ".lora_a", a, GGML_F32), (name + ".lora_b", b, GGML_F32)]
    write_gguf(path, 3, metadata, tensors)


def write_lora_case(out_dir, base, fmt, seed):
    """Write the adapter of one LORA_CASES row for `base` (path); returns its path relative to
    out_dir."""
    cfg, weights = reference.load_model(base)
    lora = random_lora(cfg, weights, seed)
    rel = f"lora-{seed}" + ("" if fmt == "peft" else ".gguf")
    if fmt == "peft":
        write_peft_lora(os.path.join(out_dir, rel), lora)
    else:
        write_gguf_lora(os.path.join(out_dir, rel), lora, cfg)
    return rel


def follows_length(v):
    """Whether the variant's RoPE scaling follows the sequence length (longrope, dynamic)."""
    scaling = dict(v.rope_scaling)
    return scaling.get("rope_type", scaling.get("type")) in ("longrope", "dynamic")


def main():
    """Write every variant, the real-model entries and manifest.json into --out."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    out_dir = ap.parse_args().out
    os.makedirs(out_dir, exist_ok=True)
    shutil.copyfile(os.path.join(STORIES, "tok512.bin"), os.path.join(out_dir, "tok512.bin"))
    tokenizer_kv = stories_tokenizer_kv()
    manifest = []
    for v in VARIANTS:
        model = write_variant(out_dir, v, tokenizer_kv)
        manifest.append(manifest_entry(out_dir, v.name, v.fmt, model, RANDOM_TOKENS, follows_length(v)))
        if follows_length(v):  # a prompt within the original context: the unscaled / short frequencies
            short = RANDOM_TOKENS[:LONG_CONTEXT - 4]
            manifest.append(manifest_entry(out_dir, v.name + "-short", v.fmt, model, short, True))
    for ext, fmt in (("bin", "llama2c"), ("gguf", "gguf")):
        model = os.path.join(STORIES, "stories260K." + ext)
        manifest.append(manifest_entry(out_dir, "stories260K-" + ext, fmt, model, STORY_TOKENS))
    manifest.append(manifest_entry(out_dir, "aidreams260K-bin", "llama2c", AIDREAMS, RANDOM_TOKENS))
    models = {v.name: (v.fmt, write_variant_path(v)) for v in VARIANTS}
    for name, base, fmt, seed in LORA_CASES:
        base_fmt, model = models.get(base, ("gguf" if base.endswith(".gguf") else "llama2c", base))
        lora = write_lora_case(out_dir, os.path.join(out_dir, model), fmt, seed)
        tokens = STORY_TOKENS if base.startswith(STORIES) else RANDOM_TOKENS
        manifest.append(manifest_entry(out_dir, name, base_fmt, model, tokens, lora=lora))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {len(manifest)} models + logits to {out_dir}/manifest.json")


if __name__ == "__main__":
    main()
