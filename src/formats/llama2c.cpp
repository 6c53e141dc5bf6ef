#include "peregrine/formats/llama2c.h"

#include <array>
#include <cstdlib>

#include "peregrine/core/byte_reader.h"

namespace peregrine {
namespace {

constexpr std::size_t kHeaderBytes = 7 * sizeof(std::int32_t);

Expected<ModelConfig> read_header(const MappedFile& f, bool* shared_classifier) {
  ByteReader r(f.bytes(), f.path());
  std::array<std::int32_t, 7> h{};
  for (auto& v : h) {
    PEREGRINE_ASSIGN_OR_RETURN(v, r.read<std::int32_t>());
  }
  ModelConfig c;
  c.dim = h[0];
  c.ffn_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  *shared_classifier = h[5] > 0;
  c.vocab_size = std::abs(static_cast<std::int64_t>(h[5]));
  c.max_seq_len = h[6];
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  c.tied_embeddings = *shared_classifier;
  c.rope_style = RopeStyle::kInterleaved;
  if (c.n_heads > 0 && c.dim % c.n_heads != 0) {
    return corrupt_file(f.path() + ": llama2.c header dim " + std::to_string(c.dim) +
                        " is not a multiple of n_heads " + std::to_string(c.n_heads));
  }
  Status st = c.validate();
  if (!st) return corrupt_file(f.path() + ": not a valid llama2.c checkpoint header (" + st.message() + ")");
  return c;
}

/// Lays out the float32 arrays in file order and checks the file size matches exactly.
class Layout {
 public:
  Layout(const MappedFile& f, ModelFile& m) : f_(f), m_(m), pos_(kHeaderBytes) {}

  /// Reserves `count` consecutive tensors of `shape`, named by `name_of(i)`.
  template <typename NameFn>
  void add(std::int64_t count, std::vector<std::int64_t> shape, NameFn name_of) {
    std::uint64_t numel = 1;
    for (auto d : shape) numel *= static_cast<std::uint64_t>(d);
    for (std::int64_t i = 0; i < count; ++i) {
      TensorView t;
      t.name = name_of(i);
      t.dtype = DType::kF32;
      t.shape = shape;
      t.nbytes = numel * sizeof(float);
      t.data = f_.data() + pos_;
      pos_ += t.nbytes;
      m_.tensors.emplace(t.name, std::move(t));
    }
  }
  void skip(std::uint64_t n_floats) { pos_ += n_floats * sizeof(float); }

 private:
  const MappedFile& f_;
  ModelFile& m_;
  std::uint64_t pos_;
};

/// Bytes the header implies (header + all float32 arrays), computed in floating point so an
/// absurd header cannot overflow; compared with the real size before any tensor is laid out.
double implied_file_bytes(const ModelConfig& c, bool shared) {
  const double L = static_cast<double>(c.n_layers), d = static_cast<double>(c.dim);
  const double hd = static_cast<double>(c.head_dim), f = static_cast<double>(c.ffn_dim);
  const double q = static_cast<double>(c.n_heads) * hd, kv = static_cast<double>(c.n_kv_heads) * hd;
  const double v = static_cast<double>(c.vocab_size);
  const double per_layer = 2 * d + 2 * q * d + 2 * kv * d + 3 * f * d;
  const double floats = v * d * (shared ? 1 : 2) + L * per_layer + d +
                        static_cast<double>(c.max_seq_len) * hd;
  return kHeaderBytes + floats * sizeof(float);
}

std::string blk(std::int64_t l, const char* name) { return layer_tensor_name(l, name); }

}  // namespace

Expected<ModelFile> load_llama2c_model(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  bool shared = true;
  ModelFile m;
  m.format = ModelFormat::kLlama2c;
  m.path = path;
  PEREGRINE_ASSIGN_OR_RETURN(m.config, read_header(*file, &shared));
  const ModelConfig& c = m.config;
  const double implied = implied_file_bytes(c, shared);
  if (implied != static_cast<double>(file->size())) {
    return corrupt_file(path + ": llama2.c checkpoint is " + std::to_string(file->size()) +
                        " bytes but its header implies " + std::to_string(static_cast<std::uint64_t>(implied)) +
                        (implied > static_cast<double>(file->size()) ? " (truncated?)"
                                                                    : " (trailing data or not a llama2.c file)"));
  }
  const std::int64_t L = c.n_layers, hd = c.head_dim;
  Layout lay(*file, m);
  lay.add(1, {c.vocab_size, c.dim}, [](auto) { return std::string("token_embd.weight"); });
  lay.add(L, {c.dim}, [](auto l) { return blk(l, "attn_norm"); });
  lay.add(L, {c.n_heads * hd, c.dim}, [](auto l) { return blk(l, "attn_q"); });
  lay.add(L, {c.n_kv_heads * hd, c.dim}, [](auto l) { return blk(l, "attn_k"); });
  lay.add(L, {c.n_kv_heads * hd, c.dim}, [](auto l) { return blk(l, "attn_v"); });
  lay.add(L, {c.dim, c.n_heads * hd}, [](auto l) { return blk(l, "attn_output"); });
  lay.add(L, {c.dim}, [](auto l) { return blk(l, "ffn_norm"); });
  lay.add(L, {c.ffn_dim, c.dim}, [](auto l) { return blk(l, "ffn_gate"); });
  lay.add(L, {c.dim, c.ffn_dim}, [](auto l) { return blk(l, "ffn_down"); });
  lay.add(L, {c.ffn_dim, c.dim}, [](auto l) { return blk(l, "ffn_up"); });
  lay.add(1, {c.dim}, [](auto) { return std::string("output_norm.weight"); });
  lay.skip(static_cast<std::uint64_t>(c.max_seq_len) * static_cast<std::uint64_t>(hd));  // freq_cis
  if (!shared) lay.add(1, {c.vocab_size, c.dim}, [](auto) { return std::string("output.weight"); });
  m.storage.push_back(std::move(file));
  PEREGRINE_RETURN_IF_ERROR(validate_llama_tensors(m));
  return m;
}

}  // namespace peregrine
