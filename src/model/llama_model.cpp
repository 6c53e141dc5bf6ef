#include "peregrine/model/llama_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "peregrine/core/available_memory.h"
#include "peregrine/kernels/cpu/attention/attention.h"
#include "peregrine/kernels/cpu/elementwise/elementwise.h"
#include "peregrine/kernels/cpu/elementwise/hadamard.h"
#include "peregrine/kernels/cpu/matmul/half_packed.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/kernels/cpu/matmul/quant_packed.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8_packed.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_packed.h"
#include "peregrine/model/batch_kv_plan.h"
#include "peregrine/model/micro_batches.h"
#include "peregrine/model/moe_ffn.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

// Runs of up to this many rows (chains, and trees through chain_view) attend row by row
// through the decode kernel. With the matmuls' per-token sums in one order from 1 to 7 rows at
// every kernel level (the ggml formats' GEMVs, kernels/cpu/matmul/gemm_ggml*; the Q4_0 / Q8_0
// packed groups), verifying a chain of up to 6 drafted tokens, or a tree of up to 6 nodes,
// yields the logits one-row decode steps would, bit for bit: greedy speculative decoding then
// emits plain decoding's tokens even at a near tie (tests/model/verification_rows_test.cpp). At
// 8 rows AVX2's K-quant tile sums with the tokens in lanes, which batched decode of 8 sequences
// keeps (12% faster on qwen2.5-coder-1.5b).
constexpr std::int64_t kRowsAsDecode = 7;

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  dequantize(t.dtype, t.data, out);
  return out;
}

// Layer tensor "blk.L.<name>" (name with its suffix) as f32, or empty when the file has none.
std::vector<float> optional_f32(const ModelFile& f, std::int64_t layer, const char* name) {
  const TensorView* t = f.find("blk." + std::to_string(layer) + "." + name);
  return t ? to_f32(*t) : std::vector<float>{};
}

// x[row, :] += bias for the n rows of x ([n, bias.size()]); nothing when bias is empty.
void add_bias(std::span<float> x, std::int64_t n, const std::vector<float>& bias) {
  const auto width = static_cast<std::int64_t>(bias.size());
  for (std::int64_t i = 0; i < n && width > 0; ++i) {
    for (std::int64_t j = 0; j < width; ++j) x[static_cast<std::size_t>(i * width + j)] += bias[static_cast<std::size_t>(j)];
  }
}

// RMSNorm of every w.size()-wide group of x in place — each head (Qwen3's [head_dim] weights)
// or each row (OLMoE's [n_heads·head_dim]); nothing when w is empty.
void group_rmsnorm(std::span<float> x, const std::vector<float>& w, float eps) {
  const std::size_t width = w.size();
  for (std::size_t g = 0; width > 0 && g < x.size(); g += width) rmsnorm(&x[g], w.data(), &x[g], static_cast<std::int64_t>(width), eps);
}

// w[i] += offset for an RMSNorm weight (ModelConfig::norm_weight_offset); empty stays empty.
void add_norm_offset(std::vector<float>& w, float offset) {
  if (offset != 0.0f) for (float& x : w) x += offset;
}

// x += y row by row (n rows of `dim`), y first RMSNorm-ed in place by `post_norm` when the
// layer has one (Gemma 2's post-attention / post-FFN norms).
void add_block_output(std::vector<float>& x, std::vector<float>& y, std::int64_t dim, const std::vector<float>& post_norm,
                      float eps) {
  if (!post_norm.empty()) {
    for (std::size_t i = 0; i < y.size(); i += static_cast<std::size_t>(dim)) rmsnorm(&y[i], post_norm.data(), &y[i], dim, eps);
  }
  for (std::size_t j = 0; j < x.size(); ++j) x[j] += y[j];
}

// Final-logit soft-capping (Gemma 2): z → cap · tanh(z / cap); nothing when cap is 0.
void softcap_logits(std::vector<float>& logits, float cap) {
  if (cap <= 0.0f) return;
  for (float& z : logits) z = cap * std::tanh(z / cap);
}

}  // namespace

/// Activations of one forward, [n_rows, width] row-major f32 each. Every op writes its output
/// rows whole before they are read, so a reused Scratch needs no clearing.
struct LlamaModel::Scratch {
  /// Sizes the buffers for `n` rows of a model of config `c` (allocating only when a batch is
  /// larger than any before) and forgets the previous forward's observer and adapters.
  void reset(const ModelConfig& c, std::int64_t rows) {
    n = rows;
    const auto size = [&](std::vector<float>& buf, std::int64_t width) { buf.resize(static_cast<std::size_t>(n * width)); };
    const bool moe = c.n_experts > 0;
    for (auto* buf : {&x, &xb}) size(*buf, c.dim);
    for (auto* buf : {&q, &attn}) size(*buf, c.n_heads * c.head_dim);
    for (auto* buf : {&k, &v}) size(*buf, c.n_kv_heads * c.head_dim);
    for (auto* buf : {&gate, &up}) size(*buf, moe ? 0 : c.ffn_dim);
    size(moe_out, moe ? c.dim : 0);
    observer = nullptr;
    lora = nullptr;
    lora_slots = {};
  }
  std::int64_t n = 0;
  std::vector<float> x, xb, q, k, v, attn, gate, up, moe_out;
  ActivationObserver* observer = nullptr;
  const LoraSet* lora = nullptr;          // with the rows' slots (Batch::lora_slots)
  std::span<const std::int32_t> lora_slots;

  // Each output y += the LoRA products of layer l's weight ("attn_q", ...) on x, when adapters
  // apply: the weights sharing x in one LoraSet::apply call.
  void adapt(std::int64_t l, std::initializer_list<std::pair<std::string_view, std::span<float>>> outputs,
             std::span<const float> x, ThreadPool& pool) const {
    if (lora == nullptr) return;
    std::vector<LoraTarget> targets;
    for (const auto& [weight, y] : outputs) targets.push_back({layer_tensor_name(l, weight), y});
    lora->apply(targets, x, n, lora_slots, pool);
  }

  // Shows the observer (if any) the input of the linear layers `input` of layer `l`.
  void observe(std::int64_t l, LinearInput input, std::span<const float> a) const {
    if (observer != nullptr) observer->observe(l, input, a, n);
  }
};

/// The Scratch forward after forward reuses: one forward at a time holds it (mu); a forward
/// that finds it held (another thread's, on the same model) sizes its own.
struct LlamaModel::ScratchSlot {
  std::mutex mu;
  Scratch scratch;
};

LlamaModel::LlamaModel(ModelFile file) : file_(std::move(file)), scratch_(std::make_unique<ScratchSlot>()) {}
LlamaModel::LlamaModel(LlamaModel&&) noexcept = default;
LlamaModel& LlamaModel::operator=(LlamaModel&&) noexcept = default;
LlamaModel::~LlamaModel() = default;

Expected<LlamaModel> LlamaModel::create(ModelFile file, WeightPlacement placement) {
  PEREGRINE_RETURN_IF_ERROR(validate_llama_tensors(file));
  LlamaModel m(std::move(file));
  const ModelFile& f = m.file_;
  for (std::int64_t l = 0; l < f.config.n_layers; ++l) {
    m.layer_specs_.push_back(f.config.layer_spec(l));
    m.layers_.push_back(load_layer(f, l, m.layer_specs_.back()));
  }
  if (placement != WeightPlacement::kCuda) PEREGRINE_RETURN_IF_ERROR(m.place_weights(placement));
  m.output_norm_ = to_f32(*f.find("output_norm.weight"));
  add_norm_offset(m.output_norm_, f.config.norm_weight_offset);
  const TensorView* rope_freqs = f.find("rope_freqs.weight");
  if (rope_freqs) {
    m.rope_freq_factors_ = to_f32(*rope_freqs);
  } else if (!rope_scaling_follows_length(f.config.rope_scaling)) {  // else per forward, per sequence
    m.rope_freq_factors_ = rope_freq_factors(f.config.rope_scaling, f.config.head_dim, f.config.rope_theta);
  }
  for (float factor : m.rope_freq_factors_) {
    if (!std::isfinite(factor) || !(factor > 0.0f)) {
      return corrupt_file(f.path + ": rope_freqs.weight holds the RoPE frequency divisor " + std::to_string(factor) +
                          " (each must be positive and finite)");
    }
  }
  m.token_embd_ = f.find("token_embd.weight");
  m.output_ = f.config.tied_embeddings ? m.token_embd_ : f.find("output.weight");
  m.counters_ = std::make_unique<ForwardCounters>(f.config.n_layers, f.config.n_experts);
  m.profile_ = std::make_unique<ForwardProfile>();
  // YaRN and LongRoPE scale RoPE's cos and sin by their attention factor m: q·k by m² (V is
  // not rotated).
  const float m_rope = rope_attention_factor(f.config.rope_scaling);
  const float base = f.config.attn_scale > 0.0f ? f.config.attn_scale : 1.0f / std::sqrt(static_cast<float>(f.config.head_dim));
  m.attention_scale_ = m_rope == 1.0f ? f.config.attn_scale : base * m_rope * m_rope;
  if (placement == WeightPlacement::kCuda) PEREGRINE_RETURN_IF_ERROR(m.create_cuda());
  return m;
}

LlamaModel::Layer LlamaModel::load_layer(const ModelFile& f, std::int64_t l, const LayerSpec& spec) {
  const auto tensor = [&](const char* name) { return f.find(layer_tensor_name(l, name)); };
  const auto norm = [&](const char* name) {  // "blk.L.<name>" with the spec's weight offset
    std::vector<float> w = optional_f32(f, l, name);
    add_norm_offset(w, spec.norm_weight_offset);
    return w;
  };
  Layer layer{norm("attn_norm.weight"), norm("ffn_norm.weight"), tensor("attn_q"), tensor("attn_k"), tensor("attn_v"),
              tensor("attn_output"), tensor("ffn_gate"), tensor("ffn_up"), tensor("ffn_down")};
  if (spec.qkv_bias) {
    layer.bq = optional_f32(f, l, "attn_q.bias");
    layer.bk = optional_f32(f, l, "attn_k.bias");
    layer.bv = optional_f32(f, l, "attn_v.bias");
  }
  if (spec.qk_norm != QkNorm::kNone) {
    layer.q_norm = norm("attn_q_norm.weight");
    layer.k_norm = norm("attn_k_norm.weight");
  }
  if (spec.post_norms) {
    layer.post_attn_norm = norm("post_attention_norm.weight");
    layer.post_ffw_norm = norm("post_ffw_norm.weight");
  }
  if (spec.moe) layer.moe = moe_layer_weights(f, l);
  return layer;
}

Status LlamaModel::create_cuda() {
  const ModelConfig& c = config();
  const char* refused = c.ffn_down_hadamard ? "Hadamard-rotated FFNs" : nullptr;
  for (const LayerSpec& spec : layer_specs_) {
    if (refused != nullptr) break;
    refused = spec.moe                                  ? "Mixture-of-Experts FFNs"
              : spec.activation != FfnActivation::kSilu ? "GeGLU FFNs"
              : spec.qkv_bias                           ? "Q/K/V biases"
              : spec.qk_norm != QkNorm::kNone           ? "Q/K norms"
              : spec.post_norms                         ? "post-attention / post-FFN norms"
                                                        : nullptr;
  }
  if (refused == nullptr && kv_layer_groups(c.kv_shape()).n_groups() > 1) refused = "layers of different attention windows";
  if (refused != nullptr) {
    return unsupported("the CUDA backend does not run " + std::string(refused) + " yet (" + c.arch + " model); use -d cpu");
  }
  CudaModelWeights w;
  for (const Layer& l : layers_) {
    w.layers.push_back({l.wq, l.wk, l.wv, l.wo, l.w_gate, l.w_up, l.w_down, l.attn_norm, l.ffn_norm});
  }
  w.output = output_;
  w.output_norm = output_norm_;
  const float scale = attention_scale_ > 0.0f ? attention_scale_ : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  PEREGRINE_ASSIGN_OR_RETURN(cuda_, CudaForward::create(c, w, scale));
  return Status::ok();
}

namespace {

// Runs job(0 .. n_jobs - 1) on one thread per core, each taking the next job from a shared
// counter (load-time work: copying or packing weights, where each thread's page faults proceed
// in parallel).
void run_on_all_cores(std::size_t n_jobs, const std::function<void(std::size_t)>& job) {
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_jobs;) job(i);
  };
  const std::size_t n_threads = std::min<std::size_t>(n_jobs, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::jthread> helpers;
  for (std::size_t t = 1; t < n_threads; ++t) helpers.emplace_back(work);
  work();
}

}  // namespace

Status LlamaModel::place_weights(WeightPlacement placement) {
  // Q4_0 and Q8_0 are packed for their SIMD GEMV whatever the placement. F16 / BF16 are packed for theirs
  // in huge pages only (in place, e.g. the quantizers' calibration models, they stay in the
  // mapping), and only where their packed copies and their pages of the file both fit in the
  // memory available: their prefill GEMM then reads the file's stored layout, which would
  // otherwise be read back from disk every forward; else they are copied as stored. 2:4 sparse
  // F16 / BF16 are packed for theirs on the same terms (their prefill decodes the stored rows);
  // 2:4 sparse Q8_0 / Q4_0 in huge pages always (their packed GEMV serves prefill too).
  const auto multiplied = [&](const std::string& name, const TensorView& t) {
    return t.shape.size() >= 2 && (name != "token_embd.weight" || file_.config.tied_embeddings);
  };
  const bool pack_quants = quant_packed_gemv_available();
  std::uint64_t half_bytes = 0;
  for (const auto& [name, t] : file_.tensors) {
    half_bytes += multiplied(name, t) && (half_packable(t) || sparse_packable(t)) ? t.nbytes : 0;
  }
  const bool fit_twice = placement == WeightPlacement::kHugePages && 2 * half_bytes <= available_memory_bytes().value_or(0);
  const bool pack_halves = fit_twice && half_packed_gemv_available();
  const bool pack_sparse = fit_twice && sparse_packed_gemv_available();
  const bool pack_sparse_q8s = placement == WeightPlacement::kHugePages && sparse_q8_packed_gemv_available();
  enum class How { kSkip, kCopy, kPackQuant, kPackHalf, kPackSparse, kPackSparseQ8 };
  const auto how = [&](const std::string& name, const TensorView& t) {
    if (!multiplied(name, t)) return How::kSkip;
    if (pack_quants && quant_packable(t)) return How::kPackQuant;
    if (pack_halves && half_packable(t)) return How::kPackHalf;
    if (pack_sparse && sparse_packable(t)) return How::kPackSparse;
    if (pack_sparse_q8s && sparse_q8_packable(t)) return How::kPackSparseQ8;
    return placement == WeightPlacement::kHugePages ? How::kCopy : How::kSkip;
  };
  const auto aligned = [](std::size_t n) { return (n + 63) / 64 * 64; };
  struct Job {
    TensorView* t;
    std::size_t offset;  // in weights_
    How how;
  };
  std::vector<Job> jobs;
  std::size_t total = 0;
  for (auto& [name, t] : file_.tensors) {
    const How h = how(name, t);
    if (h == How::kSkip) continue;
    jobs.push_back({&t, total, h});
    total += aligned(h == How::kPackSparse ? sparse_packed_bytes(t) : t.nbytes);
  }
  PEREGRINE_ASSIGN_OR_RETURN(weights_, HugePageBuffer::allocate(total));
  std::vector<Status> done(jobs.size());
  run_on_all_cores(jobs.size(), [&](std::size_t i) {
    TensorView& t = *jobs[i].t;
    const std::span<std::uint8_t> dst =
        weights_.bytes().subspan(jobs[i].offset, jobs[i].how == How::kPackSparse ? sparse_packed_bytes(t) : t.nbytes);
    switch (jobs[i].how) {
      case How::kPackQuant:
        done[i] = pack_quant(t, dst);
        t.packed = dst.data();
        break;
      case How::kPackHalf:
        done[i] = pack_half(t, dst);
        t.packed = dst.data();
        break;
      case How::kPackSparse:
        done[i] = pack_sparse_nm(t, dst);
        t.packed = dst.data();
        break;
      case How::kPackSparseQ8:
        done[i] = pack_sparse_q8(t, dst);
        t.packed = dst.data();
        break;
      default:
        std::memcpy(dst.data(), t.data, t.nbytes);
        t.data = dst.data();
    }
  });
  for (const Status& st : done) PEREGRINE_RETURN_IF_ERROR(st);
  return Status::ok();
}

namespace {

// Rows of one sequence in a batch: first and last row index, count, any tree row.
struct SeqRows {
  std::int64_t first_row, last_row, n_rows;
  bool tree;
};

// Row i's tree parent batch.parents[i] is -1 or an earlier row of the same sequence.
Status check_parent(const Batch& batch, std::size_t i) {
  const std::int32_t parent = batch.parents[i];
  if (parent < -1 || parent >= static_cast<std::int64_t>(i)) {
    return invalid_argument("forward: row " + std::to_string(i) + " has parent " + std::to_string(parent) +
                            "; a parent must be -1 or an earlier row of the batch");
  }
  if (parent >= 0 && batch.seq_ids[parent] != batch.seq_ids[i]) {
    return invalid_argument("forward: row " + std::to_string(i) + " of sequence " + std::to_string(batch.seq_ids[i]) + " has parent row " +
                            std::to_string(parent) + " of sequence " + std::to_string(batch.seq_ids[parent]));
  }
  return Status::ok();
}

// Row i follows row `prev` (its tree parent, or the previous row of its sequence): one
// position later.
Status check_follows(const Batch& batch, std::size_t i, std::int64_t prev, bool tree_parent) {
  const std::int32_t pos = batch.positions[i], prev_pos = batch.positions[prev];
  if (pos == prev_pos + 1) return Status::ok();
  if (!tree_parent) {
    return invalid_argument("forward: positions of sequence " + std::to_string(batch.seq_ids[i]) + " are not consecutive");
  }
  return invalid_argument("forward: row " + std::to_string(i) + " is at position " + std::to_string(pos) + ", its parent row " +
                          std::to_string(prev) + " at " + std::to_string(prev_pos) + "; a tree node sits one position after its parent");
}

}  // namespace

Status LlamaModel::validate(const Batch& batch, const KvCache& cache) const {
  const std::size_t n = batch.tokens.size();
  if (n == 0) return invalid_argument("forward: empty batch");
  if (batch.positions.size() != n || batch.seq_ids.size() != n || batch.need_logits.size() != n) {
    return invalid_argument("forward: batch arrays have different lengths");
  }
  if (!batch.parents.empty() && batch.parents.size() != n) {
    return invalid_argument("forward: batch.parents has " + std::to_string(batch.parents.size()) + " entries for " + std::to_string(n) +
                            " rows (it must be empty or hold one per row)");
  }
  if (cache.kv_dim() != config().n_kv_heads * config().head_dim) {
    return invalid_argument("forward: the KV cache rows hold " + std::to_string(cache.kv_dim()) +
                            " values, the model's K/V rows " + std::to_string(config().n_kv_heads * config().head_dim));
  }
  std::map<std::int32_t, SeqRows> seqs;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t tok = batch.tokens[i], pos = batch.positions[i], seq = batch.seq_ids[i];
    if (tok < 0 || tok >= config().vocab_size) {
      return out_of_range("token id " + std::to_string(tok) + " is outside the vocabulary (size " +
                          std::to_string(config().vocab_size) + ")");
    }
    if (pos < 0 || pos >= config().max_seq_len) {
      return out_of_range("position " + std::to_string(pos) + " is outside the model's context (" +
                          std::to_string(config().max_seq_len) + " tokens)");
    }
    const auto row = static_cast<std::int64_t>(i);
    auto [it, first] = seqs.emplace(seq, SeqRows{row, row, 0, false});
    SeqRows& rows = it->second;
    const std::int32_t parent = batch.parents.empty() ? -1 : batch.parents[i];
    if (!batch.parents.empty()) PEREGRINE_RETURN_IF_ERROR(check_parent(batch, i));
    if (parent >= 0 || !first) PEREGRINE_RETURN_IF_ERROR(check_follows(batch, i, parent >= 0 ? parent : rows.last_row, parent >= 0));
    rows.tree = rows.tree || parent >= 0;
    rows.last_row = row;
    ++rows.n_rows;
  }
  for (const auto& [seq, rows] : seqs) {
    if (rows.tree && rows.last_row - rows.first_row + 1 != rows.n_rows) {
      return invalid_argument("forward: the rows of sequence " + std::to_string(seq) +
                              " form a token tree and must be contiguous in the batch");
    }
  }
  return Status::ok();
}

namespace {

// The ancestor-or-self mask [n, n] (n = end - begin) of the run rows [begin, end) of a
// validated batch, as attention_prefill takes it: a row's parent is parents[r] when >= 0, else
// the row before it. Empty when the run is a chain (the causal mask).
std::vector<std::uint8_t> tree_mask(const Batch& batch, std::int64_t begin, std::int64_t end) {
  if (batch.parents.empty()) return {};
  const std::int64_t n = end - begin;
  auto parent = [&](std::int64_t i) {  // run-relative, for i >= 1
    const std::int32_t p = batch.parents[begin + i];
    return p >= 0 ? p - begin : i - 1;
  };
  bool chain = true;
  for (std::int64_t i = 1; i < n && chain; ++i) chain = parent(i) == i - 1;
  if (chain) return {};
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n * n), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint8_t* row = &mask[i * n];
    if (i > 0) std::copy_n(&mask[parent(i) * n], parent(i) + 1, row);
    row[i] = 1;
  }
  return mask;
}

}  // namespace

/// Where forward puts a validated batch: the KV cache slot of every row (a sequence's rows at
/// consecutive slots from its first row's position; equal to the positions unless the batch
/// holds a token tree), its attention runs and their RoPE divisors.
struct LlamaModel::BatchLayout {
  /// Rows [begin, end) of one sequence, contiguous in the batch, at slots [slot0, slot0 +
  /// end - begin); `mask` is the run's tree mask for attention_prefill, empty when causal;
  /// `rope_factors` its sequence's RoPE divisors [head_dim / 2] under length-dependent scaling
  /// (set by add_rope_factors), empty when the model's static rope_freq_factors_ apply.
  struct Run {
    std::int64_t begin, end;
    std::int32_t seq;
    std::int64_t slot0;
    std::vector<std::uint8_t> mask;
    std::vector<float> rope_factors = {};
  };
  std::vector<std::int32_t> slots;  // [n]
  std::vector<Run> runs;            // in batch order
};

LlamaModel::BatchLayout LlamaModel::layout(const Batch& batch) {
  BatchLayout out;
  const std::int64_t n = batch.size();
  out.slots.resize(static_cast<std::size_t>(n));
  std::map<std::int32_t, std::int32_t> next_slot;  // per sequence
  for (std::int64_t i = 0; i < n; ++i) out.slots[i] = next_slot.emplace(batch.seq_ids[i], batch.positions[i]).first->second++;
  for (std::int64_t i = 0, end; i < n; i = end) {
    const std::int32_t seq = batch.seq_ids[i];
    for (end = i + 1; end < n && batch.seq_ids[end] == seq; ++end) {}
    out.runs.push_back({i, end, seq, out.slots[i], tree_mask(batch, i, end)});
  }
  return out;
}

void LlamaModel::add_rope_factors(const Batch& batch, BatchLayout& layout) const {
  const ModelConfig& c = config();
  if (!rope_scaling_follows_length(c.rope_scaling)) return;
  std::map<std::int32_t, std::int64_t> seq_len;  // the sequence's largest position in the batch + 1
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    std::int64_t& len = seq_len[batch.seq_ids[i]];
    len = std::max<std::int64_t>(len, batch.positions[i] + 1);
  }
  for (BatchLayout::Run& run : layout.runs) {
    run.rope_factors = rope_freq_factors(c.rope_scaling, c.head_dim, c.rope_theta, seq_len[run.seq]);
  }
}

void LlamaModel::embed(const Batch& batch, std::span<float> x) const {
  const ForwardOpTimer timed = timer(ForwardOp::kEmbedding);
  const std::int64_t dim = config().dim;
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    dequantize_row(*token_embd_, batch.tokens[i], x.subspan(static_cast<std::size_t>(i * dim), static_cast<std::size_t>(dim)));
  }
  if (config().embed_scale > 0.0f) {
    for (float& v : x) v *= config().embed_scale;
  }
}

void LlamaModel::norm_rows(const std::vector<float>& weight, Scratch& s) const {
  const ForwardOpTimer timed = timer(ForwardOp::kNorm);
  const std::int64_t dim = config().dim;
  for (std::int64_t i = 0; i < s.n; ++i) rmsnorm(&s.x[i * dim], weight.data(), &s.xb[i * dim], dim, config().rms_eps);
}

void LlamaModel::add_residual(std::vector<float>& block_out, const std::vector<float>& post_norm, Scratch& s) const {
  const ForwardOpTimer timed = timer(ForwardOp::kNorm);
  add_block_output(s.x, block_out, config().dim, post_norm, config().rms_eps);
}

void LlamaModel::qkv_projection(const Layer& layer, std::int64_t l, Scratch& s, ThreadPool& pool) const {
  const ForwardOpTimer timed = timer(ForwardOp::kQkvProjection);
  const std::int64_t n = s.n;
  linear_fused({{{layer.wq, s.xb, s.q}, {layer.wk, s.xb, s.k}, {layer.wv, s.xb, s.v}}}, n, pool);
  s.adapt(l, {{"attn_q", s.q}, {"attn_k", s.k}, {"attn_v", s.v}}, s.xb, pool);
  const LayerSpec& spec = layer_specs_[static_cast<std::size_t>(l)];
  if (spec.qkv_bias) {
    add_bias(s.q, n, layer.bq);
    add_bias(s.k, n, layer.bk);
    add_bias(s.v, n, layer.bv);
  }
  if (spec.qk_norm == QkNorm::kWhole && tp_ != nullptr && tp_->size() > 1) {
    split_qk_norm(layer, s);
  } else if (spec.qk_norm != QkNorm::kNone) {
    group_rmsnorm(s.q, layer.q_norm, config().rms_eps);
    group_rmsnorm(s.k, layer.k_norm, config().rms_eps);
  }
}

void LlamaModel::split_qk_norm(const Layer& layer, Scratch& s) const {
  // This rank holds 1/N of each row of q and k: the RMS over the whole projection needs every
  // rank's sum of squares (one all-reduce for the q and k sums of every row together).
  const std::int64_t n = s.n, ranks = tp_->size();
  const auto q_width = static_cast<std::int64_t>(layer.q_norm.size()), k_width = static_cast<std::int64_t>(layer.k_norm.size());
  std::vector<float> sums(static_cast<std::size_t>(2 * n), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < q_width; ++j) sums[i] += s.q[i * q_width + j] * s.q[i * q_width + j];
    for (std::int64_t j = 0; j < k_width; ++j) sums[n + i] += s.k[i * k_width + j] * s.k[i * k_width + j];
  }
  all_reduce(sums);
  const auto scale_rows = [&](std::vector<float>& x, const std::vector<float>& w, const float* ss) {
    const auto width = static_cast<std::int64_t>(w.size());
    for (std::int64_t i = 0; i < n; ++i) {
      const float inv = 1.0f / std::sqrt(ss[i] / static_cast<float>(width * ranks) + config().rms_eps);
      for (std::int64_t j = 0; j < width; ++j) x[i * width + j] *= inv * w[j];
    }
  };
  scale_rows(s.q, layer.q_norm, sums.data());
  scale_rows(s.k, layer.k_norm, sums.data() + n);
}

void LlamaModel::rope_and_cache(std::int64_t l, const Batch& batch, const BatchLayout& layout, KvCache& cache,
                                Scratch& s) const {
  const ForwardOpTimer timed = timer(ForwardOp::kRopeKvWrite);
  const ModelConfig& c = config();
  const std::int64_t hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd;
  const LayerSpec& spec = layer_specs_[static_cast<std::size_t>(l)];
  std::vector<float> rope_cos(static_cast<std::size_t>(hd)), rope_sin(rope_cos.size());
  for (const BatchLayout::Run& run : layout.runs) {
    const std::vector<float>& scaled = run.rope_factors.empty() ? rope_freq_factors_ : run.rope_factors;
    const float* divisors = spec.rope_scaled && !scaled.empty() ? scaled.data() : nullptr;
    for (std::int64_t i = run.begin; i < run.end; ++i) {
      rope_table(batch.positions[i], hd, spec.rope_theta, c.rope_style, rope_cos.data(), rope_sin.data(), divisors);
      rope_rotate(&s.q[i * q_dim], c.n_heads, hd, rope_cos.data(), rope_sin.data(), c.rope_style);
      rope_rotate(&s.k[i * kv_dim], c.n_kv_heads, hd, rope_cos.data(), rope_sin.data(), c.rope_style);
      cache.write(batch.seq_ids[i], l, layout.slots[i], &s.k[i * kv_dim], &s.v[i * kv_dim]);
    }
  }
}

void LlamaModel::attend(std::int64_t l, const BatchLayout& layout, const KvCache& cache, Scratch& s,
                        ThreadPool& pool) const {
  const ForwardOpTimer timed = timer(ForwardOp::kAttention);
  const ModelConfig& c = config();
  const std::int64_t q_dim = c.n_heads * c.head_dim;
  // A prompt chunk or a large token tree takes the tiled prefill kernel (causal or
  // tree-masked), a lone row (decode) the split-K one, and a short run (a speculative
  // verification chain or small tree, a short prompt suffix) the split-K one row by row, a tree
  // row over its ancestors laid out as a chain (chain_view): the arithmetic of one-row decode
  // steps, so verification reproduces plain decoding bit for bit (kRowsAsDecode).
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, layer_specs_[static_cast<std::size_t>(l)].window,
                             c.attn_softcap, attention_scale_};
  std::vector<std::uint8_t> k_rows, v_rows;
  std::vector<std::int32_t> path;
  for (const BatchLayout::Run& run : layout.runs) {
    const KvLayerView k = cache.k_view(run.seq, l), v = cache.v_view(run.seq, l);
    const std::int64_t n = run.end - run.begin;
    const float* q = &s.q[run.begin * q_dim];
    float* out = &s.attn[run.begin * q_dim];
    if (n > kRowsAsDecode) {
      attention_prefill(q, k, v, run.slot0, n, shape, out, pool, kMinParallelAttentionMacs,
                        run.mask.empty() ? nullptr : run.mask.data());
      continue;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      if (run.mask.empty()) {
        attention_decode(q + i * q_dim, k, v, run.slot0 + i + 1, shape, out + i * q_dim, pool);
        continue;
      }
      path.clear();
      for (std::int32_t j = 0; j <= i; ++j) {
        if (run.mask[static_cast<std::size_t>(i * n + j)] != 0) path.push_back(j);
      }
      const std::int64_t n_ctx = run.slot0 + static_cast<std::int64_t>(path.size());
      attention_decode(q + i * q_dim, chain_view(k, run.slot0, path, k_rows), chain_view(v, run.slot0, path, v_rows), n_ctx,
                       shape, out + i * q_dim, pool);
    }
  }
}

void LlamaModel::attention_block(const Layer& layer, std::int64_t l, const Batch& batch,
                                 const BatchLayout& layout, KvCache& cache, Scratch& s,
                                 ThreadPool& pool) const {
  norm_rows(layer.attn_norm, s);
  s.observe(l, LinearInput::kAttention, s.xb);
  qkv_projection(layer, l, s, pool);
  rope_and_cache(l, batch, layout, cache, s);
  attend(l, layout, cache, s, pool);
  s.observe(l, LinearInput::kAttentionOutput, s.attn);
  {
    const ForwardOpTimer timed = timer(ForwardOp::kOutputProjection);
    linear(*layer.wo, s.attn, s.n, s.xb, pool);
    s.adapt(l, {{"attn_output", s.xb}}, s.attn, pool);
  }
  all_reduce(s.xb);
  add_residual(s.xb, layer.post_attn_norm, s);
}

void LlamaModel::ffn_block(const Layer& layer, std::int64_t l, Scratch& s, ThreadPool& pool) const {
  const bool moe = layer_specs_[static_cast<std::size_t>(l)].moe;
  norm_rows(layer.ffn_norm, s);
  s.observe(l, LinearInput::kFfn, s.xb);
  if (moe) {
    const ForwardOpTimer timed = timer(ForwardOp::kMoeFfn);
    moe_ffn(layer.moe, s.xb, s.n, s.moe_out, pool, counters_.get(), l);
  } else {
    dense_ffn(layer, l, s, pool);
  }
  std::vector<float>& out = moe ? s.moe_out : s.xb;
  all_reduce(out);
  add_residual(out, layer.post_ffw_norm, s);
}

void LlamaModel::dense_ffn(const Layer& layer, std::int64_t l, Scratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config();
  {
    const ForwardOpTimer timed = timer(ForwardOp::kFfnGateUp);
    linear_fused({{{layer.w_gate, s.xb, s.gate}, {layer.w_up, s.xb, s.up}}}, s.n, pool);
    s.adapt(l, {{"ffn_gate", s.gate}, {"ffn_up", s.up}}, s.xb, pool);
  }
  {
    const ForwardOpTimer timed = timer(ForwardOp::kActivation);
    gated_activation(layer_specs_[static_cast<std::size_t>(l)].activation, s.gate.data(), s.up.data(),
                     static_cast<std::int64_t>(s.gate.size()));
    if (c.ffn_down_hadamard) hadamard_transform(s.gate.data(), s.n, c.ffn_dim);
  }
  s.observe(l, LinearInput::kFfnDown, s.gate);
  const ForwardOpTimer timed = timer(ForwardOp::kFfnDown);
  linear(*layer.w_down, s.gate, s.n, s.xb, pool);
  s.adapt(l, {{"ffn_down", s.xb}}, s.gate, pool);
}

void LlamaModel::linear(const TensorView& w, std::span<const float> x, std::int64_t n, std::span<float> y,
                        ThreadPool& pool) const {
  matmul(w, x, n, y, pool);
  counters_->add_weight_bytes(w.nbytes);
}

void LlamaModel::linear_fused(std::span<const MatmulProduct> products, std::int64_t n, ThreadPool& pool) const {
  matmul_fused(products, n, pool);
  for (const MatmulProduct& p : products) counters_->add_weight_bytes(p.w->nbytes);
}

void LlamaModel::all_reduce(std::vector<float>& partial) const {
  if (tp_ == nullptr || tp_->size() == 1) return;
  const ForwardOpTimer timed = timer(ForwardOp::kAllReduce);
  tp_->all_reduce_sum(partial);
}

Status LlamaModel::set_tensor_parallel(std::shared_ptr<TensorParallelGroup> group) {
  if (cuda_ != nullptr) return unsupported("tensor parallelism does not run on the CUDA backend yet");
  tp_ = std::move(group);
  return Status::ok();
}

Status LlamaModel::set_pipeline_stage(std::shared_ptr<PipelineStageLink> link) {
  if (cuda_ != nullptr) return unsupported("pipeline parallelism does not run on the CUDA backend yet");
  pp_ = std::move(link);
  return Status::ok();
}

Status LlamaModel::set_pipeline_micro_batches(std::int64_t n) {
  if (n < 0) return invalid_argument("pipeline micro-batches must be >= 0 (got " + std::to_string(n) + ")");
  pp_micro_batches_ = n;
  return Status::ok();
}

void LlamaModel::lm_head(const Batch& batch, Scratch& s, std::vector<float>& logits,
                         ThreadPool& pool) const {
  const ForwardOpTimer timed = timer(ForwardOp::kLmHead);
  const std::int64_t dim = config().dim, n_out = batch.n_logits();
  std::vector<float> normed(static_cast<std::size_t>(n_out * dim));
  std::int64_t r = 0;
  for (std::int64_t i = 0; i < s.n; ++i) {
    if (!batch.need_logits[i]) continue;
    std::copy_n(&s.x[i * dim], dim, &normed[r++ * dim]);
  }
  output_norm(normed, normed);
  logits.resize(static_cast<std::size_t>(n_out * config().vocab_size));
  linear(*output_, normed, n_out, logits, pool);
  softcap_logits(logits, config().final_softcap);
}

void LlamaModel::output_norm(std::span<const float> h, std::span<float> out) const {
  const std::int64_t dim = config().dim, rows = static_cast<std::int64_t>(h.size()) / dim;
  for (std::int64_t i = 0; i < rows; ++i) rmsnorm(&h[i * dim], output_norm_.data(), &out[i * dim], dim, config().rms_eps);
}

Status LlamaModel::forward(const Batch& batch, KvCache& cache, std::vector<float>& logits,
                           ThreadPool& pool, std::int64_t n_layers, ActivationObserver* observer, const LoraSet* lora) const {
  const auto n_total = static_cast<std::int64_t>(layers_.size());
  if (n_layers < 0 || n_layers > n_total) {
    return invalid_argument("forward: n_layers " + std::to_string(n_layers) + " is outside [0, " + std::to_string(n_total) + "]");
  }
  if (n_layers == 0) n_layers = n_total;
  if (cache.n_layers() < n_layers) {
    return invalid_argument("forward: the KV cache has " + std::to_string(cache.n_layers()) + " layers, the forward runs " +
                            std::to_string(n_layers));
  }
  if (pp_ != nullptr && pp_->n_stages() > 1 && n_layers != n_total) {
    return unsupported("forward: a pipeline stage runs its own layers only (no layer-skip drafting)");
  }
  if (cuda_ != nullptr && (observer != nullptr || !batch.parents.empty() || lora != nullptr)) {
    return unsupported("forward: the CUDA backend does not run token trees, calibration observers or LoRA adapters yet");
  }
  if (lora != nullptr && config().ffn_down_hadamard) {
    return unsupported("forward: LoRA adapters on a Hadamard-rotated model are not supported (merge them before rotating)");
  }
  if (!batch.lora_slots.empty()) {
    if (batch.lora_slots.size() != batch.tokens.size()) return invalid_argument("forward: batch.lora_slots must be empty or one per row");
    const std::int32_t n_slots = lora != nullptr ? lora->n_slots() : 0;
    for (std::int32_t slot : batch.lora_slots) {
      if (slot < -1 || slot >= n_slots) {
        return invalid_argument("forward: LoRA slot " + std::to_string(slot) + " is outside [-1, " + std::to_string(n_slots) + ")");
      }
    }
  }
  const ForwardOpTimer timed = timer(ForwardOp::kForward);
  const ThreadPool::WarmScope warm(pool);  // workers spin between this forward's ops
  PEREGRINE_RETURN_IF_ERROR(validate(batch, cache));
  BatchLayout rows = layout(batch);
  add_rope_factors(batch, rows);
  if (!batch.kv_planned) {
    PEREGRINE_RETURN_IF_ERROR(reserve_batch_kv(batch, cache));
  } else if (!batch_kv_covered(batch, cache)) {
    return Status(ErrorCode::kInternal, "forward: a planned batch's KV slots are not reserved in the cache");
  }
  if (cuda_ != nullptr) {
    PEREGRINE_RETURN_IF_ERROR(forward_cuda(batch, rows, cache, logits, n_layers));
  } else if (pp_ != nullptr && pp_->n_stages() > 1) {
    forward_pipelined(batch, cache, logits, pool, n_layers, observer, lora);
  } else {
    forward_cpu(batch, rows, cache, logits, pool, n_layers, observer, batch.lora_slots.empty() ? nullptr : lora);
  }
  return Status::ok();
}

void LlamaModel::forward_cpu(const Batch& batch, const BatchLayout& rows, KvCache& cache, std::vector<float>& logits,
                             ThreadPool& pool, std::int64_t n_layers, ActivationObserver* observer, const LoraSet* lora) const {
  std::unique_lock reuse(scratch_->mu, std::try_to_lock);
  Scratch own;
  Scratch& s = reuse.owns_lock() ? scratch_->scratch : own;
  s.reset(config(), batch.size());
  s.observer = observer;
  s.lora = lora;
  s.lora_slots = batch.lora_slots;
  const bool first_stage = pp_ == nullptr || pp_->stage() == 0;
  const bool last_stage = pp_ == nullptr || pp_->stage() == pp_->n_stages() - 1;
  if (first_stage) {
    embed(batch, s.x);
  } else {
    pp_->recv_hidden(s.x);
  }
  for (std::int64_t l = 0; l < n_layers; ++l) {
    const Layer& layer = layers_[static_cast<std::size_t>(l)];
    if (observer != nullptr) observer->observe_hidden(l, s.x, batch.size());
    attention_block(layer, l, batch, rows, cache, s, pool);
    ffn_block(layer, l, s, pool);
  }
  if (observer != nullptr) observer->observe_hidden(n_layers, s.x, batch.size());
  if (last_stage) {
    lm_head(batch, s, logits, pool);
  } else {
    pp_->send_hidden(s.x);
    logits.resize(static_cast<std::size_t>(batch.n_logits() * config().vocab_size));
  }
}

Status LlamaModel::forward_layers(const Batch& batch, KvCache& cache, std::span<float> x, std::int64_t first,
                                  std::int64_t last, ThreadPool& pool, ActivationObserver* observer) const {
  if (cuda_ != nullptr || (pp_ != nullptr && pp_->n_stages() > 1)) {
    return unsupported("forward_layers: runs the layers of a whole model on the CPU only");
  }
  if (first < 0 || last <= first || last > static_cast<std::int64_t>(layers_.size())) {
    return invalid_argument("forward_layers: layers [" + std::to_string(first) + ", " + std::to_string(last) + ") are outside [0, " +
                            std::to_string(layers_.size()) + ")");
  }
  if (static_cast<std::int64_t>(x.size()) != batch.size() * config().dim) {
    return invalid_argument("forward_layers: x holds " + std::to_string(x.size()) + " values, not " +
                            std::to_string(batch.size()) + " rows of " + std::to_string(config().dim));
  }
  PEREGRINE_RETURN_IF_ERROR(validate(batch, cache));
  BatchLayout rows = layout(batch);
  add_rope_factors(batch, rows);
  if (!batch.kv_planned) PEREGRINE_RETURN_IF_ERROR(reserve_batch_kv(batch, cache));
  const ThreadPool::WarmScope warm(pool);
  Scratch s;
  s.reset(config(), batch.size());
  s.observer = observer;
  if (first == 0) {
    embed(batch, s.x);
  } else {
    std::copy(x.begin(), x.end(), s.x.begin());
  }
  for (std::int64_t l = first; l < last; ++l) {
    if (observer != nullptr) observer->observe_hidden(l, s.x, batch.size());
    attention_block(layers_[static_cast<std::size_t>(l)], l, batch, rows, cache, s, pool);
    ffn_block(layers_[static_cast<std::size_t>(l)], l, s, pool);
  }
  std::copy(s.x.begin(), s.x.end(), x.begin());
  return Status::ok();
}

void LlamaModel::forward_pipelined(const Batch& batch, KvCache& cache, std::vector<float>& logits, ThreadPool& pool,
                                   std::int64_t n_layers, ActivationObserver* observer, const LoraSet* lora) const {
  logits.clear();
  std::vector<float> part_logits;
  // An observer sees every row of a forward at once (activation_observer.h): no micro-batches.
  const std::int64_t parts = observer != nullptr ? 1 : pp_micro_batches_ > 0 ? pp_micro_batches_ : pp_->n_stages();
  for (const Batch& part : split_micro_batches(batch, parts)) {
    BatchLayout rows = layout(part);
    add_rope_factors(part, rows);
    forward_cpu(part, rows, cache, part_logits, pool, n_layers, observer, part.lora_slots.empty() ? nullptr : lora);
    logits.insert(logits.end(), part_logits.begin(), part_logits.end());
  }
  pp_->broadcast_logits(logits);
}

Status LlamaModel::forward_cuda(const Batch& batch, const BatchLayout& rows, KvCache& cache, std::vector<float>& logits,
                                std::int64_t n_layers) const {
  const ModelConfig& c = config();
  const std::int64_t n = batch.size(), hd = c.head_dim;
  std::vector<float> x(static_cast<std::size_t>(n * c.dim)), cos(static_cast<std::size_t>(n * hd)), sin(cos.size());
  embed(batch, x);
  std::vector<std::int32_t> slot(rows.slots), table_offset(static_cast<std::size_t>(n)), tables, logit_rows;
  for (const BatchLayout::Run& run : rows.runs) {
    const std::vector<float>& divisors = run.rope_factors.empty() ? rope_freq_factors_ : run.rope_factors;
    const std::span<const std::int32_t> table = cache.block_table(run.seq);
    const auto offset = static_cast<std::int32_t>(tables.size());
    tables.insert(tables.end(), table.begin(), table.end());
    for (std::int64_t i = run.begin; i < run.end; ++i) {
      rope_table(batch.positions[i], hd, c.rope_theta, c.rope_style, &cos[i * hd], &sin[i * hd],
                 divisors.empty() ? nullptr : divisors.data());
      table_offset[i] = offset;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (batch.need_logits[i]) logit_rows.push_back(static_cast<std::int32_t>(i));
  }
  counters_->add_weight_bytes(cuda_->weight_bytes());  // every matrix is read once per forward
  PEREGRINE_RETURN_IF_ERROR(cuda_->forward({n, x, cos, sin, slot, table_offset, tables, logit_rows}, cache, n_layers, logits));
  softcap_logits(logits, c.final_softcap);
  return Status::ok();
}

}  // namespace peregrine
