// peregrine eval ppl | kld: quality of a model on a text over sliding windows
// (eval/eval_windows.h): its perplexity, or its KL divergence, top-1 agreement and perplexity
// change against a reference model (llama.cpp's `perplexity` / `--kl-divergence` statistics).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common.h"
#include "eval_outliers.h"
#include "peregrine/eval/logit_comparison.h"
#include "peregrine/eval/perplexity.h"
#include "peregrine/kv/kv_cache.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct EvalArgs {
  ModelOptions model;
  std::string ref;                // kld: the reference model (its tokenizer, or --tokenizer, reads the text)
  std::string text_file;          // -f
  std::int64_t ctx = 0;           // 0: the model's context (kld: the smaller of the two)
  std::int64_t stride = 0;        // 0: ctx / 2
  std::int64_t max_tokens = 0;    // 0: the whole text
  std::string scoring = "sliding";  // or "llamacpp": llama-perplexity's chunks
  std::int64_t chunks = 0;        // llamacpp scoring: chunks to score (0: all)
  std::string kv_type = "f32";    // the evaluated model's K/V (the reference keeps f32)
  std::int32_t threads = 2;
  bool json = false;
};

/// The text's tokens (with BOS when the tokenizer asks for one), cut to --max-tokens.
std::vector<std::int32_t> text_tokens(const Tokenizer& tok, const std::string& text, std::int64_t max_tokens) {
  std::vector<std::int32_t> ids = tok.encode(text, tok.add_bos_default());
  if (max_tokens > 0 && static_cast<std::int64_t>(ids.size()) > max_tokens) ids.resize(static_cast<std::size_t>(max_tokens));
  return ids;
}

/// The windows' options: defaults resolved against the model context `model_ctx`; llama.cpp's
/// chunks start with `tok`'s BOS when the model adds one.
EvalWindowOptions window_options(const EvalArgs& a, std::int64_t model_ctx, DType kv_type, const Tokenizer& tok) {
  const std::int64_t ctx = a.ctx != 0 ? a.ctx : model_ctx;
  EvalWindowOptions o{ctx, a.stride != 0 ? a.stride : std::max<std::int64_t>(1, ctx / 2), kv_type};
  o.llamacpp_chunks = a.scoring == "llamacpp";
  o.n_chunks = a.chunks;
  o.chunk_bos = tok.add_bos_default() ? tok.bos_id() : -1;
  return o;
}

/// The shared progress line, counting windows.
EvalProgress windows_progress(const char* what) {
  auto line = progress_line(what);
  return [line](std::int64_t done, std::int64_t total) { line(done, total, "windows"); };
}

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

/// The checked flags' KV type. Errors: kInvalidArgument (threads, --max-tokens, --kv-type).
Expected<DType> check_flags(const EvalArgs& a) {
  PEREGRINE_RETURN_IF_ERROR(validate_threads(a.threads));
  if (a.max_tokens < 0) return invalid_argument("--max-tokens must be >= 0 (got " + std::to_string(a.max_tokens) + ")");
  if (a.chunks < 0) return invalid_argument("--chunks must be >= 0 (got " + std::to_string(a.chunks) + ")");
  if (a.chunks > 0 && a.scoring != "llamacpp") return invalid_argument("--chunks needs --scoring llamacpp");
  return parse_kv_type(a.kv_type);
}

/// What both verbs read before evaluating: the text and -m's model (with --dtype).
struct Loaded {
  std::string text;
  ModelFile file;
  std::string name;  // -m's file name
  DType kv_type;     // --kv-type
};

Expected<Loaded> load_inputs(const EvalArgs& a, DType kv_type, ThreadPool& pool) {
  PEREGRINE_ASSIGN_OR_RETURN(std::string text, text_or_file("", a.text_file));
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile file, open_model(a.model, &pool));
  std::string name = file_name(file.path);
  return Loaded{std::move(text), std::move(file), std::move(name), kv_type};
}

/// Checks the flags, then runs body(inputs, pool) on the loaded inputs with a pool of
/// --threads; returns the verb's exit code (1 with one error line on a bad flag or input).
template <class Body>
int with_inputs(const EvalArgs& a, Body&& body) {
  auto kv_type = check_flags(a);
  if (!kv_type) return report(kv_type.status());
  ThreadPool pool(a.threads);
  auto in = load_inputs(a, *kv_type, pool);
  if (!in) return report(in.status());
  return body(*in, pool);
}

int run_ppl(const EvalArgs& a, Loaded& in, ThreadPool& pool) {
  const std::string& name = in.name;
  auto tok = load_tokenizer(in.file, a.model.tokenizer);
  if (!tok) return report(tok.status());
  auto model = LlamaModel::create(std::move(in.file), weight_placement(a.model));
  if (!model) return report(model.status());
  const auto tokens = text_tokens(**tok, in.text, a.max_tokens);
  const EvalWindowOptions o = window_options(a, model->config().max_seq_len, in.kv_type, **tok);
  auto r = perplexity(*model, tokens, o, pool, windows_progress("eval ppl"));
  if (!r) return report(r.status());
  if (a.json) {
    const nlohmann::json j = {{"model", name},         {"kv_type", a.kv_type}, {"ctx", o.ctx},
                              {"stride", o.stride},    {"scoring", a.scoring}, {"windows", r->n_windows},
                              {"tokens", r->n_scored}, {"nll", r->nll},      {"ppl", r->ppl}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("model: %s  kv: %s  tokens: %lld scored in %lld windows of %lld (stride %lld)\n", name.c_str(),
                a.kv_type.c_str(), static_cast<long long>(r->n_scored), static_cast<long long>(r->n_windows),
                static_cast<long long>(o.ctx), static_cast<long long>(o.stride));
    std::printf("ppl: %.4f  (nll %.4f nats/token)\n", r->ppl, r->nll);
  }
  return 0;
}

int run_kld(const EvalArgs& a, Loaded& in, ThreadPool& pool) {
  const std::string& name = in.name;
  auto ref_file = load_model_file(a.ref);
  if (!ref_file) return report(ref_file.status());
  const std::string ref_name = file_name(ref_file->path);
  auto tok = load_tokenizer(*ref_file, a.model.tokenizer);  // --tokenizer overrides the reference's
  if (!tok) return report(tok.status());
  auto ref = LlamaModel::create(std::move(*ref_file), weight_placement(a.model));
  if (!ref) return report(ref.status());
  auto model = LlamaModel::create(std::move(in.file), weight_placement(a.model));
  if (!model) return report(model.status());
  const auto tokens = text_tokens(**tok, in.text, a.max_tokens);
  const std::int64_t model_ctx = std::min(model->config().max_seq_len, ref->config().max_seq_len);
  const EvalWindowOptions o = window_options(a, model_ctx, in.kv_type, **tok);
  auto c = compare_logits(*ref, *model, tokens, o, pool, windows_progress("eval kld"));
  if (!c) return report(c.status());
  const double delta_ppl = c->candidate_ppl - c->reference_ppl;
  if (a.json) {
    const nlohmann::json j = {{"model", name},          {"ref", ref_name},          {"kv_type", a.kv_type},
                              {"ctx", o.ctx},           {"stride", o.stride},       {"windows", c->n_windows},
                              {"tokens", c->n_positions}, {"kld", c->mean_kl},      {"max_kld", c->max_kl},
                              {"top1", c->top1_agreement}, {"ppl", c->candidate_ppl}, {"ref_ppl", c->reference_ppl},
                              {"delta_ppl", delta_ppl}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("model: %s (kv %s)  ref: %s (kv f32)  tokens: %lld scored in %lld windows of %lld (stride %lld)\n",
                name.c_str(), a.kv_type.c_str(), ref_name.c_str(), static_cast<long long>(c->n_positions),
                static_cast<long long>(c->n_windows), static_cast<long long>(o.ctx), static_cast<long long>(o.stride));
    std::printf("mean KL(ref || model): %.6e nats  max %.6e\n", c->mean_kl, c->max_kl);
    std::printf("top-1 agreement: %.4f\n", c->top1_agreement);
    std::printf("ppl: %.4f  ref %.4f  delta %+.4f\n", c->candidate_ppl, c->reference_ppl, delta_ppl);
  }
  return 0;
}

void add_common_options(CLI::App& cmd, EvalArgs& a) {
  add_model_options(cmd, a.model);
  add_mmap_option(cmd, a.model);
  add_dtype_option(cmd, a.model);
  cmd.add_option("-f,--file", a.text_file, "Text to evaluate on (tokenized as one text)")->required();
  cmd.add_option("--ctx", a.ctx, "Tokens per window (0 = the model's context)")->capture_default_str();
  cmd.add_option("--stride", a.stride, "Tokens between window starts; later windows score only their new tokens (0 = ctx / 2)")
      ->capture_default_str();
  cmd.add_option("--max-tokens", a.max_tokens, "Evaluate only the text's first N tokens (0 = all)")->capture_default_str();
  cmd.add_option("--scoring", a.scoring,
                 "sliding: windows every --stride tokens, each new token scored once; llamacpp: llama-perplexity's "
                 "disjoint chunks of --ctx tokens, each starting with BOS and scoring its second half")
      ->check(CLI::IsMember({"sliding", "llamacpp"}))
      ->capture_default_str();
  cmd.add_option("--chunks", a.chunks, "--scoring llamacpp: score the first N chunks (0 = all; llama-perplexity's --chunks)")
      ->capture_default_str();
  cmd.add_option("--kv-type", a.kv_type, "KV cache element type of -m's model: f32, f16, q8_0, i8, f8_e4m3 or f8_e5m2")
      ->capture_default_str();
  cmd.add_option("-t,--threads", a.threads, "Threads")->capture_default_str();
  cmd.add_flag("--json", a.json, "Print one JSON object instead of text");
}

}  // namespace

Verb add_eval(CLI::App& app) {
  auto ppl = std::make_shared<EvalArgs>(), kld = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Evaluate a model on a text: perplexity (ppl), KL divergence against a reference (kld), activation outliers (outliers)");
  cmd->require_subcommand(1);
  CLI::App* ppl_cmd = cmd->add_subcommand("ppl", "Perplexity of -m's model on -f's text over sliding windows");
  add_common_options(*ppl_cmd, *ppl);
  CLI::App* kld_cmd = cmd->add_subcommand(
      "kld", "KL(ref || model) of the next-token distributions, top-1 agreement and ppl change against --ref");
  add_common_options(*kld_cmd, *kld);
  kld_cmd->add_option("--ref", kld->ref, "Reference model (same vocabulary; its K/V stay f32, its tokenizer reads the text)")
      ->required();
  CLI::App* outliers_cmd = nullptr;
  std::function<int()> outliers = add_eval_outliers(*cmd, outliers_cmd);
  return {cmd, [=] {
            if (outliers_cmd->parsed()) return outliers();
            return ppl_cmd->parsed() ? with_inputs(*ppl, [&](Loaded& in, ThreadPool& pool) { return run_ppl(*ppl, in, pool); })
                                     : with_inputs(*kld, [&](Loaded& in, ThreadPool& pool) { return run_kld(*kld, in, pool); });
          }};
}

}  // namespace peregrine::cli
