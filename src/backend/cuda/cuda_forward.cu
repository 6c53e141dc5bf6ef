#include "backend/cuda_backend_api.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/device_matrix.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/q8_activations.cuh"
#include "kernels/cuda/rope_kv.cuh"

namespace peregrine {
namespace {

using cuda::cuda_status;
using cuda::DeviceMatrix;

// A device array of T that grows (contents dropped) to the capacity asked for.
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  std::size_t cap = 0;
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p != nullptr) cudaFree(p);
  }
  // Sets *grown when it reallocated.
  Status reserve(std::size_t n, bool* grown) {
    if (n <= cap) return Status::ok();
    if (p != nullptr) cudaFree(p);
    p = nullptr;
    cap = 0;
    PEREGRINE_CUDA_RETURN(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc (activations)");
    cap = n;
    *grown = true;
    return Status::ok();
  }
  Status upload(std::span<const T> host, cudaStream_t s) const {
    if (host.empty()) return Status::ok();
    return cuda_status(cudaMemcpyAsync(p, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (inputs)");
  }
};

// Page-locked host memory (cudaMallocHost), grown on demand: the per-forward inputs and the
// logits cross PCIe by DMA from / into it.
struct PinnedArray {
  std::uint8_t* p = nullptr;
  std::size_t cap = 0;
  PinnedArray() = default;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() {
    if (p != nullptr) cudaFreeHost(p);
  }
  Status reserve(std::size_t n) {
    if (n <= cap) return Status::ok();
    if (p != nullptr) cudaFreeHost(p);
    p = nullptr;
    cap = 0;
    PEREGRINE_CUDA_RETURN(cudaMallocHost(&p, n), "cudaMallocHost");
    cap = n;
    return Status::ok();
  }
};

// Byte offsets of one forward's inputs in the host staging buffer and its device copy, each
// 256-byte aligned; the block tables last, so that every other offset depends only on the row
// counts (a captured graph keeps its pointers while the tables grow).
struct InputLayout {
  std::size_t x, cos, sin, slot, table_offset, write_row, logit_rows, tables, end;
  InputLayout(std::int64_t n, std::int64_t n_logits, std::size_t n_tables, std::int64_t dim, std::int64_t head_dim) {
    std::size_t off = 0;
    auto take = [&](std::size_t bytes) {
      const std::size_t at = off;
      off += (bytes + 255) / 256 * 256;
      return at;
    };
    const auto rows = static_cast<std::size_t>(n);
    x = take(rows * static_cast<std::size_t>(dim) * 4);
    cos = take(rows * static_cast<std::size_t>(head_dim) * 4);
    sin = take(rows * static_cast<std::size_t>(head_dim) * 4);
    slot = take(rows * 4);
    table_offset = take(rows * 4);
    write_row = take(rows * 4);
    logit_rows = take(static_cast<std::size_t>(n_logits) * 4);
    tables = take(n_tables * 4);
    end = off;
  }
};

// The K/V of one KvCache on the GPU: [n_layers, 2, n_blocks · block_size, kv_dim] of dtype.
struct DeviceKv {
  void* data = nullptr;
  std::int64_t n_layers = 0, rows = 0, kv_dim = 0;
  DType dtype = DType::kF32;
  ~DeviceKv() {
    if (data != nullptr) cudaFree(data);
  }
  std::int64_t elt() const { return dtype == DType::kF16 ? 2 : 4; }
  void* slab(std::int64_t layer, int kv) const {
    return static_cast<std::uint8_t*>(data) + ((layer * 2 + kv) * rows * kv_dim) * elt();
  }
};

Expected<DeviceKv*> device_kv(KvCache& cache) {
  if (cache.dtype() != DType::kF32 && cache.dtype() != DType::kF16) {
    return unsupported("the CUDA backend keeps K/V in f32 or f16, not " + std::string(dtype_name(cache.dtype())));
  }
  const std::int64_t rows = static_cast<std::int64_t>(cache.pool().n_blocks()) * cache.block_size();
  auto* kv = static_cast<DeviceKv*>(cache.device_storage().get());
  if (kv != nullptr) return kv;
  auto owned = std::make_shared<DeviceKv>();
  owned->n_layers = cache.n_layers();
  owned->rows = rows;
  owned->kv_dim = cache.kv_dim();
  owned->dtype = cache.dtype();
  const auto bytes = static_cast<std::size_t>(2 * owned->n_layers * rows * owned->kv_dim * owned->elt());
  PEREGRINE_CUDA_RETURN(cudaMalloc(&owned->data, bytes), "cudaMalloc (KV cache)");
  kv = owned.get();
  cache.device_storage() = std::move(owned);
  return kv;
}

Status upload_floats(std::span<const float> host, float** dev) {
  PEREGRINE_CUDA_RETURN(cudaMalloc(dev, host.size_bytes()), "cudaMalloc (norm weights)");
  return cuda_status(cudaMemcpy(*dev, host.data(), host.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy (norm weights)");
}

bool device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return true;
  if (why != nullptr) *why = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
  return false;
}

// Everything one model keeps on the GPU, and the forward's kernel sequence.
struct GpuModel {
  // One product of a layer stage: a matrix and the column of the stage's output it starts at.
  struct Product {
    DeviceMatrix w;
    std::int64_t column = 0;
  };
  struct Layer {
    std::vector<Product> qkv;      // [Q; K; V] stacked when their dtypes match, else three
    DeviceMatrix wo;
    std::vector<Product> gate_up;  // [gate; up] stacked when their dtypes match, else two
    DeviceMatrix down;
    float* attn_norm = nullptr;
    float* ffn_norm = nullptr;
  };
  using GraphKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, const void*>;

  ModelConfig c;
  float scale = 0.0f;
  std::int64_t q_dim = 0, kv_dim = 0, qkv_width = 0;
  std::vector<Layer> layers;
  DeviceMatrix output;
  float* output_norm = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cuda::GemmScratch gemm_scratch;
  // Activations: x residual [n, dim], xb normed [n, dim], qkv [n, q | k | v], attn [n, q_dim],
  // gu [n, gate | up], act [n, ffn] (SwiGLU output), normed / logits for the logits rows.
  DeviceArray<float> xb, qkv, attn, gu, act, normed, logits;
  DeviceArray<std::int8_t> xq;
  DeviceArray<float> xd;
  DeviceArray<std::int32_t> xs;
  // The per-forward inputs (InputLayout), staged in pinned memory and copied in one transfer;
  // the pointers below point into `inputs` (x is also the residual stream the layers update).
  PinnedArray staging, logits_host;
  DeviceArray<std::uint8_t> inputs;
  float *x = nullptr, *cos = nullptr, *sin = nullptr;
  std::int32_t *slot = nullptr, *table_offset = nullptr, *write_row = nullptr, *logit_rows = nullptr, *tables = nullptr;
  std::map<GraphKey, cudaGraphExec_t> graphs;

  ~GpuModel() {
    clear_graphs();
    for (Layer& l : layers) {
      for (Product& p : l.qkv) cuda::free_matrix(p.w);
      for (Product& p : l.gate_up) cuda::free_matrix(p.w);
      cuda::free_matrix(l.wo);
      cuda::free_matrix(l.down);
      cudaFree(l.attn_norm);
      cudaFree(l.ffn_norm);
    }
    cuda::free_matrix(output);
    cudaFree(output_norm);
    if (blas != nullptr) cublasDestroy(blas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  void clear_graphs() {
    for (auto& [key, g] : graphs) cudaGraphExecDestroy(g);
    graphs.clear();
  }

  cuda::Q8Activations q8() const { return {xq.p, xd.p, xs.p}; }

  // `parts` stacked into one product when their dtypes match, else one product each, at
  // consecutive output columns.
  static Status upload_stage(std::initializer_list<const TensorView*> parts, std::vector<Product>& out) {
    const bool same = std::all_of(parts.begin(), parts.end(), [&](const TensorView* t) { return t->dtype == (*parts.begin())->dtype; });
    if (same) return cuda::upload_stacked(std::span<const TensorView* const>(parts.begin(), parts.size()), out.emplace_back().w);
    std::int64_t column = 0;
    for (const TensorView* t : parts) {
      Product& p = out.emplace_back();
      PEREGRINE_RETURN_IF_ERROR(cuda::upload_matrix(*t, p.w));
      p.column = column;
      column += t->shape[0];
    }
    return Status::ok();
  }

  // Every activation buffer for n rows and n_logits logits rows, and the inputs' buffers for
  // `layout` (grown to twice what is asked, so that growing tables rarely move them); a
  // reallocation invalidates the captured graphs (they hold the old pointers).
  Status reserve(std::int64_t n, std::int64_t n_logits, const InputLayout& layout) {
    bool grown = false;
    const auto rows = static_cast<std::size_t>(n), logit_count = static_cast<std::size_t>(n_logits);
    const auto dim = static_cast<std::size_t>(c.dim), ffn = static_cast<std::size_t>(c.ffn_dim);
    const std::size_t widest = std::max({dim, ffn, static_cast<std::size_t>(q_dim)});
    for (auto [a, count] : {std::pair{&xb, rows * dim}, {&qkv, rows * static_cast<std::size_t>(qkv_width)},
                            {&attn, rows * static_cast<std::size_t>(q_dim)}, {&gu, rows * 2 * ffn}, {&act, rows * ffn},
                            {&normed, logit_count * dim}, {&logits, logit_count * static_cast<std::size_t>(c.vocab_size)},
                            {&xd, rows * widest / 32}}) {
      PEREGRINE_RETURN_IF_ERROR(a->reserve(count, &grown));
    }
    PEREGRINE_RETURN_IF_ERROR(xq.reserve(rows * widest, &grown));
    PEREGRINE_RETURN_IF_ERROR(xs.reserve(rows * widest / 32, &grown));
    if (layout.end > inputs.cap) PEREGRINE_RETURN_IF_ERROR(inputs.reserve(2 * layout.end, &grown));
    PEREGRINE_RETURN_IF_ERROR(staging.reserve(inputs.cap));
    PEREGRINE_RETURN_IF_ERROR(logits_host.reserve(logit_count * static_cast<std::size_t>(c.vocab_size) * 4));
    if (grown) clear_graphs();
    x = reinterpret_cast<float*>(inputs.p + layout.x);
    cos = reinterpret_cast<float*>(inputs.p + layout.cos);
    sin = reinterpret_cast<float*>(inputs.p + layout.sin);
    slot = reinterpret_cast<std::int32_t*>(inputs.p + layout.slot);
    table_offset = reinterpret_cast<std::int32_t*>(inputs.p + layout.table_offset);
    write_row = reinterpret_cast<std::int32_t*>(inputs.p + layout.write_row);
    logit_rows = reinterpret_cast<std::int32_t*>(inputs.p + layout.logit_rows);
    tables = reinterpret_cast<std::int32_t*>(inputs.p + layout.tables);
    return Status::ok();
  }

  // Copies `rows` (and the rows' physical KV write rows) into the staging buffer per `layout`,
  // then to the device in one transfer.
  Status upload(const CudaForwardRows& rows, std::span<const std::int32_t> write_rows, const InputLayout& layout) {
    auto put = [&](std::size_t at, const auto& span) {
      if (!span.empty()) std::memcpy(staging.p + at, span.data(), span.size_bytes());
    };
    put(layout.x, rows.x);
    put(layout.cos, rows.rope_cos);
    put(layout.sin, rows.rope_sin);
    put(layout.slot, rows.slot);
    put(layout.table_offset, rows.table_offset);
    put(layout.write_row, write_rows);
    put(layout.logit_rows, rows.logit_rows);
    put(layout.tables, rows.tables);
    return cuda_status(cudaMemcpyAsync(inputs.p, staging.p, layout.end, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (inputs)");
  }

  static bool any_quantized(const std::vector<Product>& ps) {
    return std::any_of(ps.begin(), ps.end(), [](const Product& p) { return p.w.quantized(); });
  }

  // out = in · wᵀ for n rows: our GEMV up to kMaxGemvTokens rows (reading in's Q8_0 blocks,
  // already in q8(), for a quantized w), cuBLAS above.
  Status linear(const DeviceMatrix& w, const float* in, std::int64_t n, const cuda::GemvOutput& out) {
    if (n > cuda::kMaxGemvTokens) return cuda::gemm(blas, w, in, n, out, gemm_scratch, stream);
    return cuda::gemv(w, in, q8(), static_cast<int>(n), out, stream);
  }

  // A stage's products over `in` (normed rows, their Q8_0 blocks made by the norm) into `y`
  // [n, ldy] at their columns.
  Status stage(const std::vector<Product>& ps, const float* in, std::int64_t n, float* y, std::int64_t ldy) {
    for (const Product& p : ps) PEREGRINE_RETURN_IF_ERROR(linear(p.w, in, n, {y + p.column, ldy, cuda::Epilogue::kStore}));
    return Status::ok();
  }

  // x += in · wᵀ, in [n, w.cols] quantized first where the GEMV reads Q8_0 blocks.
  Status residual(const DeviceMatrix& w, const float* in, std::int64_t n) {
    if (w.quantized() && n <= cuda::kMaxGemvTokens) PEREGRINE_RETURN_IF_ERROR(cuda::quantize_q8(in, n, w.cols, q8(), stream));
    return linear(w, in, n, {x, c.dim, cuda::Epilogue::kAccumulate});
  }

  Status norm(const float* weight, std::int64_t n, bool quantize) {
    const bool q = quantize && n <= cuda::kMaxGemvTokens;
    return cuda::rmsnorm(x, weight, nullptr, n, c.dim, c.rms_eps, xb.p, q ? q8() : cuda::Q8Activations{}, stream);
  }

  Status attention_block(const Layer& L, std::int64_t l, std::int64_t n, const DeviceKv& kv, std::int32_t block_size) {
    PEREGRINE_RETURN_IF_ERROR(norm(L.attn_norm, n, any_quantized(L.qkv)));
    PEREGRINE_RETURN_IF_ERROR(stage(L.qkv, xb.p, n, qkv.p, qkv_width));
    PEREGRINE_RETURN_IF_ERROR(cuda::rope_and_write_kv(qkv.p, cos, sin, n, c.n_heads, c.n_kv_heads, c.head_dim, c.rope_style,
                                                      write_row, kv.dtype, kv.slab(l, 0), kv.slab(l, 1), stream));
    const cuda::PagedKv paged{kv.slab(l, 0), kv.slab(l, 1), kv.dtype, block_size, tables, table_offset, slot};
    const cuda::AttentionDims dims{c.n_heads, c.n_kv_heads, c.head_dim, scale, c.layer_window(l), c.attn_softcap};
    PEREGRINE_RETURN_IF_ERROR(cuda::paged_attention(qkv.p, qkv_width, n, paged, dims, attn.p, stream));
    return residual(L.wo, attn.p, n);
  }

  Status ffn_block(const Layer& L, std::int64_t n) {
    PEREGRINE_RETURN_IF_ERROR(norm(L.ffn_norm, n, any_quantized(L.gate_up)));
    const std::int64_t ffn = c.ffn_dim;
    if (L.gate_up.size() == 1 && n <= cuda::kMaxGemvTokens) {  // SwiGLU in the GEMV's epilogue
      PEREGRINE_RETURN_IF_ERROR(linear(L.gate_up[0].w, xb.p, n, {act.p, ffn, cuda::Epilogue::kSwiGlu}));
    } else {
      PEREGRINE_RETURN_IF_ERROR(stage(L.gate_up, xb.p, n, gu.p, 2 * ffn));
      PEREGRINE_RETURN_IF_ERROR(cuda::swiglu(gu.p, n, ffn, act.p, stream));
    }
    return residual(L.down, act.p, n);
  }

  // Every kernel of one forward, enqueued on `stream` (directly, or into a graph capture).
  Status enqueue(std::int64_t n, std::int64_t n_logits, std::int64_t n_layers, const DeviceKv& kv, std::int32_t block_size) {
    for (std::int64_t l = 0; l < n_layers; ++l) {
      const Layer& L = layers[static_cast<std::size_t>(l)];
      PEREGRINE_RETURN_IF_ERROR(attention_block(L, l, n, kv, block_size));
      PEREGRINE_RETURN_IF_ERROR(ffn_block(L, n));
    }
    if (n_logits == 0) return Status::ok();  // a prompt chunk that ends no sequence's known tokens
    const bool q = output.quantized() && n_logits <= cuda::kMaxGemvTokens;
    PEREGRINE_RETURN_IF_ERROR(cuda::rmsnorm(x, output_norm, logit_rows, n_logits, c.dim, c.rms_eps, normed.p,
                                            q ? q8() : cuda::Q8Activations{}, stream));
    return linear(output, normed.p, n_logits, {logits.p, c.vocab_size, cuda::Epilogue::kStore});
  }

  // enqueue through a CUDA Graph captured once per key (decode-sized forwards: no cuBLAS).
  Status run_graph(const GraphKey& key, std::int64_t n, std::int64_t n_logits, std::int64_t n_layers, const DeviceKv& kv,
                   std::int32_t block_size) {
    auto it = graphs.find(key);
    if (it == graphs.end()) {
      PEREGRINE_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
      const Status st = enqueue(n, n_logits, n_layers, kv, block_size);
      cudaGraph_t graph = nullptr;
      const cudaError_t end = cudaStreamEndCapture(stream, &graph);
      PEREGRINE_RETURN_IF_ERROR(st);
      PEREGRINE_CUDA_RETURN(end, "cudaStreamEndCapture");
      cudaGraphExec_t exec = nullptr;
      const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      PEREGRINE_CUDA_RETURN(inst, "cudaGraphInstantiate");
      it = graphs.emplace(key, exec).first;
    }
    return cuda_status(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
  }
};

// The GPU side of backend/cuda_forward.h's CudaForward.
class GpuForward final : public CudaForward {
 public:
  explicit GpuForward(std::unique_ptr<GpuModel> m) : m_(std::move(m)) {}
  Status forward(const CudaForwardRows& rows, KvCache& cache, std::int64_t n_layers, std::vector<float>& logits) override;
  std::int64_t weight_bytes() const override;

 private:
  std::unique_ptr<GpuModel> m_;
};

Expected<std::unique_ptr<CudaForward>> create(const ModelConfig& config, const CudaModelWeights& weights, float attention_scale) {
  std::string why;
  if (!device_available(&why)) return unavailable(why);
  auto impl = std::make_unique<GpuModel>();
  impl->c = config;
  impl->scale = attention_scale;
  PEREGRINE_CUDA_RETURN(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  PEREGRINE_RETURN_IF_ERROR(cuda::cublas_status(cublasCreate(&impl->blas), "cublasCreate"));
  impl->q_dim = config.n_heads * config.head_dim;
  impl->kv_dim = config.n_kv_heads * config.head_dim;
  impl->qkv_width = impl->q_dim + 2 * impl->kv_dim;
  for (const CudaLayerWeights& w : weights.layers) {
    GpuModel::Layer& L = impl->layers.emplace_back();
    PEREGRINE_RETURN_IF_ERROR(GpuModel::upload_stage({w.wq, w.wk, w.wv}, L.qkv));
    PEREGRINE_RETURN_IF_ERROR(GpuModel::upload_stage({w.w_gate, w.w_up}, L.gate_up));
    PEREGRINE_RETURN_IF_ERROR(cuda::upload_matrix(*w.wo, L.wo));
    PEREGRINE_RETURN_IF_ERROR(cuda::upload_matrix(*w.w_down, L.down));
    PEREGRINE_RETURN_IF_ERROR(upload_floats(w.attn_norm, &L.attn_norm));
    PEREGRINE_RETURN_IF_ERROR(upload_floats(w.ffn_norm, &L.ffn_norm));
  }
  PEREGRINE_RETURN_IF_ERROR(cuda::upload_matrix(*weights.output, impl->output));
  PEREGRINE_RETURN_IF_ERROR(upload_floats(weights.output_norm, &impl->output_norm));
  return std::unique_ptr<CudaForward>(new GpuForward(std::move(impl)));
}

std::int64_t GpuForward::weight_bytes() const {
  std::int64_t total = m_->output.bytes;
  for (const GpuModel::Layer& L : m_->layers) {
    for (const GpuModel::Product& p : L.qkv) total += p.w.bytes;
    for (const GpuModel::Product& p : L.gate_up) total += p.w.bytes;
    total += L.wo.bytes + L.down.bytes;
  }
  return total;
}

Status GpuForward::forward(const CudaForwardRows& rows, KvCache& cache, std::int64_t n_layers, std::vector<float>& logits) {
  GpuModel& m = *m_;
  PEREGRINE_ASSIGN_OR_RETURN(DeviceKv * kv, device_kv(cache));
  const std::int64_t n = rows.n, n_logits = static_cast<std::int64_t>(rows.logit_rows.size());
  const std::int32_t bs = cache.block_size();
  std::vector<std::int32_t> write_row(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t s = rows.slot[i];
    write_row[i] = rows.tables[rows.table_offset[i] + s / bs] * bs + s % bs;
  }
  const InputLayout layout(n, n_logits, rows.tables.size(), m.c.dim, m.c.head_dim);
  PEREGRINE_RETURN_IF_ERROR(m.reserve(n, n_logits, layout));
  PEREGRINE_RETURN_IF_ERROR(m.upload(rows, write_row, layout));
  if (n <= cuda::kMaxGemvTokens) {
    PEREGRINE_RETURN_IF_ERROR(m.run_graph({n, n_logits, n_layers, kv->data}, n, n_logits, n_layers, *kv, bs));
  } else {
    PEREGRINE_RETURN_IF_ERROR(m.enqueue(n, n_logits, n_layers, *kv, bs));
  }
  logits.resize(static_cast<std::size_t>(n_logits * m.c.vocab_size));
  const std::size_t bytes = logits.size() * sizeof(float);
  PEREGRINE_CUDA_RETURN(cudaMemcpyAsync(m.logits_host.p, m.logits.p, bytes, cudaMemcpyDeviceToHost, m.stream), "cudaMemcpyAsync (logits)");
  PEREGRINE_CUDA_RETURN(cudaStreamSynchronize(m.stream), "forward");
  if (bytes > 0) std::memcpy(logits.data(), m.logits_host.p, bytes);
  return Status::ok();
}

// Two CUDA events around one device-to-device copy.
struct CopyTimer {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~CopyTimer() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
  Expected<float> time_ms(void* dst, const void* src, std::size_t bytes) const {
    PEREGRINE_CUDA_RETURN(cudaEventRecord(start), "cudaEventRecord");
    PEREGRINE_CUDA_RETURN(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    PEREGRINE_CUDA_RETURN(cudaEventRecord(stop), "cudaEventRecord");
    PEREGRINE_CUDA_RETURN(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    PEREGRINE_CUDA_RETURN(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms;
  }
};

Expected<double> copy_bandwidth_gbs(std::int64_t bytes, int repeats) {
  std::string why;
  if (!device_available(&why)) return unavailable(why);
  DeviceArray<std::uint8_t> a, b;
  bool grown = false;
  const auto n = static_cast<std::size_t>(bytes);
  PEREGRINE_RETURN_IF_ERROR(a.reserve(n, &grown));
  PEREGRINE_RETURN_IF_ERROR(b.reserve(n, &grown));
  PEREGRINE_CUDA_RETURN(cudaMemset(a.p, 1, n), "cudaMemset");
  CopyTimer timer;
  PEREGRINE_CUDA_RETURN(cudaEventCreate(&timer.start), "cudaEventCreate");
  PEREGRINE_CUDA_RETURN(cudaEventCreate(&timer.stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int r = 0; r < repeats + 2; ++r) {  // the first two warm up
    PEREGRINE_ASSIGN_OR_RETURN(const float t, timer.time_ms(b.p, a.p, n));
    if (r >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(ms[ms.size() / 2]) * 1e-3) / 1e9;
}

Expected<std::int64_t> free_memory_bytes() {
  std::string why;
  if (!device_available(&why)) return unavailable(why);
  std::size_t free = 0, total = 0;
  PEREGRINE_CUDA_RETURN(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return static_cast<std::int64_t>(free);
}

constexpr CudaBackendApi kApi{device_available, create, copy_bandwidth_gbs, free_memory_bytes};

}  // namespace
}  // namespace peregrine

/// The backend library's entry point (backend/cuda_backend_api.h).
extern "C" __attribute__((visibility("default"))) const peregrine::CudaBackendApi* peregrine_cuda_backend() {
  return &peregrine::kApi;
}
