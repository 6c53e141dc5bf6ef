// The Llama-family decoder (Touvron et al. 2023): token embedding, n_layers × [RMSNorm →
// attention with RoPE and GQA → residual, RMSNorm → SwiGLU FFN → residual], final RMSNorm,
// LM head (tied to the embedding or separate). One forward over a ragged Batch for every family
// of model/spec/architecture.h: what a family adds is tensors the forward applies where present —
// Q/K/V biases after the projections (Qwen2, modeling_qwen2.py), an RMSNorm of q and k before
// RoPE (per head: Qwen3, modeling_qwen3.py; whole projection: OLMoE, modeling_olmoe.py),
// RMSNorms of the attention and FFN outputs before their residual adds (Gemma 2,
// modeling_gemma2.py), a Mixture-of-Experts FFN in place of the dense one (Mixtral, Qwen2-MoE,
// OLMoE; model/moe_ffn.h) — and the ModelConfig fields it applies where set: the embedding
// scale, the RMSNorm weight offset, the FFN activation (SwiGLU or GeGLU), each layer's sliding
// window (ModelConfig::layer_window; Mistral, Gemma 2's local layers), the attention score scale
// and soft-cap, and the final-logit soft-cap.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "peregrine/backend/cuda_forward.h"
#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/activation_observer.h"
#include "peregrine/model/batch.h"
#include "peregrine/model/forward_counters.h"
#include "peregrine/model/forward_profile.h"
#include "peregrine/model/lora_set.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/core/huge_page_buffer.h"
#include "peregrine/model/moe_ffn.h"
#include "peregrine/model/pipeline_parallel.h"
#include "peregrine/model/tensor_parallel.h"

namespace peregrine {

/// Where LlamaModel::create keeps the weight matrices the forward streams.
enum class WeightPlacement {
  /// Copied once into one HugePageBuffer (2 MiB transparent huge pages) by one thread per
  /// core: decode reads them with a TLB miss per 2 MiB instead of per 4 KiB (the default;
  /// costs their bytes in anonymous memory and, at load, the copy and the kernel's zeroing of
  /// fresh pages: tinyllama F16, 2.2 GB, loads in 0.4–2.5 s on the 2-core VM of README's
  /// measurements, against 0.2–0.3 s in place).
  kHugePages,
  /// Read in place from the ModelFile's storage (the file mapping: pages shared with the page
  /// cache, reclaimable, faulted in on first use), as `--mmap` asks.
  kInPlace,
  /// Uploaded to the GPU (backend/cuda_forward.h): the decoder layers and the LM head run
  /// there; the host keeps the file mapping for the embedding lookup. Dense Llama-family
  /// models with SwiGLU only (LlamaModel::create says which feature it refuses).
  kCuda,
};

class LlamaModel {
 public:
  /// Takes ownership of a validated ModelFile. Weights stay in their stored dtype (matmul
  /// decodes rows on the fly), placed as `placement` says; norm weights are converted to f32.
  /// RoPE: scaled by the file's rope_freqs.weight divisors when it has one (llama.cpp's Llama
  /// 3.1+ GGUFs), else by config().rope_scaling (model/spec/rope_scaling.h; YaRN's and LongRoPE's
  /// attention factor m, which multiplies cos and sin, is applied as m² on the attention
  /// scores).
  /// Errors: those of validate_llama_tensors; kCorruptFile (a rope_freqs.weight divisor that is
  /// not positive and finite).
  /// kResourceExhausted when the weights' huge-page buffer cannot be mapped.
  /// kCuda: kUnsupported for a model part 1 of the CUDA backend does not run (MoE, GeGLU,
  /// Q/K/V biases, Q/K norms, post norms, Hadamard-rotated FFN), and CudaForward::create's
  /// errors (kUnavailable without a CUDA build or device).
  static Expected<LlamaModel> create(ModelFile file, WeightPlacement placement = WeightPlacement::kHugePages);

  // Layers hold pointers into file_.tensors: movable (std::map nodes keep their addresses),
  // not copyable.
  LlamaModel(LlamaModel&&) noexcept;
  LlamaModel& operator=(LlamaModel&&) noexcept;
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  const ModelConfig& config() const { return file_.config; }
  /// Whether the layers run on the GPU (created with WeightPlacement::kCuda).
  bool on_cuda() const { return cuda_ != nullptr; }
  /// Weight bytes read and tokens per expert since creation (model/forward_counters.h).
  const ForwardCounters& counters() const { return *counters_; }
  /// Time per op kind of the forwards run while profile().enabled() (model/forward_profile.h):
  /// a measuring instrument, switched and read from any thread, hence mutable through const.
  ForwardProfile& profile() const { return *profile_; }
  const ModelFile& file() const { return file_; }

  /// Runs the decoder over `batch`, writing each row's K/V into the paged `cache`, and writes
  /// logits [batch.n_logits(), vocab_size] f32 (rows in batch order) into `logits` (resized).
  /// KV slots: a sequence's rows go to consecutive cache slots starting at its first row's
  /// position, in row order (for plain rows slot = position); RoPE uses the rows' positions,
  /// and under length-dependent scaling (LongRoPE, dynamic NTK) the divisors of each sequence's
  /// largest position in this batch + 1 (model/spec/rope_scaling.h: HF's seq_len per sequence).
  /// A planned batch (Batch::kv_planned: the cache's owner ran plan_batch_kv,
  /// model/batch_kv_plan.h) only has its rows written; an unplanned one is planned here first
  /// (reserve_batch_kv: blocks reserved, a tail the rows rewrite truncated, and
  /// cache.length(seq) = first position + its rows).
  /// Attention: a plain run is causal; a sequence with token-tree rows (batch.parents, SpecInfer
  /// tree attention, Miao et al. 2024) sees its cached slots before its first row fully and,
  /// among its own rows, only each row's ancestors and itself (one masked prefill-kernel call per
  /// sequence; the caller keeps an accepted path with KvCache::compact). Sequence ids are any
  /// int32; a new one starts at position 0. Errors (the cache is left unchanged, except after
  /// a kUnavailable CUDA error):
  /// kInvalidArgument (empty batch, mismatched array lengths, parents neither empty nor one per
  /// row, a cache built for another K/V width, a plain row not one position after the previous
  /// row of its sequence, a sequence's first row past cache.length(seq), a parent that is not an
  /// earlier row of the same sequence, a tree row not one position after its parent, the rows
  /// of a sequence with tree rows not contiguous in the batch), kOutOfRange (token id outside
  /// the vocabulary, position >= config().max_seq_len), kResourceExhausted (the batch needs
  /// more KV blocks than are free), kInternal (a planned batch whose slots the cache lacks).
  /// `n_layers` > 0 runs only the first n_layers decoder layers before the final norm and LM
  /// head (layer-skip self-drafting, as in Draft & Verify, Zhang et al. 2024 / LayerSkip,
  /// Elhoushi et al. 2024); the cache then needs only that many layers (kInvalidArgument if
  /// it has fewer, or n_layers > config().n_layers).
  /// `observer`, when given, sees the input of every linear layer of the layers run
  /// (model/activation_observer.h; calibration for quantization).
  /// With config().ffn_down_hadamard the SwiGLU output is rotated by kernels/cpu/elementwise/hadamard.h's
  /// transform before ffn_down (whose weights were rotated to match, quant/rotate_model.h).
  /// On a kCuda model the layers run on the GPU (backend/cuda_forward.h); it refuses token-tree
  /// batches and an `observer` (kUnsupported) and returns kUnavailable on a CUDA error.
  /// Gemma 2 (model/spec/architecture.h): x = embedding · embed_scale; per layer x += post_attn_norm(
  /// attention(attn_norm(x))), x += post_ffw_norm(GeGLU FFN(ffn_norm(x))), every norm weight
  /// w applied as (norm_weight_offset + w); logits → final_softcap · tanh(logits /
  /// final_softcap). A local layer's rows see the last sliding_window positions only (the
  /// engine's scheduler frees the KV blocks that left the window: KvCache::release_behind_window).
  /// `lora`, when given, is applied unmerged to the rows whose Batch::lora_slots name one of
  /// its slots (model/lora_set.h: the attention and dense FFN projections the adapters cover;
  /// kInvalidArgument for lora_slots neither empty nor one per row, or a slot outside
  /// [-1, lora->n_slots()); kUnsupported on a kCuda model).
  Status forward(const Batch& batch, KvCache& cache, std::vector<float>& logits, ThreadPool& pool,
                 std::int64_t n_layers = 0, ActivationObserver* observer = nullptr, const LoraSet* lora = nullptr) const;

  /// Makes this model rank group->rank() of a tensor-parallel group (model/tensor_parallel.h):
  /// its file must be shard_model_file(full, group->rank(), group->size()); every forward then
  /// all-reduces the attention output and FFN partial sums over the group (collective: every
  /// rank runs the same forwards, each with its own KV cache of its KV heads; LoRA adapters
  /// must be the rank's shard_lora_adapter parts). Errors: kUnsupported on a kCuda model.
  Status set_tensor_parallel(std::shared_ptr<TensorParallelGroup> group);
  /// The group set by set_tensor_parallel, or null (one process).
  const TensorParallelGroup* tensor_parallel() const { return tp_.get(); }

  /// Makes this model stage link->stage() of a pipeline (model/pipeline_parallel.h): its file
  /// must be shard_pipeline_stage(full, stage, n_stages) (then, with tensor parallelism too,
  /// that stage's shard_model_file). Every forward then takes the residual stream from the
  /// previous stage instead of embedding (stages > 0), hands it to the next instead of running
  /// the LM head (stages < last), and ends with the last stage's logits on every stage
  /// (collective: every stage runs the same forwards). Forward refuses n_layers > 0 (layer-skip
  /// drafting) on a pipeline stage (kUnsupported). Errors: kUnsupported on a kCuda model.
  Status set_pipeline_stage(std::shared_ptr<PipelineStageLink> link);
  /// Micro-batches per forward of a pipeline stage (model/micro_batches.h: a batch of several
  /// sequences is cut into up to `n` parts that follow each other through the stages, so that
  /// the stages overlap; the logits are broadcast once, after the last). Every stage must use
  /// the same n; 0 (the default) means as many as there are stages (measured best for 2 stages:
  /// README, "Across processes"). Errors: kInvalidArgument for n < 0.
  Status set_pipeline_micro_batches(std::int64_t n);

  /// Layers [first, last) of the CPU forward of `batch` on the residual stream `x` [batch.size(),
  /// dim] f32, in place: `x` enters layer `first` (first == 0: `x` is ignored and the batch is
  /// embedded) and leaves layer last - 1. K/V are reserved and written as forward does, for those
  /// layers only; `observer` sees their linear inputs and hidden states. Layer-by-layer
  /// calibration (quant/calibration.h SequentialCalibration) runs one layer at a time with it.
  /// Errors: kInvalidArgument (0 <= first < last <= n_layers violated, x of another size), those
  /// of forward's checks; kUnsupported on a kCuda model or a pipeline stage.
  Status forward_layers(const Batch& batch, KvCache& cache, std::span<float> x, std::int64_t first, std::int64_t last,
                        ThreadPool& pool, ActivationObserver* observer = nullptr) const;

  /// The final RMSNorm the LM head reads through: out[i] = RMSNorm(h[i]) · output_norm weight
  /// (with the family's norm_weight_offset) for each of the h.size() / dim rows, h and out
  /// [rows, dim] f32 (may alias). The residual stream a FinalHiddenCapture saw becomes the
  /// features Medusa heads and EAGLE read. Precondition: h.size() == out.size(), a multiple
  /// of config().dim.
  void output_norm(std::span<const float> h, std::span<float> out) const;

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    const TensorView *wq, *wk, *wv, *wo;
    const TensorView *w_gate, *w_up, *w_down;  // the dense FFN (null in a MoE layer)
    std::vector<float> bq = {}, bk = {}, bv = {};  // Q/K/V biases (Qwen2), empty when the spec has none
    std::vector<float> q_norm = {}, k_norm = {};   // RMSNorm weights of q / k (Qwen3: [head_dim], each
                                                   // head; OLMoE: the whole projection), or empty
    MoeWeights moe = {};                    // router null in a dense layer
    std::vector<float> post_attn_norm = {}, post_ffw_norm = {};  // [dim] (Gemma 2), or empty
  };
  // Layer l's weights as its spec names them (validate_llama_tensors checked they exist), each
  // RMSNorm weight with the spec's norm_weight_offset added.
  static Layer load_layer(const ModelFile& f, std::int64_t l, const LayerSpec& spec);
  struct Scratch;
  struct ScratchSlot;
  struct BatchLayout;

  explicit LlamaModel(ModelFile file);
  // Fills weights_ with every matrix the forward multiplies (not an untied embedding, which
  // is only looked up): a Q4_0 or Q8_0 matrix repacked 16 rows in lanes for the decode GEMV when
  // the CPU has its kernel (kernels/cpu/matmul/quant_packed.h; llama.cpp's CPU repack), its view's
  // `packed` pointing there (`data`, the stored layout the prefill GEMM reads, stays in the
  // file); under kHugePages every other matrix copied, its view's `data` pointing there.
  Status place_weights(WeightPlacement placement);
  Status validate(const Batch& batch, const KvCache& cache) const;
  static BatchLayout layout(const Batch& batch);
  // Length-dependent RoPE scaling (model/spec/rope_scaling.h): each run's divisors from its
  // sequence's largest position in `batch` + 1, once per run; nothing for static scaling.
  void add_rope_factors(const Batch& batch, BatchLayout& layout) const;
  void embed(const Batch& batch, std::span<float> x) const;
  // The steps of a layer, each timed as its ForwardOp in profile_.
  void norm_rows(const std::vector<float>& weight, Scratch& s) const;  // s.xb = RMSNorm(s.x)
  void add_residual(std::vector<float>& block_out, const std::vector<float>& post_norm, Scratch& s) const;
  void qkv_projection(const Layer& layer, std::int64_t l, Scratch& s, ThreadPool& pool) const;
  void rope_and_cache(std::int64_t l, const Batch& batch, const BatchLayout& layout, KvCache& cache, Scratch& s) const;
  void attend(std::int64_t l, const BatchLayout& layout, const KvCache& cache, Scratch& s, ThreadPool& pool) const;
  void attention_block(const Layer& layer, std::int64_t l, const Batch& batch,
                       const BatchLayout& layout, KvCache& cache, Scratch& s, ThreadPool& pool) const;
  void ffn_block(const Layer& layer, std::int64_t l, Scratch& s, ThreadPool& pool) const;
  void dense_ffn(const Layer& layer, std::int64_t l, Scratch& s, ThreadPool& pool) const;
  // matmul, counted in counters_.
  void linear(const TensorView& w, std::span<const float> x, std::int64_t n, std::span<float> y, ThreadPool& pool) const;
  // Several products in one parallel region (kernels/cpu/matmul/matmul.h matmul_fused), each counted.
  void linear_fused(std::span<const MatmulProduct> products, std::int64_t n, ThreadPool& pool) const;
  void lm_head(const Batch& batch, Scratch& s, std::vector<float>& logits, ThreadPool& pool) const;
  // Tensor parallelism: a block's partial output summed over the ranks (nothing in one process).
  void all_reduce(std::vector<float>& partial) const;
  // OLMoE's whole-projection Q/K RMSNorms on a tensor-parallel rank: the rows' sums of squares
  // all-reduced, then each rank scales its slice.
  void split_qk_norm(const Layer& layer, Scratch& s) const;
  // The CPU layers of forward (after reserve): embedding, decoder layers, LM head.
  // A pipeline stage's forward: the batch's micro-batches one after the other through
  // forward_cpu, then the logits of all of them broadcast from the last stage.
  void forward_pipelined(const Batch& batch, KvCache& cache, std::vector<float>& logits, ThreadPool& pool,
                         std::int64_t n_layers, ActivationObserver* observer, const LoraSet* lora) const;
  void forward_cpu(const Batch& batch, const BatchLayout& rows, KvCache& cache, std::vector<float>& logits,
                   ThreadPool& pool, std::int64_t n_layers, ActivationObserver* observer, const LoraSet* lora) const;
  // The same through cuda_: embedding and RoPE tables on the host, the rest on the GPU.
  Status forward_cuda(const Batch& batch, const BatchLayout& rows, KvCache& cache, std::vector<float>& logits,
                      std::int64_t n_layers) const;
  // kCuda: refuses the families part 1 does not run, then uploads the weights.
  Status create_cuda();
  ForwardOpTimer timer(ForwardOp op) const { return ForwardOpTimer(*profile_, op, *counters_); }

  ModelFile file_;
  std::vector<Layer> layers_;
  std::vector<LayerSpec> layer_specs_;  // config().layer_spec(l) of every layer, derived at create
  std::vector<float> output_norm_;
  std::vector<float> rope_freq_factors_;  // [head_dim / 2] or empty: rope_table's divisors
                                          // (empty too under length-dependent scaling: per run)
  const TensorView* token_embd_ = nullptr;
  const TensorView* output_ = nullptr;  // token_embd_ when tied
  std::unique_ptr<ForwardCounters> counters_;
  std::unique_ptr<ForwardProfile> profile_;
  std::unique_ptr<CudaForward> cuda_;  // kCuda only
  std::shared_ptr<TensorParallelGroup> tp_;  // set_tensor_parallel, or null
  std::shared_ptr<PipelineStageLink> pp_;    // set_pipeline_stage, or null
  std::int64_t pp_micro_batches_ = 0;       // set_pipeline_micro_batches (0: one per stage)
  HugePageBuffer weights_;  // what file_.tensors[...].packed (and under kHugePages .data) point into
  float attention_scale_ = 0.0f;  // AttentionShape::scale: config().attn_scale (0: 1/sqrt(head_dim)),
                                  // times YaRN's / LongRoPE's attention factor squared
  std::unique_ptr<ScratchSlot> scratch_;  // activations kept from forward to forward
};

}  // namespace peregrine
