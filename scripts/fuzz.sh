#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz and runs the GGUF and the
# safetensors fuzzer side by side for SECONDS each (default 300).
#
#   scripts/fuzz.sh [SECONDS]
#
# Seeds (rebuilt every run into build-fuzz/seeds/): the real GGUF files in ../shared (the
# stories260K model, the vocab-only GGUFs and llama.cpp's files in every weight type from
# models/kquant-test), shrunken copies of them that keep every metadata key and tensor type but
# cut arrays and tensors to a few elements or one block per row (so mutations reach the tensor
# table), the random-weight family models of build/testdata when present, a GGUF with a tensor
# of every ggml type Peregrine reads, and small generated
# safetensors files. The corpus grown by
# libFuzzer persists in build-fuzz/corpus/; crash/leak/timeout inputs land in
# build-fuzz/artifacts/; logs in build-fuzz/logs/. Exit status is non-zero if a fuzzer failed.
# Environment: PEREGRINE_SHARED_DIR (default ../shared next to the repository), FUZZ_MAX_LEN
# (default 65536 bytes; larger seeds are truncated to it by libFuzzer).
set -euo pipefail

seconds_each=${1:-300}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-fuzz
shared=${PEREGRINE_SHARED_DIR:-$root/../shared}
max_len=${FUZZ_MAX_LEN:-65536}

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPEREGRINE_FUZZ=ON -DPEREGRINE_TESTS=OFF >/dev/null
ninja -C "$build" gguf_fuzz safetensors_fuzz

rm -rf "$build/seeds"
mkdir -p "$build/seeds/gguf" "$build/seeds/safetensors" "$build/corpus/gguf" \
  "$build/corpus/safetensors" "$build/artifacts" "$build/logs"
real_ggufs=()
[ -f "$shared/models/stories260K/stories260K.gguf" ] && real_ggufs+=("$shared/models/stories260K/stories260K.gguf")
# The model families' test files (qwen2 biases, qwen3 norms, phi3 fused projections, RoPE
# scaling) when tools/make_test_models.py has written them into build/testdata.
for f in "$shared"/tokenizers/gguf-vocab/*.gguf "$shared"/models/kquant-test/*.gguf "$root"/build/testdata/*.gguf; do
  [ -f "$f" ] && real_ggufs+=("$f")
done
[ ${#real_ggufs[@]} -gt 0 ] && cp "${real_ggufs[@]}" "$build/seeds/gguf/"

python3 - "$build/seeds" "${real_ggufs[@]}" <<'PY'
import json, os, struct, sys

out = sys.argv[1]
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}

def gguf_string(b):
    return struct.pack("<Q", len(b)) + b

class Reader:
    def __init__(self, b): self.b, self.p = b, 0
    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p); self.p += struct.calcsize(fmt); return v[0]
    def string(self):
        n = self.take("<Q"); s = self.b[self.p:self.p + n]; self.p += n; return s
    def value(self, t, keep):
        """Re-encodes one value of type t; arrays are cut to `keep` elements."""
        if t == 8: return gguf_string(self.string())
        if t != 9: return struct.pack(SCALAR[t], self.take(SCALAR[t]))
        et, n = self.take("<I"), self.take("<Q")
        elems = [self.value(et, keep) for _ in range(n)]
        return struct.pack("<IQ", et, min(n, keep)) + b"".join(elems[:keep])

# ggml type id -> (values per block, bytes per block) of the types Peregrine reads.
BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          20: (32, 18), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 23: (256, 136)}

def shrink_gguf(path, keep=8, max_dim=4):
    """Same metadata keys, tensor names and types; arrays cut to `keep`, dims to `max_dim`
    (rows to one block of the tensor's type)."""
    r = Reader(open(path, "rb").read())
    magic, version, n_t, n_kv = r.take("<I"), r.take("<I"), r.take("<Q"), r.take("<Q")
    kvs = []
    for _ in range(n_kv):
        key, t = r.string(), r.take("<I")
        kvs.append(gguf_string(key) + struct.pack("<I", t) + r.value(t, keep))
    infos, data = [], b""
    for _ in range(n_t):
        name, nd = r.string(), r.take("<I")
        dims = [min(r.take("<Q"), max_dim) for _ in range(nd)]
        typ, _ = r.take("<I"), r.take("<Q")
        block, block_bytes = BLOCKS.get(typ, (1, 4))
        if block > 1: dims[0] = block  # one block per row
        data += b"\0" * (-len(data) % 32)
        infos.append(gguf_string(name) + struct.pack("<I", nd) + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", typ, len(data)))
        n = 1
        for d in dims: n *= d
        data += bytes((i * 37) & 0xFF for i in range(n // block * block_bytes))
    head = struct.pack("<IIQQ", magic, version, n_t, n_kv) + b"".join(kvs) + b"".join(infos)
    return head + b"\0" * (-len(head) % 32) + data

def make_gguf(kvs, tensors, version=3):
    """kvs: [(key, type, packed value)]; tensors: [(name, dims innermost-first, ggml type, nbytes)]."""
    head = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for k, t, v in kvs: head += gguf_string(k.encode()) + struct.pack("<I", t) + v
    data = b""
    for name, dims, typ, nbytes in tensors:
        data += b"\0" * (-len(data) % 32)
        head += gguf_string(name.encode()) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", typ, len(data))
        data += bytes((i * 11) & 0xFF for i in range(nbytes))
    return head + b"\0" * (-len(head) % 32) + data

for path in sys.argv[2:]:
    name = os.path.basename(path).replace(".gguf", "")
    with open(f"{out}/gguf/{name}-mini.gguf", "wb") as f: f.write(shrink_gguf(path))

kvs = [("general.architecture", 8, gguf_string(b"llama")), ("general.alignment", 4, struct.pack("<I", 32)),
       ("llama.embedding_length", 4, struct.pack("<I", 32)), ("llama.rope.freq_base", 6, struct.pack("<f", 1e4)),
       ("flag", 7, b"\1"), ("big", 10, struct.pack("<Q", 1 << 40)), ("neg", 11, struct.pack("<q", -5)),
       ("ratio", 12, struct.pack("<d", 0.5)),
       ("tokens", 9, struct.pack("<IQ", 8, 3) + b"".join(gguf_string(s) for s in (b"a", b"bc", b""))),
       ("scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<ff", 0.5, -1.0))]
tensors = [("f32", [32, 2], 0, 256), ("f16", [32], 1, 64), ("q4_0", [64, 2], 2, 4 * 18),
           ("q8_0", [32, 1, 2], 8, 2 * 34), ("bf16", [32, 1, 1, 1], 30, 64)]
tensors += [(f"type{t}", [block, 2], t, 2 * size) for t, (block, size) in BLOCKS.items() if block > 1 and t not in (2, 8)]
with open(f"{out}/gguf/dtypes.gguf", "wb") as f: f.write(make_gguf(kvs, tensors))

def tiny_llama(matrix_type):
    """A loadable llama: dim 32, 4 heads (hd 8), 2 KV heads, ffn 32, 1 layer, vocab 8."""
    u32 = lambda v: struct.pack("<I", v)
    kv = [("general.architecture", 8, gguf_string(b"llama")), ("llama.embedding_length", 4, u32(32)),
          ("llama.block_count", 4, u32(1)), ("llama.feed_forward_length", 4, u32(32)),
          ("llama.attention.head_count", 4, u32(4)), ("llama.attention.head_count_kv", 4, u32(2)),
          ("llama.context_length", 4, u32(64)), ("llama.rope.dimension_count", 4, u32(8)),
          ("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
          ("llama.rope.freq_base", 6, struct.pack("<f", 1e4))]
    row = {0: 4 * 32, 1: 2 * 32, 8: 34, 2: 18}[matrix_type]  # bytes of a 32-wide row
    mat = lambda name, rows: (name, [32, rows], matrix_type, rows * row)
    ts = [mat("token_embd.weight", 8), ("output_norm.weight", [32], 0, 128),
          ("blk.0.attn_norm.weight", [32], 0, 128), ("blk.0.ffn_norm.weight", [32], 0, 128),
          mat("blk.0.attn_q.weight", 32), mat("blk.0.attn_k.weight", 16), mat("blk.0.attn_v.weight", 16),
          mat("blk.0.attn_output.weight", 32), mat("blk.0.ffn_gate.weight", 32),
          mat("blk.0.ffn_up.weight", 32), mat("blk.0.ffn_down.weight", 32)]
    return make_gguf(kv, ts)

for t, name in [(0, "f32"), (1, "f16"), (8, "q8_0"), (2, "q4_0")]:
    with open(f"{out}/gguf/tiny-llama-{name}.gguf", "wb") as f: f.write(tiny_llama(t))
with open(f"{out}/gguf/v2.gguf", "wb") as f: f.write(make_gguf(kvs[:3], tensors[:1], version=2))

def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, elem bytes)] laid out back to back."""
    header, data = {}, b""
    if metadata is not None: header["__metadata__"] = metadata
    for name, dtype, shape, elem in tensors:
        n = elem
        for d in shape: n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((i * 13) & 0xFF for i in range(n))
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data

llama = []
for name, shape in [("model.embed_tokens.weight", [16, 8]), ("model.norm.weight", [8])]:
    llama.append((name, "F32", shape, 4))
for l in range(2):
    p = f"model.layers.{l}."
    llama += [(p + "input_layernorm.weight", "F32", [8], 4), (p + "post_attention_layernorm.weight", "BF16", [8], 2),
              (p + "self_attn.q_proj.weight", "F16", [8, 8], 2), (p + "self_attn.k_proj.weight", "BF16", [4, 8], 2),
              (p + "self_attn.v_proj.weight", "F32", [4, 8], 4), (p + "self_attn.o_proj.weight", "F16", [8, 8], 2),
              (p + "mlp.gate_proj.weight", "F32", [12, 8], 4), (p + "mlp.up_proj.weight", "F32", [12, 8], 4),
              (p + "mlp.down_proj.weight", "F32", [8, 12], 4)]
seeds = {
    "tiny-llama.safetensors": safetensors(llama, {"format": "pt"}),
    "mixed.safetensors": safetensors([("a", "F32", [2, 3], 4), ("b", "F16", [5], 2), ("c", "BF16", [1, 1, 2], 2),
                                      ("scalar", "F32", [], 4), ("empty", "F16", [0, 7], 2)]),
    "empty.safetensors": safetensors([]),
    "metadata.safetensors": safetensors([("x", "BF16", [4], 2)], {"format": "pt", "note": "seed"}),
    "i64.safetensors": safetensors([("ids", "I64", [3], 8)]),
}
for name, b in seeds.items():
    with open(f"{out}/safetensors/{name}", "wb") as f: f.write(b)
PY
echo "seeds: $(ls "$build/seeds/gguf" | wc -l) gguf, $(ls "$build/seeds/safetensors" | wc -l) safetensors"

run() {  # run NAME
  local name=$1
  "$build/bin/${name}_fuzz" "$build/corpus/$name" "$build/seeds/$name" \
    -max_total_time="$seconds_each" -max_len="$max_len" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/${name}-" \
    >"$build/logs/$name.log" 2>&1
}
echo "fuzzing gguf and safetensors for ${seconds_each}s each (logs in $build/logs)"
run gguf & gguf_pid=$!
run safetensors & st_pid=$!
status=0
wait "$gguf_pid" || status=1
wait "$st_pid" || status=1

for name in gguf safetensors; do
  log=$build/logs/$name.log
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  secs=$(grep -E '^stat::total_run_time|Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1 | grep -oE '[0-9]+ second' | grep -oE '[0-9]+' || true)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  echo "$name: ${runs:-?} executions${secs:+ in ${secs}s}, ${cov:-no coverage line}, corpus $(ls "$build/corpus/$name" | wc -l) inputs"
  grep -E 'ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer)|runtime error|invariant violated' "$log" | head -5 || true
done
ls "$build/artifacts" | head
exit "$status"
