// peregrine synth: a random-weight llama model of a real shape, as GGUF or a Hugging Face
// folder, for speed measurements (model/synth_model.h).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common.h"
#include "peregrine/model/synth_model.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct SynthArgs {
  std::string shape;
  std::string output;
  std::string dtype = "f32";
  std::string format = "gguf";
  std::uint64_t seed = 0;
  std::string vocab;
  std::string arch;  // "" = the shape's own family
  std::int32_t threads = 2;
};

std::string shape_names() {
  std::string names;
  for (const auto& s : model_shapes()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

/// A file of the shared data folder (../shared), or "" when `rel` is empty.
std::string shared_file(const std::string& rel) {
  return rel.empty() ? "" : (std::filesystem::path(shared_data_dir()) / rel).string();
}

Expected<SynthOptions> options_of(const SynthArgs& a, const ModelShape& shape) {
  SynthOptions o;
  PEREGRINE_ASSIGN_OR_RETURN(o.dtype, parse_weight_dtype(a.dtype));
  o.seed = a.seed;
  o.vocab_gguf = a.vocab.empty() ? shared_file(shape.vocab) : a.vocab;
  o.hf_tokenizer = shared_file(shape.hf_tokenizer);
  std::error_code ec;
  if (a.vocab.empty() && !shape.vocab.empty() && a.format == "gguf" && !std::filesystem::exists(o.vocab_gguf, ec)) {
    return not_found("the vocabulary of " + shape.name + " (" + o.vocab_gguf +
                     ") is missing: set PEREGRINE_SHARED_DIR to the shared data folder or pass --vocab PATH");
  }
  if (!o.hf_tokenizer.empty() && !std::filesystem::exists(o.hf_tokenizer, ec)) o.hf_tokenizer.clear();
  return o;
}

int run(const SynthArgs& a) {
  const ModelShape* found = find_model_shape(a.shape);
  if (!found) return report(invalid_argument("unknown shape '" + a.shape + "' (known: " + shape_names() + ")"));
  ModelShape as_family = *found;  // --arch: the same sizes as another family
  if (!a.arch.empty()) {
    if (!find_architecture(a.arch)) {
      return report(invalid_argument("--arch '" + a.arch + "' is not one of " + supported_architecture_names()));
    }
    ModelConfig& c = as_family.config;  // the family's own fields, none of the shape's
    c.sliding_window = 0;
    c.attn_scale = c.attn_softcap = c.final_softcap = c.norm_weight_offset = 0.0f;
    apply_architecture(c, *find_architecture(a.arch));
  }
  const ModelShape* shape = &as_family;
  if (a.format != "gguf" && a.format != "safetensors") {
    return report(invalid_argument("--format '" + a.format + "' is not one of gguf, safetensors"));
  }
  if (Status st = validate_threads(a.threads); !st) return report(st);
  auto o = options_of(a, *shape);
  if (!o) return report(o.status());
  ThreadPool pool(a.threads);
  const auto start = std::chrono::steady_clock::now();
  auto r = a.format == "gguf" ? synth_gguf(*shape, *o, a.output, pool) : synth_hf(*shape, *o, a.output, pool);
  if (!r) return report(r.status());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %s %s, seed %llu, %zu tensors, %.1f MB of weights in %.2f s\n", a.output.c_str(),
              shape->name.c_str(), a.dtype.c_str(), static_cast<unsigned long long>(a.seed), r->n_tensors,
              static_cast<double>(r->weight_bytes) / 1e6, s);
  if (!r->f16_fallback.empty()) {
    std::printf("%zu matrices with rows not a multiple of 32 values are f16 (%s%s)\n", r->f16_fallback.size(),
                r->f16_fallback.front().c_str(), r->f16_fallback.size() > 1 ? ", ..." : "");
  }
  return 0;
}

}  // namespace

Verb add_synth(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight llama model of a real shape (for speed tests)");
  cmd->add_option("--shape", args->shape, "Model shape: " + shape_names())->required();
  cmd->add_option("-o,--output", args->output, "Output: a .gguf file, or a folder for safetensors")->required();
  cmd->add_option("--dtype", args->dtype, "Weight matrices: f32, f16, bf16, q8_0, q4_0 (norms stay f32 in GGUF)")
      ->capture_default_str();
  cmd->add_option("--format", args->format, "gguf, or safetensors (a Hugging Face folder; f32/f16/bf16 only)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the random weights (same seed, same bytes)")->capture_default_str();
  cmd->add_option("--vocab", args->vocab,
                  "GGUF whose tokenizer.* metadata is copied (default: the shape's vocabulary in ../shared)");
  cmd->add_option("--arch", args->arch,
                  "Write the shape's sizes as this family instead (e.g. llama: a Llama of the same size, for comparisons)");
  cmd->add_option("-t,--threads", args->threads, "Threads")->capture_default_str();
  return {cmd, [args] { return run(*args); }};
}

}  // namespace peregrine::cli
