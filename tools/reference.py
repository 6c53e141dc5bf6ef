#!/usr/bin/python3
"""Independent PyTorch reference forward for Llama-family models (the test oracle).

Reads a llama2.c legacy checkpoint (.bin), a GGUF v2/v3 file (llama architecture) or a
Hugging Face folder (config.json + safetensors), converts every format INTO the Hugging Face
weight layout (Q/K rows in half-split "rotate_half" order), and runs one float32 full causal
forward over the whole token list. No KV cache: each call recomputes everything.

CLI:
    reference.py --model PATH --tokens 1,15,27 --out FILE [--act-quant] [--lora PATH[:SCALE]]...
writes raw little-endian float32 logits of shape [n_tokens, vocab] (row-major) to FILE and
prints {"n_tokens": N, "vocab": V} on stdout. Bad input: one "error: ..." line, exit 1.
--act-quant: the input of every matmul with a Q8_0/Q4_0 weight is first rounded to 8-bit
blocks of 32 (W8A8, as llama.cpp's and Peregrine's integer dot-product kernels compute).

Specs followed: llama2.c run.c (legacy v0 export), GGUF (ggml docs/gguf.md), safetensors,
Hugging Face LlamaForCausalLM (modeling_llama.py), MistralForCausalLM's sliding window
(modeling_mistral.py with masking_utils.py's sliding_window_overlay: a query at position q sees
keys kv with q - window < kv <= q), Gemma2ForCausalLM (modeling_gemma2.py: Gemma2RMSNorm's
(1 + w), the embedding times sqrt(hidden_size), pre/post attention and feed-forward norms,
gelu_pytorch_tanh, scores times query_pre_attn_scalar**-0.5 then soft-capped, sliding window on
the layers with layer_idx % 2 == 0, final-logit soft-capping), and for Gemma 2 GGUF files
llama.cpp's convert_hf_to_gguf.py Gemma2Model (norm weights stored as 1 + w) and its gemma2
hparams (soft-cap defaults 50 / 30; scores scaled by (n_embd / n_head)**-0.5 for the 46-layer
27B, head_dim**-0.5 otherwise),
and the Mixture-of-Experts families Mixtral, Qwen2-MoE and OLMoE (modeling_mixtral.py,
modeling_qwen2_moe.py, modeling_olmoe.py).
"""
import argparse
import json
import math
import os
import struct
import sys
import dataclasses
from dataclasses import dataclass

import numpy as np
import torch


class ModelError(Exception):
    """A model file or token list that this reference cannot (or refuses to) run."""


@dataclass(frozen=True)
class LlamaConfig:
    """Hyper-parameters of a Llama model. Sizes are element counts."""
    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    rope_theta: float
    rms_eps: float
    max_seq_len: int  # 0 = unknown / unlimited
    rope_scaling: dict = None  # HF config.json rope_scaling (linear / llama3 / yarn / longrope / dynamic), or None
    original_max_position_embeddings: int = 0  # Phi3Config's top-level field (LongRoPE); 0 = absent
    rope_freqs: tuple = None   # GGUF rope_freqs.weight: per-pair frequency divisors, or None
    arch: str = "llama"        # llama (Llama, Mistral, Mixtral), qwen2 (Q/K/V biases), qwen3 (Q/K
                               # norms), phi3, qwen2moe (Qwen2-MoE), olmoe (OLMoE), gemma2
    n_experts: int = 0         # Mixture-of-Experts: routed experts per layer (0 = dense MLP)
    n_experts_used: int = 0    # top-k
    expert_ffn: int = 0        # each expert's intermediate size
    shared_expert_ffn: int = 0  # Qwen2-MoE's shared expert (0 = none)
    norm_topk_prob: bool = False  # top-k probabilities renormalized (Mixtral: always)
    sliding_window: int = 0    # 0 = none; Mistral: every layer; Gemma 2: layers with index % 2 == 0
    query_pre_attn_scalar: float = 0.0  # Gemma 2: scores * its ** -0.5 (0: head_dim ** -0.5)
    attn_softcap: float = 0.0  # Gemma 2 attn_logit_softcapping (0 = none)
    final_softcap: float = 0.0  # Gemma 2 final_logit_softcapping (0 = none)


def moe_names(cfg):
    """HF names of a MoE layer's router and expert projections (gate, up, down):
    MixtralSparseMoeBlock's block_sparse_moe.{gate, experts.E.w1/w3/w2} (modeling_mixtral.py),
    Qwen2MoeSparseMoeBlock's / OlmoeSparseMoeBlock's mlp.{gate, experts.E.gate/up/down_proj}
    (modeling_qwen2_moe.py, modeling_olmoe.py)."""
    if cfg.arch == "llama":
        return "block_sparse_moe.gate", "block_sparse_moe.experts.{}.", ("w1", "w3", "w2")
    return "mlp.gate", "mlp.experts.{}.", ("gate_proj", "up_proj", "down_proj")


def moe_shapes(cfg):
    """HF suffix -> shape of a MoE layer's tensors (router, experts, Qwen2-MoE's shared expert
    and its Linear(hidden, 1) gate)."""
    router, expert, (gate, up, down) = moe_names(cfg)
    shapes = {router + ".weight": (cfg.n_experts, cfg.dim)}
    for e in range(cfg.n_experts):
        prefix = expert.format(e)
        shapes |= {f"{prefix}{gate}.weight": (cfg.expert_ffn, cfg.dim), f"{prefix}{up}.weight": (cfg.expert_ffn, cfg.dim),
                   f"{prefix}{down}.weight": (cfg.dim, cfg.expert_ffn)}
    if cfg.shared_expert_ffn:
        sff = cfg.shared_expert_ffn
        shapes |= {"mlp.shared_expert.gate_proj.weight": (sff, cfg.dim), "mlp.shared_expert.up_proj.weight": (sff, cfg.dim),
                   "mlp.shared_expert.down_proj.weight": (cfg.dim, sff), "mlp.shared_expert_gate.weight": (1, cfg.dim)}
    return shapes


# --------------------------------------------------------------------------------------------
# Layout helpers


def expected_shapes(cfg):
    """Map HF tensor name -> expected numpy shape (torch Linear layout [out, in])."""
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    per_layer = {
        "input_layernorm": (cfg.dim,), "post_attention_layernorm": (cfg.dim,),
        "self_attn.q_proj": (q, cfg.dim), "self_attn.k_proj": (kv, cfg.dim),
        "self_attn.v_proj": (kv, cfg.dim), "self_attn.o_proj": (cfg.dim, q),
        "mlp.gate_proj": (cfg.hidden_dim, cfg.dim), "mlp.up_proj": (cfg.hidden_dim, cfg.dim),
        "mlp.down_proj": (cfg.dim, cfg.hidden_dim),
    }
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, cfg.dim),
              "model.norm.weight": (cfg.dim,),
              "lm_head.weight": (cfg.vocab_size, cfg.dim)}
    extra = {}  # the families' additions, full suffixes
    if cfg.arch == "phi3":  # modeling_phi3.py: fused qkv_proj and gate_up_proj
        for s in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            del per_layer[s]
        extra = {"self_attn.qkv_proj.weight": (q + 2 * kv, cfg.dim),
                 "mlp.gate_up_proj.weight": (2 * cfg.hidden_dim, cfg.dim)}
    elif cfg.arch in ("qwen2", "qwen2moe"):  # modeling_qwen2(_moe).py: q/k/v_proj with bias=True
        extra = {"self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,),
                 "self_attn.v_proj.bias": (kv,)}
    elif cfg.arch == "qwen3":  # modeling_qwen3.py: Qwen3RMSNorm(head_dim) of q and k
        extra = {"self_attn.q_norm.weight": (cfg.head_dim,), "self_attn.k_norm.weight": (cfg.head_dim,)}
    elif cfg.arch == "gemma2":  # modeling_gemma2.py: Gemma2DecoderLayer's four norms
        extra = {"pre_feedforward_layernorm.weight": (cfg.dim,), "post_feedforward_layernorm.weight": (cfg.dim,)}
    elif cfg.arch == "olmoe":  # modeling_olmoe.py: OlmoeRMSNorm of the whole q and k projections
        extra = {"self_attn.q_norm.weight": (q,), "self_attn.k_norm.weight": (kv,)}
    if cfg.n_experts:  # the sparse MoE block replaces the dense MLP
        for s in ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            del per_layer[s]
        extra = extra | moe_shapes(cfg)
    for i in range(cfg.n_layers):
        for s, shape in per_layer.items():
            shapes[f"model.layers.{i}.{s}.weight"] = shape
        for s, shape in extra.items():
            shapes[f"model.layers.{i}.{s}"] = shape
    return shapes


def validate_weights(cfg, weights):
    """Raise ModelError unless `weights` holds exactly the expected float32 HF tensors."""
    for name, shape in expected_shapes(cfg).items():
        if name not in weights:
            raise ModelError(f"missing tensor {name}")
        w = weights[name]
        if tuple(w.shape) != shape:
            raise ModelError(f"tensor {name} has shape {tuple(w.shape)}, expected {shape}")
        if w.dtype != np.float32:
            raise ModelError(f"tensor {name} is {w.dtype} after loading, expected float32")


def check_heads(dim, n_heads, n_kv_heads, head_dim_given=False):
    """Raise ModelError for head counts that do not form a valid (GQA) attention."""
    if n_heads <= 0 or n_kv_heads <= 0 or (dim % n_heads and not head_dim_given):
        raise ModelError(f"bad head config: dim {dim}, heads {n_heads}, kv heads {n_kv_heads}")
    if n_heads % n_kv_heads:
        raise ModelError(f"n_heads {n_heads} is not a multiple of n_kv_heads {n_kv_heads}")


def unpermute_qk(w, n_head):
    """Undo convert_hf_to_gguf.py's Q/K row permutation (interleaved -> half-split RoPE pairs).

    w: float32 [n_head * head_dim, dim] with rows of each head ordered (x0,x1),(x2,x3),...
    Returns float32 [n_head * head_dim, dim] with each head's rows ordered x0,x2,..,x1,x3,..
    (inverse of w.reshape(n_head, 2, hs//2, dim).swapaxes(1, 2).reshape(w.shape)).
    """
    rows, dim = w.shape
    hs = rows // n_head
    return np.ascontiguousarray(
        w.reshape(n_head, hs // 2, 2, dim).swapaxes(1, 2).reshape(rows, dim))


def unpermute_all_qk(cfg, weights):
    """Apply unpermute_qk in place to every layer's q_proj (n_heads) and k_proj (n_kv_heads)."""
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}.self_attn."
        weights[p + "q_proj.weight"] = unpermute_qk(weights[p + "q_proj.weight"], cfg.n_heads)
        weights[p + "k_proj.weight"] = unpermute_qk(weights[p + "k_proj.weight"], cfg.n_kv_heads)


# --------------------------------------------------------------------------------------------
# llama2.c legacy (v0) checkpoint

LLAMA2C_MAGIC = 0x616B3432  # "ak42": newer llama2.c export versions, not supported


def llama2c_config(header, path):
    """LlamaConfig and `shared` (tied classifier) from the 7 int32 of a llama2.c v0 header."""
    if header[0] == LLAMA2C_MAGIC:
        raise ModelError(f"{path}: llama2.c v1/v2 export; only the legacy v0 format is supported")
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = header
    try:
        if min(dim, hidden, n_layers, abs(vocab), seq_len) <= 0:
            raise ModelError("non-positive size")
        check_heads(dim, n_heads, n_kv)
    except ModelError as e:
        raise ModelError(f"{path}: not a llama2.c v0 checkpoint, header {list(header)}: {e}")
    cfg = LlamaConfig(dim, hidden, n_layers, n_heads, n_kv, dim // n_heads, abs(vocab),
                      10000.0, 1e-5, seq_len)
    return cfg, vocab > 0


def llama2c_sections(cfg, shared):
    """(name, numpy shape) of the float32 arrays following the header, in file order."""
    d, h, L, hs = cfg.dim, cfg.hidden_dim, cfg.n_layers, cfg.head_dim
    sections = [("embed", (cfg.vocab_size, d)), ("rms_att", (L, d)),
                ("wq", (L, cfg.n_heads * hs, d)), ("wk", (L, cfg.n_kv_heads * hs, d)),
                ("wv", (L, cfg.n_kv_heads * hs, d)), ("wo", (L, d, cfg.n_heads * hs)),
                ("rms_ffn", (L, d)), ("w1", (L, h, d)), ("w2", (L, d, h)), ("w3", (L, h, d)),
                ("rms_final", (d,)), ("freq_cis", (2, cfg.max_seq_len, hs // 2))]
    return sections if shared else sections + [("wcls", (cfg.vocab_size, d))]


def load_llama2c(path):
    """Load a llama2.c legacy v0 .bin checkpoint into (LlamaConfig, HF-layout float32 weights).

    Header: 7 little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
    seq_len); vocab_size < 0 means an unshared classifier follows the freq_cis tables.
    RoPE theta 10000 and RMS eps 1e-5 are fixed by llama2.c (the freq_cis tables are ignored).
    """
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 28:
        raise ModelError(f"{path}: too short for a llama2.c header")
    cfg, shared = llama2c_config(struct.unpack_from("<7i", buf), path)
    sections = llama2c_sections(cfg, shared)
    need = 28 + 4 * sum(math.prod(shape) for _, shape in sections)
    if len(buf) != need:
        raise ModelError(f"{path}: {len(buf)} bytes, llama2.c header implies {need}")
    parts, pos = {}, 28
    for name, shape in sections:
        parts[name] = np.frombuffer(buf, "<f4", math.prod(shape), pos).reshape(shape)
        pos += 4 * math.prod(shape)
    weights = llama2c_to_hf(parts, cfg.n_layers, shared)
    unpermute_all_qk(cfg, weights)
    return cfg, weights


def llama2c_to_hf(parts, n_layers, shared):
    """Rename llama2.c sections (stacked [L, ...] float32 arrays) to per-layer HF tensors."""
    w = {"model.embed_tokens.weight": parts["embed"], "model.norm.weight": parts["rms_final"],
         "lm_head.weight": parts["embed"] if shared else parts["wcls"]}
    names = {"rms_att": "input_layernorm", "rms_ffn": "post_attention_layernorm",
             "wq": "self_attn.q_proj", "wk": "self_attn.k_proj", "wv": "self_attn.v_proj",
             "wo": "self_attn.o_proj", "w1": "mlp.gate_proj", "w2": "mlp.down_proj",
             "w3": "mlp.up_proj"}
    for i in range(n_layers):
        for src, dst in names.items():
            w[f"model.layers.{i}.{dst}.weight"] = parts[src][i]
    return w


# --------------------------------------------------------------------------------------------
# GGUF

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
GGML_TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q4_0: "Q4_0", GGML_Q8_0: "Q8_0",
                   GGML_BF16: "BF16"}
QK = 32  # values per Q4_0 / Q8_0 block
Q8_0_BLOCK = np.dtype([("d", "<f2"), ("q", "i1", QK)])          # 34 bytes
Q4_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", QK // 2)])    # 18 bytes


@dataclass(frozen=True)
class GgufTensorInfo:
    """One GGUF tensor: dims innermost-first (ne0, ne1, ...), ggml type, absolute byte offset."""
    name: str
    dims: tuple
    ggml_type: int
    offset: int


@dataclass(frozen=True)
class GgufFile:
    """Parsed GGUF header. metadata maps key -> (gguf value type, python value);
    an array value is (GGUF_ARRAY, (element type, list))."""
    version: int
    metadata: dict
    tensors: dict


class _Reader:
    """Little-endian cursor over a bytes buffer that raises ModelError past its end."""

    def __init__(self, buf, path):
        self.buf, self.pos, self.path = buf, 0, path

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise ModelError(f"{self.path}: truncated GGUF header at byte {self.pos}")
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self):
        n = self.unpack("<Q")
        if self.pos + n > len(self.buf):
            raise ModelError(f"{self.path}: truncated GGUF string at byte {self.pos}")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype == GGUF_STRING:
            return self.string()
        if vtype == GGUF_ARRAY:
            etype, n = self.unpack("<I"), self.unpack("<Q")
            return (etype, [self.value(etype) for _ in range(n)])
        if vtype not in GGUF_SCALARS:
            raise ModelError(f"{self.path}: unknown GGUF value type {vtype}")
        return self.unpack(GGUF_SCALARS[vtype])


def read_gguf(path):
    """Read the file at `path` and parse its GGUF header (see parse_gguf)."""
    with open(path, "rb") as f:
        return parse_gguf(f.read(), path)


def parse_gguf(buf, path):
    """Parse a GGUF v2/v3 header (metadata + tensor infos) from bytes into a GgufFile."""
    r = _Reader(buf, path)
    if buf[:4] != b"GGUF":
        raise ModelError(f"{path}: not a GGUF file (bad magic {buf[:4]!r})")
    r.pos = 4
    version = r.unpack("<I")
    if version not in (2, 3):
        raise ModelError(f"{path}: GGUF version {version} unsupported (need 2 or 3)")
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        vtype = r.unpack("<I")
        metadata[key] = (vtype, r.value(vtype))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = tuple(r.unpack("<Q") for _ in range(r.unpack("<I")))
        infos.append((name, dims, r.unpack("<I"), r.unpack("<Q")))
    align = metadata.get("general.alignment", (4, 32))[1]
    if not isinstance(align, int) or align <= 0:
        raise ModelError(f"{path}: bad general.alignment {align}")
    data_start = (r.pos + align - 1) // align * align
    tensors = {n: GgufTensorInfo(n, d, t, data_start + o) for n, d, t, o in infos}
    return GgufFile(version, metadata, tensors)


def gguf_value(gguf, key, default=None):
    """Plain python value of metadata `key` (arrays as lists).
    Returns `default` if absent; raises ModelError if absent and default is None."""
    if key not in gguf.metadata:
        if default is None:
            raise ModelError(f"GGUF metadata key {key} missing")
        return default
    vtype, value = gguf.metadata[key]
    return value[1] if vtype == GGUF_ARRAY else value


def f16_bits_to_f32(u16):
    """uint16 array of IEEE half bits -> float32 array of the same shape."""
    return u16.view("<f2").astype(np.float32)


def bf16_bits_to_f32(u16):
    """uint16 array of bfloat16 bits -> float32 array of the same shape."""
    return (u16.astype(np.uint32) << 16).view(np.float32)


def dequant_q8_0(blocks):
    """Q8_0 structured blocks [n] -> float32 [n * 32]: x = d * q."""
    return (blocks["d"].astype(np.float32)[:, None] * blocks["q"].astype(np.float32)).reshape(-1)


def dequant_q4_0(blocks):
    """Q4_0 structured blocks [n] -> float32 [n * 32]: value j = low nibble of byte j,
    value j+16 = high nibble of byte j; x = d * (nibble - 8)."""
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (blocks["d"].astype(np.float32)[:, None] * nibbles).reshape(-1)


def gguf_tensor_f32(buf, info, path):
    """Read and dequantize one GGUF tensor to float32 with numpy shape reversed(dims)."""
    n = math.prod(info.dims)
    shape = tuple(reversed(info.dims))
    t = info.ggml_type
    if t in (GGML_Q4_0, GGML_Q8_0) and info.dims[0] % QK:
        raise ModelError(f"{path}: {info.name} row length {info.dims[0]} not a multiple of {QK}")
    if t == GGML_F32:
        dtype, count, decode = np.dtype("<f4"), n, lambda a: a.astype(np.float32)
    elif t == GGML_F16:
        dtype, count, decode = np.dtype("<u2"), n, f16_bits_to_f32
    elif t == GGML_BF16:
        dtype, count, decode = np.dtype("<u2"), n, bf16_bits_to_f32
    elif t == GGML_Q8_0:
        dtype, count, decode = Q8_0_BLOCK, n // QK, dequant_q8_0
    elif t == GGML_Q4_0:
        dtype, count, decode = Q4_0_BLOCK, n // QK, dequant_q4_0
    else:
        raise ModelError(f"{path}: tensor {info.name} has unsupported ggml type {t}")
    if info.offset + count * dtype.itemsize > len(buf):
        raise ModelError(f"{path}: tensor {info.name} data runs past the end of the file")
    raw = np.frombuffer(buf, dtype=dtype, count=count, offset=info.offset)
    return decode(raw).reshape(shape)


GGUF_TO_HF = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
              "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
              "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
              "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


GGUF_ARCHS = ("llama", "qwen2", "qwen3", "phi3", "qwen2moe", "olmoe", "gemma2")
# llama.cpp's gemma2 tensor names where they differ (llama-arch.cpp LLM_ARCH_GEMMA2): ffn_norm is
# the pre-feed-forward norm, post_attention_norm / post_ffw_norm the norms after each block.
GGUF_TO_HF_GEMMA2 = {"ffn_norm": "pre_feedforward_layernorm", "post_attention_norm": "post_attention_layernorm",
                     "post_ffw_norm": "post_feedforward_layernorm"}


def gguf_to_hf_names(arch):
    """GGUF per-layer tensor stem -> HF module suffix for `arch`."""
    return GGUF_TO_HF | GGUF_TO_HF_GEMMA2 if arch == "gemma2" else GGUF_TO_HF
# GGUF tensor suffix -> HF suffix for the families' additions (Qwen2 biases, Qwen3 norms).
GGUF_TO_HF_EXTRA = {"attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
                    "attn_v.bias": "self_attn.v_proj.bias",
                    "attn_q_norm.weight": "self_attn.q_norm.weight",
                    "attn_k_norm.weight": "self_attn.k_norm.weight",
                    "attn_qkv.weight": "self_attn.qkv_proj.weight"}


def gguf_config(gguf, path):
    """LlamaConfig from a GGUF file's {arch}.* metadata (llama, qwen2, qwen3) and token_embd
    shape; head_dim is {arch}.attention.key_length when given."""
    arch = gguf_value(gguf, "general.architecture")
    if arch not in GGUF_ARCHS:
        raise ModelError(f"{path}: architecture {arch!r} unsupported (need one of {GGUF_ARCHS})")
    if "token_embd.weight" not in gguf.tensors:
        raise ModelError(f"{path}: tensor token_embd.weight missing")
    dim, vocab = gguf.tensors["token_embd.weight"].dims
    n_heads = gguf_value(gguf, f"{arch}.attention.head_count")
    n_kv = gguf_value(gguf, f"{arch}.attention.head_count_kv", n_heads)
    key_length = gguf_value(gguf, f"{arch}.attention.key_length", 0)  # 0: absent
    check_heads(dim, n_heads, n_kv, key_length > 0)
    head_dim = key_length or dim // n_heads
    rope_dims = gguf_value(gguf, f"{arch}.rope.dimension_count", head_dim)
    if rope_dims != head_dim:
        raise ModelError(f"{path}: partial RoPE ({rope_dims} of {head_dim} dims) unsupported")
    extra = {}
    if arch == "gemma2":  # llama.cpp's gemma2 hparams; attention.scale is Peregrine's writer's key
        n_layers, dim = gguf_value(gguf, f"{arch}.block_count"), gguf_value(gguf, f"{arch}.embedding_length")
        scale = gguf_value(gguf, f"{arch}.attention.scale", 0.0)
        scalar = scale ** -2 if scale else (dim // n_heads if n_layers == 46 else head_dim)
        extra = dict(query_pre_attn_scalar=scalar,
                     attn_softcap=gguf_value(gguf, f"{arch}.attn_logit_softcapping", 50.0),
                     final_softcap=gguf_value(gguf, f"{arch}.final_logit_softcapping", 30.0))
    extra["sliding_window"] = gguf_value(gguf, f"{arch}.attention.sliding_window", 0)
    scaling = None
    kind = gguf_value(gguf, f"{arch}.rope.scaling.type", "none")
    if kind == "linear":
        scaling = {"rope_type": "linear", "factor": gguf_value(gguf, f"{arch}.rope.scaling.factor")}
    elif kind == "yarn":  # llama.cpp's keys; its rope kernel scales cos/sin by attn_factor * get_mscale
        factor = gguf_value(gguf, f"{arch}.rope.scaling.factor")
        scaling = {"rope_type": "yarn", "factor": factor,
                   "original_max_position_embeddings": gguf_value(
                       gguf, f"{arch}.rope.scaling.original_context_length", gguf_value(gguf, f"{arch}.context_length")),
                   "beta_fast": gguf_value(gguf, f"{arch}.rope.scaling.yarn_beta_fast", 32.0),
                   "beta_slow": gguf_value(gguf, f"{arch}.rope.scaling.yarn_beta_slow", 1.0)}
        if f"{arch}.rope.scaling.attn_factor" in gguf.metadata:
            scaling["attention_factor"] = gguf_value(gguf, f"{arch}.rope.scaling.attn_factor") * yarn_mscale(factor)
    elif kind not in ("none", "longrope"):  # LongRoPE's factors are tensors: gguf_longrope
        raise ModelError(f"{path}: RoPE scaling type {kind!r} unsupported")
    hidden_dim = gguf_value(gguf, f"{arch}.feed_forward_length")
    n_experts = gguf_value(gguf, f"{arch}.expert_count", 0)  # llama.cpp's LLM_KV_EXPERT_* keys
    return LlamaConfig(
        dim=gguf_value(gguf, f"{arch}.embedding_length"),
        hidden_dim=hidden_dim,
        n_experts=n_experts, n_experts_used=gguf_value(gguf, f"{arch}.expert_used_count", 0),
        expert_ffn=gguf_value(gguf, f"{arch}.expert_feed_forward_length", hidden_dim),
        shared_expert_ffn=gguf_value(gguf, f"{arch}.expert_shared_feed_forward_length", 0),
        norm_topk_prob=bool(gguf_value(gguf, f"{arch}.expert_weights_norm", arch == "llama")),
        n_layers=gguf_value(gguf, f"{arch}.block_count"),
        n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, vocab_size=vocab,
        rope_theta=float(gguf_value(gguf, f"{arch}.rope.freq_base", 10000.0)),
        rms_eps=float(gguf_value(gguf, f"{arch}.attention.layer_norm_rms_epsilon")),
        max_seq_len=gguf_value(gguf, f"{arch}.context_length", 0), rope_scaling=scaling, arch=arch, **extra)


def gguf_block_quantized(path):
    """HF names of the weights a GGUF file stores as Q8_0/Q4_0 (lm_head too when it is the
    tied token_embd); empty for any other file."""
    if not os.path.isfile(path):
        return frozenset()
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            return frozenset()
    gguf = read_gguf(path)
    cfg = gguf_config(gguf, path)
    names = {hf for i in gguf.tensors.values() if i.ggml_type in (GGML_Q8_0, GGML_Q4_0)
             for hf in gguf_hf_names(i.name, cfg)}
    if "model.embed_tokens.weight" in names and "output.weight" not in gguf.tensors:
        names.add("lm_head.weight")
    return frozenset(names)


def gguf_hf_name(name, arch="llama"):
    """GGUF tensor name -> HF name (None for tensors a Llama forward does not use); Phi-3's
    ffn_up is its fused gate_up_proj."""
    if arch == "phi3" and name.endswith(".ffn_up.weight"):
        return f"model.layers.{name.split('.')[1]}.mlp.gate_up_proj.weight"
    top = {"token_embd.weight": "model.embed_tokens.weight",
           "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    if name in top:
        return top[name]
    parts = name.split(".")
    layer_names = gguf_to_hf_names(arch)
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in layer_names:
        return f"model.layers.{parts[1]}.{layer_names[parts[2]]}.weight"
    suffix = ".".join(parts[2:])
    if len(parts) == 4 and parts[0] == "blk" and suffix in GGUF_TO_HF_EXTRA:
        return f"model.layers.{parts[1]}.{GGUF_TO_HF_EXTRA[suffix]}"
    return None


GGUF_MOE_TO_HF = {"ffn_gate_shexp": "mlp.shared_expert.gate_proj", "ffn_up_shexp": "mlp.shared_expert.up_proj",
                  "ffn_down_shexp": "mlp.shared_expert.down_proj", "ffn_gate_inp_shexp": "mlp.shared_expert_gate"}
GGUF_EXPERTS = {"ffn_gate_exps": 0, "ffn_up_exps": 1, "ffn_down_exps": 2}  # -> moe_names projection


def gguf_hf_names(name, cfg):
    """The HF names the GGUF tensor `name` holds: one (gguf_hf_name), or for a stacked
    blk.L.ffn_*_exps.weight [n_experts, rows, cols] one per expert; [] for tensors a forward
    does not use."""
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and cfg.n_experts:
        router, expert, projections = moe_names(cfg)
        prefix = f"model.layers.{parts[1]}."
        if parts[2] in GGUF_EXPERTS:
            proj = projections[GGUF_EXPERTS[parts[2]]]
            return [f"{prefix}{expert.format(e)}{proj}.weight" for e in range(cfg.n_experts)]
        if parts[2] == "ffn_gate_inp":
            return [f"{prefix}{router}.weight"]
        if parts[2] in GGUF_MOE_TO_HF:
            return [f"{prefix}{GGUF_MOE_TO_HF[parts[2]]}.weight"]
    hf = gguf_hf_name(name, cfg.arch)
    return [] if hf is None else [hf]


def load_gguf(path):
    """Load a GGUF v2/v3 (llama, qwen2, qwen3, phi3) into (LlamaConfig, HF-layout float32 weights)."""
    with open(path, "rb") as f:
        buf = f.read()
    gguf = parse_gguf(buf, path)
    cfg = gguf_config(gguf, path)
    weights = {}
    for info in gguf.tensors.values():
        names = gguf_hf_names(info.name, cfg)
        if not names:
            continue
        array = gguf_tensor_f32(buf, info, path)
        if len(names) > 1 and array.shape[0] != len(names):
            raise ModelError(f"{path}: {info.name} holds {array.shape[0]} experts, expert_count is {len(names)}")
        for k, hf in enumerate(names):  # a stacked expert tensor: expert k is array[k]
            weights[hf] = array[k] if len(names) > 1 else array
        if info.name.endswith("ffn_gate_inp_shexp.weight"):  # GGUF [dim], HF Linear(dim, 1)
            weights[names[0]] = array.reshape(1, -1)
    if "rope_freqs.weight" in gguf.tensors:  # Llama 3.1+ RoPE scaling, per-pair divisors
        freqs = gguf_tensor_f32(buf, gguf.tensors["rope_freqs.weight"], path)
        cfg = dataclasses.replace(cfg, rope_freqs=tuple(float(f) for f in freqs.reshape(-1)))
    if "rope_factors_long.weight" in gguf.tensors:
        cfg = gguf_longrope(cfg, gguf, buf, path)
    weights.setdefault("lm_head.weight", weights.get("model.embed_tokens.weight"))
    if cfg.arch == "gemma2":  # undo convert_hf_to_gguf.py's norm.weight + 1
        weights = {k: v - np.float32(1) if k.endswith("norm.weight") else v for k, v in weights.items()}
    validate_weights(cfg, weights)
    if cfg.arch == "llama":  # llama.cpp's rope type NORM: the converter permuted Q/K; Qwen's NEOX did not
        unpermute_all_qk(cfg, weights)
    return cfg, weights


def gguf_longrope(cfg, gguf, buf, path):
    """cfg with LongRoPE as llama.cpp's Phi-3 GGUFs hold it (convert_hf_to_gguf.py
    Phi3MiniModel; read by llama-model.cpp): rope_factors_long / rope_factors_short.weight,
    {arch}.rope.scaling.original_context_length (else context_length) as Phi-3's top-level
    original_max_position_embeddings, and {arch}.rope.scaling.attn_factor, which llama.cpp's rope
    kernel multiplies cos and sin by (absent: its hparams default 1)."""
    arch = gguf_value(gguf, "general.architecture")
    factors = {k: [float(f) for f in gguf_tensor_f32(buf, gguf.tensors[f"rope_factors_{k}.weight"], path).reshape(-1)]
               for k in ("long", "short")}
    scaling = {"rope_type": "longrope", "long_factor": factors["long"], "short_factor": factors["short"],
               "attention_factor": gguf_value(gguf, f"{arch}.rope.scaling.attn_factor", 1.0)}
    original = gguf_value(gguf, f"{arch}.rope.scaling.original_context_length", cfg.max_seq_len)
    return dataclasses.replace(cfg, rope_scaling=scaling, original_max_position_embeddings=original)


# --------------------------------------------------------------------------------------------
# Hugging Face folder (config.json + safetensors)

SAFETENSORS_DTYPES = {"F32": (np.dtype("<f4"), lambda a: a.astype(np.float32)),
                      "F16": (np.dtype("<u2"), f16_bits_to_f32),
                      "BF16": (np.dtype("<u2"), bf16_bits_to_f32)}


def read_safetensors(path):
    """Read every tensor of one .safetensors file -> {name: float32 numpy array}."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ModelError(f"{path}: too short for a safetensors header")
    n = struct.unpack_from("<Q", buf, 0)[0]
    if 8 + n > len(buf):
        raise ModelError(f"{path}: safetensors header length {n} past end of file")
    try:
        header = json.loads(buf[8:8 + n])
    except ValueError as e:
        raise ModelError(f"{path}: bad safetensors header JSON: {e}") from e
    out = {}
    for name, meta in header.items():
        if name != "__metadata__":
            out[name] = safetensors_tensor(buf, 8 + n, name, meta, path)
    return out


def safetensors_tensor(buf, data_start, name, meta, path):
    """Decode one safetensors entry {dtype, shape, data_offsets} to a float32 array."""
    if meta.get("dtype") not in SAFETENSORS_DTYPES:
        raise ModelError(f"{path}: tensor {name} dtype {meta.get('dtype')} unsupported")
    dtype, decode = SAFETENSORS_DTYPES[meta["dtype"]]
    shape = tuple(meta["shape"])
    begin, end = meta["data_offsets"]
    if end - begin != math.prod(shape) * dtype.itemsize or data_start + end > len(buf):
        raise ModelError(f"{path}: tensor {name} has bad data_offsets {meta['data_offsets']}")
    raw = np.frombuffer(buf, dtype=dtype, count=math.prod(shape), offset=data_start + begin)
    return decode(raw).reshape(shape)


def hf_config(folder):
    """LlamaConfig from a Hugging Face config.json; also returns tie_word_embeddings."""
    try:
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
    except (OSError, ValueError) as e:
        raise ModelError(f"{folder}: cannot read config.json: {e}") from e
    arch = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "phi3": "phi3",
            "qwen2_moe": "qwen2moe", "olmoe": "olmoe", "gemma2": "gemma2"}.get(c.get("model_type", "llama"))
    act = c.get("hidden_activation") or c.get("hidden_act", "silu")
    if arch is None or act != ("gelu_pytorch_tanh" if arch == "gemma2" else "silu"):
        raise ModelError(f"{folder}: only model_type llama / mistral / mixtral / qwen2 / qwen3 / phi3 / qwen2_moe / olmoe "
                         "with hidden_act silu, gemma2 with gelu_pytorch_tanh is supported")
    window = c.get("sliding_window") or 0
    if arch == "qwen2" and not c.get("use_sliding_window", False):
        window = 0
    scaling = c.get("rope_scaling")
    if scaling and scaling.get("rope_type", scaling.get("type")) not in ("default", "linear", "llama3", "yarn", "longrope",
                                                                         "dynamic"):
        raise ModelError(f"{folder}: rope_scaling {scaling} unsupported")
    try:
        dim, n_heads = c["hidden_size"], c["num_attention_heads"]
        n_kv = c.get("num_key_value_heads") or n_heads
        check_heads(dim, n_heads, n_kv, bool(c.get("head_dim")))
        cfg = LlamaConfig(
            dim=dim, hidden_dim=c["intermediate_size"], n_layers=c["num_hidden_layers"],
            n_heads=n_heads, n_kv_heads=n_kv, head_dim=c.get("head_dim") or dim // n_heads,
            vocab_size=c["vocab_size"], rope_theta=float(c.get("rope_theta", 10000.0)),
            rms_eps=float(c["rms_norm_eps"]), max_seq_len=c.get("max_position_embeddings", 0),
            rope_scaling=scaling, arch=arch, sliding_window=window,
            original_max_position_embeddings=c.get("original_max_position_embeddings") or 0,
            query_pre_attn_scalar=float(c.get("query_pre_attn_scalar") or 0.0),
            attn_softcap=float(c.get("attn_logit_softcapping") or 0.0),
            final_softcap=float(c.get("final_logit_softcapping") or 0.0),
            n_experts=c.get("num_local_experts") or c.get("num_experts") or 0,
            n_experts_used=c.get("num_experts_per_tok", 0),
            expert_ffn=c.get("moe_intermediate_size") or c["intermediate_size"],
            shared_expert_ffn=c.get("shared_expert_intermediate_size") or 0,
            norm_topk_prob=c.get("norm_topk_prob", c.get("model_type") == "mixtral"))
    except KeyError as e:
        raise ModelError(f"{folder}: config.json lacks {e}") from e
    return cfg, bool(c.get("tie_word_embeddings", False))


def safetensors_files(folder):
    """List the safetensors files of a HF folder (single file, or shards from the index)."""
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return [single]
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        raise ModelError(f"{folder}: neither model.safetensors nor its index.json found")
    with open(index) as f:
        weight_map = json.load(f).get("weight_map", {})
    return [os.path.join(folder, name) for name in sorted(set(weight_map.values()))]


def load_hf(folder):
    """Load a HF LlamaForCausalLM folder into (LlamaConfig, float32 weights)."""
    cfg, tied = hf_config(folder)
    weights = {}
    for path in safetensors_files(folder):
        weights.update(read_safetensors(path))
    if tied:
        weights["lm_head.weight"] = weights.get("model.embed_tokens.weight")
    validate_weights(cfg, weights)
    return cfg, weights


# --------------------------------------------------------------------------------------------
# Forward


def load_model(path):
    """Load any supported model -> (LlamaConfig, {HF name: float32 numpy array}).

    Dispatch: a directory is a HF folder; a file starting with b"GGUF" is GGUF; any other
    file is a llama2.c legacy checkpoint. Q/K are always returned in HF half-split order.
    """
    if os.path.isdir(path):
        return load_hf(path)
    if not os.path.isfile(path):
        raise ModelError(f"{path}: no such file or directory")
    with open(path, "rb") as f:
        magic = f.read(4)
    return load_gguf(path) if magic == b"GGUF" else load_llama2c(path)


def rms_norm(x, w, eps):
    """x: float32 [n, dim], w: float32 [dim] -> x * rsqrt(mean(x^2) + eps) * w."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def gemma_rms_norm(x, w, eps):
    """modeling_gemma2.py Gemma2RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), in float32."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def causal_mask(n, window):
    """[n, n] additive mask: 0 where key kv is visible to query q (kv <= q, and with a sliding
    window kv > q - window, masking_utils.py's sliding_window_overlay), -inf elsewhere."""
    q = torch.arange(n)[:, None]
    kv = torch.arange(n)[None, :]
    visible = (kv <= q) & ((kv > q - window) if window else True)
    return torch.zeros(n, n).masked_fill(~visible, float("-inf"))


def layer_window(cfg, layer):
    """The sliding window of `layer`: Gemma 2 windows the layers with index % 2 == 0
    (modeling_gemma2.py: is_sliding = not bool(layer_idx % 2)), Mistral every layer."""
    if cfg.arch == "gemma2" and layer % 2:
        return 0
    return cfg.sliding_window


def scaled_inv_freq(inv_freq, scaling):
    """RoPE inverse frequencies under a config.json rope_scaling, as transformers'
    modeling_rope_utils.py computes them (_compute_linear_scaling_rope_parameters: inv_freq /
    factor; _compute_llama3_parameters: wavelengths past original_max_position_embeddings /
    low_freq_factor divided by factor, below it / high_freq_factor kept, a smooth blend in
    between)."""
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return inv_freq
    factor = scaling["factor"]
    if kind == "linear":
        return inv_freq / factor
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, inv_freq_llama)


def yarn_mscale(scale, mscale=1.0):
    """modeling_rope_utils.py's get_mscale: 0.1 * mscale * ln(scale) + 1 (1 for scale <= 1)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_parameters(cfg, scaling):
    """(inv_freq float32 [head_dim / 2], attention_factor) of rope_type yarn, as transformers'
    _compute_yarn_parameters computes them: the pairs between the correction dims of beta_fast
    and beta_slow rotations over original_max_position_embeddings (floor / ceil, clamped to
    [0, head_dim - 1]) blend interpolated (inv_freq / factor) and extrapolated frequencies by a
    linear ramp; attention_factor, else get_mscale(factor) (or DeepSeek's mscale ratio)."""
    base, dim, factor = cfg.rope_theta, cfg.head_dim, scaling["factor"]
    old_context = scaling.get("original_max_position_embeddings") or cfg.max_seq_len
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1
    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
        attention_factor = (yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
                            if mscale and mscale_all_dim else yarn_mscale(factor))

    def correction_dim(rotations):
        return dim * math.log(old_context / (rotations * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv_freq, attention_factor


def longrope_parameters(cfg, scaling, seq_len):
    """(inv_freq float32 [head_dim / 2], attention_factor) of rope_type longrope for a forward of
    seq_len positions, as transformers' _compute_longrope_parameters computes them, with
    dynamic_rope_update's longrope_frequency_update choosing the factors: original context L =
    Phi-3's top-level original_max_position_embeddings (then factor = max_position_embeddings /
    L), else rope_scaling's (factor from rope_scaling, else that ratio), else
    max_position_embeddings; attention_factor, else sqrt(1 + ln(factor) / ln(L)) for factor > 1
    (else 1); inv_freq = 1 / (ext_factors * base ** (2i / dim)) with long_factor once seq_len > L,
    short_factor otherwise."""
    base, dim = cfg.rope_theta, cfg.head_dim
    if cfg.original_max_position_embeddings:
        original = cfg.original_max_position_embeddings
        factor = cfg.max_seq_len / original
    else:
        original = scaling.get("original_max_position_embeddings") or cfg.max_seq_len
        factor = scaling.get("factor") or cfg.max_seq_len / original
    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext_factors = torch.tensor(scaling["long_factor" if seq_len > original else "short_factor"], dtype=torch.float32)
    inv_freq_shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (ext_factors * base ** inv_freq_shape), attention_factor


def dynamic_ntk_inv_freq(cfg, scaling, seq_len):
    """inv_freq float32 [head_dim / 2] of rope_type dynamic for a forward of seq_len positions, as
    transformers' _compute_dynamic_ntk_parameters computes it: with L the original context and
    seq_len raised to at least L, base * (factor * seq_len / L - (factor - 1)) ** (dim / (dim - 2))
    as the new base. L: original_max_position_embeddings (rope_scaling's, else the top level's),
    else max_position_embeddings, which is what HF's function always takes (its TODO: "use the
    new original_max_position_embeddings"); with L the context scaling could never apply."""
    base, dim, factor = cfg.rope_theta, cfg.head_dim, scaling["factor"]
    original = (scaling.get("original_max_position_embeddings") or cfg.original_max_position_embeddings
                or cfg.max_seq_len)
    seq_len = max(seq_len, original)
    base = base * ((factor * seq_len / original) - (factor - 1)) ** (dim / (dim - 2))
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rope_parameters(cfg, seq_len):
    """(inv_freq float32 [head_dim / 2], cos/sin scale) of a forward over seq_len positions:
    frequencies scaled by cfg.rope_scaling (HF) or divided by cfg.rope_freqs (GGUF's tensor, as
    llama.cpp's rope kernels do); YaRN's and LongRoPE's attention factor is the scale."""
    head_dim = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    scale = 1.0
    scaling = cfg.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "yarn":
        inv_freq, scale = yarn_parameters(cfg, scaling)
    elif kind == "longrope":
        inv_freq, scale = longrope_parameters(cfg, scaling, seq_len)
    elif kind == "dynamic":
        inv_freq = dynamic_ntk_inv_freq(cfg, scaling, seq_len)
    elif scaling:
        inv_freq = scaled_inv_freq(inv_freq, scaling)
    if cfg.rope_freqs is not None:
        inv_freq = inv_freq / torch.tensor(cfg.rope_freqs, dtype=torch.float32)
    return inv_freq, scale


def rope_tables(n, cfg, seq_lens=None):
    """cos, sin: float32 [n, head_dim] for positions 0..n-1, HF layout (freqs repeated twice),
    times the attention factor, as HF's rotary embedding computes them. seq_lens: per position
    the seq_len of the forward that rotated it (longrope and dynamic follow it: HF's
    dynamic_rope_update takes max(position_ids) + 1); None: n for all (one forward)."""
    seq_lens = seq_lens or [n] * n
    cos, sin = torch.empty(n, cfg.head_dim), torch.empty(n, cfg.head_dim)
    for seq_len in sorted(set(seq_lens)):
        inv_freq, scale = rope_parameters(cfg, seq_len)
        rows = [i for i, length in enumerate(seq_lens) if length == seq_len]
        freqs = torch.outer(torch.tensor(rows, dtype=torch.float32), inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        cos[rows], sin[rows] = emb.cos() * scale, emb.sin() * scale
    return cos, sin


def apply_rope(x, cos, sin):
    """x: float32 [heads, n, head_dim]; NeoX/HF rotate_half RoPE on pairs (x[i], x[i+hd/2])."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def quantize_activations(h):
    """float32 [n, k] (k a multiple of 32) -> the values an 8-bit block dot product sees: per
    block of 32, q = round-half-even(h * (127/amax)), d = amax/127 rounded to float16 (q = 0,
    d = 0 when amax = 0), h ~ d*q (ggml's x86 quantize_row_q8_0 and block_q8_0; Peregrine's
    quantize_activations)."""
    b = h.reshape(h.shape[0], -1, QK)
    amax = b.abs().amax(-1, keepdim=True)
    inv = torch.where(amax != 0, 127.0 / amax, torch.zeros_like(amax))
    d = (amax / 127.0).to(torch.float16).to(torch.float32)
    return (torch.round(b * inv) * d).reshape(h.shape)


def linear(w, name, h, act_quant):
    """h @ w[name].T; h is quantize_activations-rounded first when name is in act_quant. Plus,
    for each LoRA pair attached to the weight (add_loras), scale * (h @ A.T) @ B.T on the
    unrounded h (the engine's LoRA products run in f32)."""
    y = (quantize_activations(h) if name in act_quant else h) @ w[name].T
    for a, b, scale in w.get(name + "#lora", ()):
        y = y + scale * ((h @ a.T) @ b.T)
    return y


def attention(cfg, w, p, h, cos, sin, act_quant, window=0):
    """Causal GQA self-attention of layer prefix p (sliding `window`, 0 = none; Gemma 2's
    scaling and soft-capping as eager_attention_forward in modeling_gemma2.py).
    h: float32 [n, dim] -> [n, dim]."""
    n = h.shape[0]
    q_dim, kv_dim = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    if p + "self_attn.qkv_proj.weight" in w:  # Phi3Attention: one projection, sliced
        qkv = linear(w, p + "self_attn.qkv_proj.weight", h, act_quant)
        fused = {"q": qkv[..., :q_dim], "k": qkv[..., q_dim:q_dim + kv_dim], "v": qkv[..., q_dim + kv_dim:]}
    def proj(name, heads):  # + bias (Qwen2), then per-head RMSNorm (Qwen3's q_norm / k_norm)
        if p + "self_attn.qkv_proj.weight" in w:
            return fused[name].reshape(n, heads, cfg.head_dim)
        y = linear(w, p + f"self_attn.{name}_proj.weight", h, act_quant)
        if p + f"self_attn.{name}_proj.bias" in w:
            y = y + w[p + f"self_attn.{name}_proj.bias"]
        norm = w.get(p + f"self_attn.{name}_norm.weight")
        if norm is not None and cfg.arch == "olmoe":  # OlmoeAttention: q_norm(q_proj(h)), whole
            y = rms_norm(y, norm, cfg.rms_eps)
        y = y.view(n, heads, cfg.head_dim)
        if norm is not None and cfg.arch != "olmoe":  # Qwen3Attention: per-head q_norm / k_norm
            y = rms_norm(y, norm, cfg.rms_eps)
        return y
    q = proj("q", cfg.n_heads)
    k, v = proj("k", cfg.n_kv_heads), proj("v", cfg.n_kv_heads)
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    rep = cfg.n_heads // cfg.n_kv_heads
    k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
    scaling = cfg.query_pre_attn_scalar ** -0.5 if cfg.query_pre_attn_scalar else 1.0 / math.sqrt(cfg.head_dim)
    scores = (q @ k.transpose(1, 2)) * scaling
    if cfg.attn_softcap:
        scores = torch.tanh(scores / cfg.attn_softcap) * cfg.attn_softcap
    out = torch.softmax(scores + causal_mask(n, window), dim=-1) @ v  # [heads, n, head_dim]
    return linear(w, p + "self_attn.o_proj.weight", out.transpose(0, 1).reshape(n, -1), act_quant)


def swiglu(cfg, w, p, h, act_quant, names=("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")):
    """SwiGLU MLP of layer prefix p: down(silu(gate(h)) * up(h)); h: float32 [n, dim]. Phi3MLP:
    gate_up_proj(h).chunk(2) gives gate then up. Gemma2MLP: gelu_pytorch_tanh instead of silu.
    names: the gate, up, down modules (an expert's)."""
    if p + "mlp.gate_up_proj.weight" in w:
        gate, up = linear(w, p + "mlp.gate_up_proj.weight", h, act_quant).chunk(2, dim=-1)
    else:
        gate = linear(w, p + names[0] + ".weight", h, act_quant)
        up = linear(w, p + names[1] + ".weight", h, act_quant)
    act = torch.nn.functional.silu(gate) if cfg.arch != "gemma2" else torch.nn.functional.gelu(gate, approximate="tanh")
    return linear(w, p + names[2] + ".weight", act * up, act_quant)


def sparse_moe(cfg, w, p, h, act_quant):
    """Sparse MoE block of layer prefix p (h: float32 [n, dim] -> [n, dim]), as
    MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock / OlmoeSparseMoeBlock compute it: router
    softmax in float32 over all experts, top-k, renormalized when norm_topk_prob (Mixtral
    always); each expert's SwiGLU MLP runs on the tokens routed to it, scaled by the routing
    weight and summed per token; Qwen2-MoE adds sigmoid(shared_expert_gate(h)) *
    shared_expert(h)."""
    router, expert, projections = moe_names(cfg)
    probs = torch.softmax(linear(w, p + router + ".weight", h, act_quant), dim=-1, dtype=torch.float32)
    top_w, top_i = torch.topk(probs, cfg.n_experts_used, dim=-1)
    if cfg.norm_topk_prob:
        top_w = top_w / top_w.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    for e in range(cfg.n_experts):
        tokens, slot = torch.where(top_i == e)
        if len(tokens):
            names = tuple(expert.format(e) + proj for proj in projections)
            y = swiglu(cfg, w, p, h[tokens], act_quant, names)
            out.index_add_(0, tokens, y * top_w[tokens, slot, None])
    if cfg.shared_expert_ffn:
        gate = torch.sigmoid(h @ w[p + "mlp.shared_expert_gate.weight"].T)
        shared = ("mlp.shared_expert.gate_proj", "mlp.shared_expert.up_proj", "mlp.shared_expert.down_proj")
        out = out + gate * swiglu(cfg, w, p, h, act_quant, shared)
    return out


def check_tokens(cfg, tokens):
    """Raise ModelError unless tokens is a non-empty list of ids in [0, vocab) within context."""
    if not tokens:
        raise ModelError("token list is empty")
    bad = [t for t in tokens if not 0 <= t < cfg.vocab_size]
    if bad:
        raise ModelError(f"token ids {bad[:5]} outside [0, {cfg.vocab_size})")
    if cfg.max_seq_len and len(tokens) > cfg.max_seq_len:
        raise ModelError(f"{len(tokens)} tokens exceed the context length {cfg.max_seq_len}")


@torch.no_grad()
def forward(cfg, weights, tokens, act_quant=frozenset(), decode=False, loras=()):
    """Full causal forward. tokens: list of n ints -> float32 numpy logits [n, vocab].
    act_quant: HF names of the weights whose matmul input is quantize_activations-rounded.
    decode: the logits of a token-by-token decode with a KV cache instead (transformers'
    generate after a one-token prompt): position i's query and key rotated by its own forward,
    of seq_len i + 1, and cached keys keeping theirs; the same logits as one forward unless the
    RoPE scaling follows the sequence length (longrope, dynamic). loras: load_lora results,
    applied unmerged (add_loras)."""
    check_tokens(cfg, tokens)
    w = {k: torch.tensor(v) for k, v in weights.items()}
    add_loras(w, loras)
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    n = len(tokens)
    cos, sin = rope_tables(n, cfg, list(range(1, n + 1)) if decode else None)
    if cfg.arch == "gemma2":
        return gemma2_forward(cfg, w, x, cos, sin, act_quant)
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        x = x + attention(cfg, w, p, rms_norm(x, w[p + "input_layernorm.weight"], cfg.rms_eps),
                          cos, sin, act_quant, layer_window(cfg, i))
        mlp = sparse_moe if cfg.n_experts else swiglu
        x = x + mlp(cfg, w, p, rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg.rms_eps), act_quant)
    x = rms_norm(x, w["model.norm.weight"], cfg.rms_eps)
    return linear(w, "lm_head.weight", x, act_quant).numpy().astype(np.float32)


def gemma2_forward(cfg, w, x, cos, sin, act_quant):
    """Gemma2Model.forward + Gemma2ForCausalLM's head (modeling_gemma2.py): the embedding x
    ([n, dim] float32) times the normalizer sqrt(hidden_size) in the hidden dtype; per
    Gemma2DecoderLayer x += post_attention_layernorm(attn(input_layernorm(x))), then
    x += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))); final norm, lm_head,
    logits -> tanh(logits / cap) * cap. Returns float32 numpy logits [n, vocab]."""
    x = x * torch.tensor(cfg.dim ** 0.5, dtype=x.dtype)
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        norm = lambda name, h: gemma_rms_norm(h, w[p + name + ".weight"], cfg.rms_eps)  # noqa: E731
        h = attention(cfg, w, p, norm("input_layernorm", x), cos, sin, act_quant, layer_window(cfg, i))
        x = x + norm("post_attention_layernorm", h)
        h = swiglu(cfg, w, p, norm("pre_feedforward_layernorm", x), act_quant)
        x = x + norm("post_feedforward_layernorm", h)
    x = gemma_rms_norm(x, w["model.norm.weight"], cfg.rms_eps)
    logits = linear(w, "lm_head.weight", x, act_quant)
    if cfg.final_softcap:
        logits = torch.tanh(logits / cfg.final_softcap) * cfg.final_softcap
    return logits.numpy().astype(np.float32)


def compute_logits(model_path, tokens, act_quant=False, decode=False, lora_specs=()):
    """Load `model_path` and return float32 logits [len(tokens), vocab]. act_quant: quantize
    the activations entering Q8_0/Q4_0 matmuls (W8A8, see quantize_activations); decode: a
    token-by-token decode's logits (forward's decode); lora_specs: LoRA adapters
    'PATH[:SCALE]' applied together, unmerged (load_lora)."""
    cfg, weights = load_model(model_path)
    quantized = gguf_block_quantized(model_path) if act_quant else frozenset()
    loras = [load_lora(spec, cfg) for spec in lora_specs]
    return forward(cfg, weights, tokens, quantized, decode, loras)


# --------------------------------------------------------------------------------------------
# LoRA adapters (Hu et al. 2022), applied unmerged: linear() adds scale * (h @ A.T) @ B.T


PEFT_PREFIX = "base_model.model."


def load_peft_lora(folder):
    """A Hugging Face PEFT LoRA folder (adapter_config.json: r, lora_alpha, use_rslora;
    adapter_model.safetensors: base_model.model.<module>.lora_A.weight [r, in] and .lora_B.weight
    [out, r], peft's LoraLayer naming) -> {HF weight name: [(A, B, alpha / r, or alpha / sqrt(r)
    with use_rslora)]}; Q/K rows are already in the HF order reference forwards use."""
    try:
        with open(os.path.join(folder, "adapter_config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ModelError(f"{folder}: bad adapter_config.json: {e}") from e
    r, alpha = int(config["r"]), float(config["lora_alpha"])
    scale = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    tensors = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))
    out = {}
    for name, a in tensors.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name[:-len(".lora_A.weight")]
        module = module[len(PEFT_PREFIX):] if module.startswith(PEFT_PREFIX) else module
        b = tensors[name.replace(".lora_A.", ".lora_B.")]
        out.setdefault(module + ".weight", []).append((a, b, scale))
    return out


def load_gguf_lora(path, cfg):
    """A llama.cpp LoRA GGUF (convert_lora_to_gguf.py: general.type = adapter,
    adapter.lora.alpha; tensors <base name>.lora_a ne {in, r} and .lora_b ne {r, out}) ->
    {HF weight name: [(A [r, in], B [out, r], alpha / r)]}. For the llama architecture B's
    Q/K rows are un-permuted into HF order, as the base's weights are."""
    with open(path, "rb") as f:
        buf = f.read()
    gguf = parse_gguf(buf, path)
    if gguf_value(gguf, "general.type", "") != "adapter":
        raise ModelError(f"{path}: not a LoRA adapter GGUF (general.type is not 'adapter')")
    arch = gguf_value(gguf, "general.architecture", "llama")
    alpha = float(gguf_value(gguf, "adapter.lora.alpha", 0.0))
    out = {}
    for name, info in gguf.tensors.items():
        if not name.endswith(".lora_a"):
            continue
        a = gguf_tensor_f32(buf, info, path)
        b = gguf_tensor_f32(buf, gguf.tensors[name[:-len(".lora_a")] + ".lora_b"], path)
        hf = gguf_hf_name(name[:-len(".lora_a")], arch)
        if hf is None:
            raise ModelError(f"{path}: {name} adapts no weight a forward uses")
        if arch == "llama" and hf.endswith(("q_proj.weight", "k_proj.weight")):
            b = unpermute_qk(b, cfg.n_heads if hf.endswith("q_proj.weight") else cfg.n_kv_heads)
        r = a.shape[0]
        out.setdefault(hf, []).append((a, b, (alpha if alpha > 0 else r) / r))
    return out


def load_lora(spec, cfg):
    """'PATH[:SCALE]' (a PEFT folder or a llama.cpp LoRA GGUF) -> {HF weight name: [(A, B,
    user scale * adapter scale)]}."""
    path, user_scale = spec, 1.0
    if not os.path.exists(spec) and ":" in spec:
        path, text = spec.rsplit(":", 1)
        user_scale = float(text)
    pairs = load_peft_lora(path) if os.path.isdir(path) else load_gguf_lora(path, cfg)
    return {name: [(a, b, s * user_scale) for a, b, s in ps] for name, ps in pairs.items()}


def add_loras(w, loras):
    """Attach the LoRA pairs of every adapter in `loras` (load_lora results) to the weights
    dict `w` (torch tensors) under '<name>#lora', where linear() finds them."""
    for lora in loras:
        for name, pairs in lora.items():
            if name not in w:
                raise ModelError(f"LoRA adapter targets {name}, which the model lacks")
            for a, b, s in pairs:
                if a.shape[1] != w[name].shape[1] or b.shape[0] != w[name].shape[0] or a.shape[0] != b.shape[1]:
                    raise ModelError(f"LoRA pair for {name}: A {a.shape}, B {b.shape} do not fit {tuple(w[name].shape)}")
                w.setdefault(name + "#lora", []).append((torch.tensor(a), torch.tensor(b), s))


# --------------------------------------------------------------------------------------------
# CLI


def parse_tokens(text):
    """'1,15,27' -> [1, 15, 27]; ModelError on anything else."""
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise ModelError(f"bad --tokens {text!r}: expected comma-separated integers") from e


def main(argv=None):
    """CLI entry point; returns the process exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="llama2.c .bin, .gguf, or HF folder")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids, e.g. 1,15,27")
    ap.add_argument("--out", required=True, help="output file: float32 LE [n_tokens, vocab]")
    ap.add_argument("--act-quant", action="store_true",
                    help="round the inputs of Q8_0/Q4_0 matmuls to 8-bit blocks of 32 (W8A8)")
    ap.add_argument("--lora", action="append", default=[],
                    help="LoRA adapter PATH[:SCALE] (PEFT folder or llama.cpp LoRA GGUF), applied unmerged; repeatable")
    args = ap.parse_args(argv)
    try:
        logits = compute_logits(args.model, parse_tokens(args.tokens), args.act_quant, lora_specs=args.lora)
        logits.astype("<f4").tofile(args.out)
    except (ModelError, OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"n_tokens": logits.shape[0], "vocab": logits.shape[1]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
