#include "peregrine/quant/rotate_model.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "peregrine/core/prng.h"
#include "peregrine/kernels/cpu/elementwise/hadamard.h"

namespace peregrine {
namespace {

// The random orthogonal Q = diag(d) · H_dim, d_j = ±1, applied to rows: r ← r·Q = H(r ⊙ d).
struct ResidualRotation {
  std::vector<float> signs;

  // Every row of w [n_rows, signs.size()] ← row·Q.
  void rotate_rows(std::span<float> w) const {
    const std::size_t dim = signs.size();
    for (std::size_t i = 0; i < w.size(); ++i) w[i] *= signs[i % dim];
    hadamard_transform(w.data(), static_cast<std::int64_t>(w.size() / dim), static_cast<std::int64_t>(dim));
  }

  // w [signs.size(), cols] ← Qᵀ·w (transposed, row-rotated, transposed back).
  void rotate_columns(std::span<float> w) const {
    const std::size_t dim = signs.size(), cols = w.size() / dim;
    std::vector<float> t(w.size());
    for (std::size_t r = 0; r < dim; ++r) {
      for (std::size_t c = 0; c < cols; ++c) t[c * dim + r] = w[r * cols + c];
    }
    rotate_rows(t);
    for (std::size_t r = 0; r < dim; ++r) {
      for (std::size_t c = 0; c < cols; ++c) w[r * cols + c] = t[c * dim + r];
    }
  }
};

ResidualRotation random_rotation(std::int64_t dim, std::uint64_t seed) {
  Xoshiro256Plus rng(seed);
  ResidualRotation q;
  q.signs.resize(static_cast<std::size_t>(dim));
  for (float& d : q.signs) d = (rng.next() >> 63) != 0 ? -1.0f : 1.0f;
  return q;
}

// W ← W·diag(o + g) for every reader of the norm weight g applied as o + g (o: the config's
// norm_weight_offset), then g ← 1 - o (the norm scales by 1).
void fold_norm(FloatModel& m, const std::string& norm, std::initializer_list<std::string> readers) {
  const std::span<float> g = m.tensor(norm);
  const float offset = m.config().norm_weight_offset;
  for (const std::string& name : readers) {
    const std::span<float> w = m.tensor(name);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] *= offset + g[i % g.size()];
  }
  std::fill(g.begin(), g.end(), 1.0f - offset);
}

// A tied LM head becomes its own output.weight (a copy of token_embd), so it can take the final
// norm and the rotation independently of the embedding.
void untie_head(FloatModel& m) {
  if (!m.config().tied_embeddings) return;
  const std::span<const float> e = m.tensor("token_embd.weight");
  m.set("output.weight", m.shape("token_embd.weight"), std::vector<float>(e.begin(), e.end()));
  m.config().tied_embeddings = false;
}

void fold_norms(FloatModel& m) {
  for (std::int64_t l = 0; l < m.config().n_layers; ++l) {
    const auto t = [l](const char* name) { return layer_tensor_name(l, name); };
    fold_norm(m, t("attn_norm"), {t("attn_q"), t("attn_k"), t("attn_v")});
    fold_norm(m, t("ffn_norm"), {t("ffn_gate"), t("ffn_up")});
  }
  fold_norm(m, "output_norm.weight", {"output.weight"});
}

void rotate_residual(FloatModel& m, const ResidualRotation& q) {
  q.rotate_rows(m.tensor("token_embd.weight"));
  q.rotate_rows(m.tensor("output.weight"));
  for (std::int64_t l = 0; l < m.config().n_layers; ++l) {
    for (const char* reader : {"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"}) {
      q.rotate_rows(m.tensor(layer_tensor_name(l, reader)));
    }
    for (const char* writer : {"attn_output", "ffn_down"}) q.rotate_columns(m.tensor(layer_tensor_name(l, writer)));
  }
}

// ffn_down ← ffn_down·H_ffn (H symmetric and orthogonal), matching the forward's online
// hadamard_transform of the SwiGLU output.
void rotate_ffn_down_input(FloatModel& m) {
  const std::int64_t ffn = m.config().ffn_dim;
  for (std::int64_t l = 0; l < m.config().n_layers; ++l) {
    const std::span<float> w = m.tensor(layer_tensor_name(l, "ffn_down"));
    hadamard_transform(w.data(), static_cast<std::int64_t>(w.size()) / ffn, ffn);
  }
  m.config().ffn_down_hadamard = true;
}

}  // namespace

Status rotate_model_hadamard(FloatModel& m, std::uint64_t seed) {
  if (m.config().ffn_down_hadamard) return invalid_argument("rotate_model_hadamard: the model is already rotated");
  if (m.has(layer_tensor_name(0, "post_attention_norm")) || m.has(layer_tensor_name(0, "post_ffw_norm"))) {
    return unsupported("rotate_model_hadamard: " + m.config().arch +
                       "'s post-block RMSNorms (Gemma 2) do not commute with a rotation of the residual stream");
  }
  untie_head(m);
  fold_norms(m);
  rotate_residual(m, random_rotation(m.config().dim, seed));
  rotate_ffn_down_input(m);
  return Status::ok();
}

}  // namespace peregrine
