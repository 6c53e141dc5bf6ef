// peregrine inspect: architecture, hyper-parameters, tokenizer and tensor table of a model.
#include <cstdio>
#include <map>
#include <memory>

#include "common.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

/// The sliding window and Gemma 2's fields, one line, when any is set.
void print_attention_variant(const ModelConfig& c) {
  std::string line;
  if (c.sliding_window > 0) {
    line += "sliding window " + std::to_string(c.sliding_window) +
            (c.sliding_window_period >= 2 ? " (layer l local unless l % " + std::to_string(c.sliding_window_period) + " == " +
                                                std::to_string(c.sliding_window_period - 1) + ")"
                                          : " (every layer)");
  }
  const auto add = [&](const char* what, float v) {
    if (v > 0.0f) line += (line.empty() ? "" : ", ") + std::string(what) + " " + std::to_string(v);
  };
  add("score scale", c.attn_scale);
  add("attention soft-cap", c.attn_softcap);
  add("final soft-cap", c.final_softcap);
  add("embedding scale", c.embed_scale);
  add("norm weight offset", c.norm_weight_offset);
  if (c.activation == FfnActivation::kGeluTanh) line += std::string(line.empty() ? "" : ", ") + "GeGLU (tanh GELU)";
  if (!line.empty()) std::printf("%s\n", line.c_str());
}

void print_config(const ModelFile& m) {
  const ModelConfig& c = m.config;
  const std::string version = m.gguf ? " v" + std::to_string(m.gguf->version()) : "";
  std::printf("model:        %s\nformat:       %s%s\narchitecture: %s\n", m.path.c_str(),
              model_format_name(m.format), version.c_str(), c.arch.c_str());
  std::printf("dim %lld, layers %lld, heads %lld, kv_heads %lld (%s), head_dim %lld, ffn %lld\n",
              static_cast<long long>(c.dim), static_cast<long long>(c.n_layers),
              static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
              c.n_kv_heads == c.n_heads ? "MHA" : (c.n_kv_heads == 1 ? "MQA" : "GQA"),
              static_cast<long long>(c.head_dim), static_cast<long long>(c.ffn_dim));
  std::printf("vocab %lld, context %lld, rope theta %g (%s pairs), rms eps %g, lm head %s\n",
              static_cast<long long>(c.vocab_size), static_cast<long long>(c.max_seq_len),
              static_cast<double>(c.rope_theta),
              c.rope_style == RopeStyle::kInterleaved ? "interleaved" : "neox/half",
              static_cast<double>(c.rms_eps), c.tied_embeddings ? "tied" : "untied");
  print_attention_variant(c);
  if (c.n_experts > 0) {
    std::printf("experts %lld per layer, top-%lld (%s), expert ffn %lld, shared expert ffn %lld\n",
                static_cast<long long>(c.n_experts), static_cast<long long>(c.n_experts_used),
                c.expert_weights_norm ? "renormalized" : "softmax over all", static_cast<long long>(c.expert_ffn_dim),
                static_cast<long long>(c.shared_expert_ffn_dim));
  }
}

/// One line "by dtype: f32 5 (5120 bytes), q4_k 13 (...), ..." in name order: what a mixed
/// file (llama.cpp's Q4_K_M puts some matrices in q6_k) really holds.
void print_dtype_counts(const ModelFile& m) {
  std::map<std::string, std::pair<std::size_t, std::size_t>> by_dtype;  // count, bytes
  for (const auto& [name, t] : m.tensors) {
    auto& [count, bytes] = by_dtype[t.format_string()];
    ++count;
    bytes += t.nbytes;
  }
  std::string line;
  for (const auto& [dtype, cb] : by_dtype) {
    line += (line.empty() ? "" : ", ") + dtype + " " + std::to_string(cb.first) + " (" + std::to_string(cb.second) + " bytes)";
  }
  std::printf("by dtype: %s\n", line.c_str());
}

/// The table of every tensor (name, dtype, shape outermost first, bytes) and the totals.
void print_tensors(const ModelFile& m) {
  std::printf("\n%-36s %-14s %-16s %12s\n", "tensor", "dtype", "shape", "bytes");
  for (const auto& [name, t] : m.tensors) {
    std::printf("%-36s %-14s %-16s %12zu\n", name.c_str(), t.format_string().c_str(),
                t.shape_string().c_str(), t.nbytes);
  }
  std::printf("%zu tensors, %zu bytes\n", m.tensors.size(), m.weight_bytes());
  print_dtype_counts(m);
}

int run(const ModelOptions& args) {
  auto file = open_model(args);
  if (!file) return report(file.status());
  auto tok = load_tokenizer(*file, args.tokenizer);
  if (!tok && !args.tokenizer.empty()) return report(tok.status());
  print_config(*file);
  if (tok) {
    std::printf("tokenizer: %s, %d tokens, bos %d, eos %d\n", (*tok)->kind().c_str(),
                (*tok)->vocab_size(), (*tok)->bos_id(), (*tok)->eos_id());
  } else {
    std::printf("tokenizer: none (%s)\n", tok.status().message().c_str());
  }
  print_tensors(*file);
  return 0;
}

}  // namespace

Verb add_inspect(CLI::App& app) {
  auto args = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model's config, tokenizer and tensors (name, dtype, shape, bytes)");
  add_model_options(*cmd, *args);
  add_dtype_option(*cmd, *args);
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
