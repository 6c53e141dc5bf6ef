// peregrine prune: removes weights from a model's linear layers (magnitude, Wanda, SparseGPT;
// unstructured or N:M) or whole blocks / channels / heads (layer-drop, width) with
// prune/prune_model.h, and writes the result as GGUF or a Hugging Face folder.
#include <chrono>
#include <cstdio>
#include <memory>

#include "common.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/prune/gguf_storage.h"
#include "peregrine/prune/prune_model.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct PruneArgs {
  ModelOptions model;
  std::string output;
  std::string method = "magnitude";
  std::string pattern;
  std::string quantize;
  std::int32_t threads = 2;
  PruneOptions o;
  CLI::Option* sparsity = nullptr;
};

bool writes_gguf(const PruneArgs& a) { return a.output.ends_with(".gguf"); }

// PruneOptions from the flags.
Expected<PruneOptions> options_of(const PruneArgs& a) {
  PruneOptions o = a.o;
  auto method = prune_method_from_name(a.method);
  if (!method) return invalid_argument("--method '" + a.method + "' is not one of magnitude, wanda, sparsegpt, layer-drop, width");
  o.method = *method;
  const bool weights = o.method == PruneMethod::kMagnitude || o.method == PruneMethod::kWanda || o.method == PruneMethod::kSparseGpt;
  const bool has_sparsity = a.sparsity->count() > 0;
  if (has_sparsity && !a.pattern.empty()) return invalid_argument("--sparsity and --pattern exclude each other");
  if (weights && !has_sparsity && a.pattern.empty()) return invalid_argument(a.method + " needs --sparsity F or --pattern N:M");
  if (!weights && (has_sparsity || !a.pattern.empty())) {
    return invalid_argument(a.method + " removes whole blocks or channels: --sparsity / --pattern do not apply");
  }
  if (!a.pattern.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(o.target, parse_nm_pattern(a.pattern));
  }
  if (!a.quantize.empty()) {
    if (a.quantize != "q4" && a.quantize != "q8") return invalid_argument("--quantize '" + a.quantize + "' is not q4 or q8");
    o.quant_bits = a.quantize == "q4" ? 4 : 8;
  }
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  return o;
}

Status write(const ModelFile& pruned, const PruneArgs& a, const ModelFile& src, const PruneOptions& o, PruneReport& rep) {
  std::string tokenizer = a.model.tokenizer;
  if (tokenizer.empty() && !src.gguf) {
    PEREGRINE_ASSIGN_OR_RETURN(tokenizer, tokenizer_file_of(src));
  }
  if (!writes_gguf(a)) return save_hf_model(pruned, a.output, HfQuantLayout::kGptq, tokenizer);
  PEREGRINE_ASSIGN_OR_RETURN(const ModelFile stored, gguf_storage(pruned, o.target, rep.pruned_linears, rep.notes));
  rep.bytes_after = stored.weight_bytes();
  return save_gguf_model(stored, a.output, tokenizer);
}

int run(const PruneArgs& a) {
  if (Status st = validate_threads(a.threads); !st) return report(st);
  auto o = options_of(a);
  if (!o) return report(o.status());
  ThreadPool pool(a.threads);
  auto src = open_model(a.model, &pool);
  if (!src) return report(src.status());
  auto tok = calibration_tokenizer(*src, a.model, o->needs_calibration());
  if (!tok) return report(tok.status());
  const auto start = std::chrono::steady_clock::now();
  PruneReport rep;
  auto pruned = prune_model(*src, tok->get(), *o, pool, &rep, progress_line("prune"));
  if (!pruned) return report(pruned.status());
  if (Status st = write(*pruned, a, *src, *o, rep); !st) return report(st);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& note : rep.notes) {
    if (note.find("distance") == std::string::npos && note.find("loss") == std::string::npos) std::printf("%s\n", note.c_str());
  }
  std::string what = a.method;
  if (rep.weights_before > 0) {
    char zeros[64];
    std::snprintf(zeros, sizeof zeros, ", %.1f%% of their weights zero",
                  100.0 * static_cast<double>(rep.weights_zero) / static_cast<double>(rep.weights_before));
    what += " " + o->target.describe() + (a.quantize.empty() ? "" : " + " + a.quantize) + ", " +
            std::to_string(rep.tensors_pruned) + " linears pruned" + zeros;
  }
  std::printf("wrote %s: %s, %.2f MB -> %.2f MB%s in %.1f s\n", a.output.c_str(), what.c_str(),
              static_cast<double>(rep.bytes_before) / 1e6, static_cast<double>(rep.bytes_after) / 1e6,
              rep.calib_tokens > 0 ? (", " + std::to_string(rep.calib_tokens) + " calibration tokens").c_str() : "", s);
  return 0;
}

}  // namespace

Verb add_prune(CLI::App& app) {
  auto a = std::make_shared<PruneArgs>();
  CLI::App* cmd = app.add_subcommand("prune", "Prune a model: magnitude, Wanda, SparseGPT (unstructured or N:M), layer-drop, width");
  add_model_options(*cmd, a->model);
  cmd->add_option("-o,--output", a->output, "Output: a .gguf file or a folder (safetensors)")->required();
  cmd->add_option("--method", a->method, "magnitude, wanda, sparsegpt, layer-drop, width")->capture_default_str();
  a->sparsity = cmd->add_option("--sparsity", a->o.target.sparsity, "Fraction of each linear's weights removed, in (0, 1)");
  cmd->add_option("--pattern", a->pattern, "N:M semi-structured sparsity: keep N of every M weights of a row (2:4, 4:8)");
  cmd->add_option("--quantize", a->quantize,
                  "q4 or q8: the kept weights as symmetric 4/8-bit codes (sparsegpt: in the same pass; magnitude, wanda: after)");
  cmd->add_option("--calib", a->o.calib_path, "Calibration text (wanda, sparsegpt, layer-drop, width); keep it apart from evaluation text");
  cmd->add_option("--calib-tokens", a->o.calib_tokens, "Calibration tokens (the text must hold them)")->capture_default_str();
  cmd->add_option("--calib-chunk", a->o.calib_chunk, "Tokens per calibration sequence")->capture_default_str();
  cmd->add_option("--damp", a->o.damp_percent, "sparsegpt dampening (fraction of mean diag H)")->capture_default_str();
  cmd->add_option("--drop", a->o.drop_layers, "layer-drop: number of consecutive blocks removed");
  cmd->add_option("--ffn-keep", a->o.ffn_keep, "width: fraction of FFN channels kept")->capture_default_str();
  cmd->add_option("--heads-keep", a->o.heads_keep, "width: fraction of KV head groups kept (with their query heads)")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  return {cmd, [a] { return run(*a); }};
}

}  // namespace peregrine::cli
