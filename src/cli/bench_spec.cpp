#include "bench_spec.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "peregrine/core/text_file.h"
#include "peregrine/engine/spec_bench.h"
#include "peregrine/engine/spec_cost.h"
#include "peregrine/eval/code_corpus.h"
#include "peregrine/spec/pld_drafter.h"

namespace peregrine::cli {
namespace {

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// The first sentence of a line (through its first ". "), or the whole line.
std::string first_sentences(const std::string& line, int n) {
  std::size_t end = 0;
  for (int i = 0; i < n; ++i) {
    const std::size_t dot = line.find(". ", end);
    if (dot == std::string::npos) return line;
    end = dot + 1;
  }
  return line.substr(0, end);
}

/// Up to `n` story lines (over 80 characters) of the TinyStories text `path`.
Expected<std::vector<std::string>> story_lines(const std::string& path, std::int32_t n) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read the benchmark text " + path + " (--spec-text)");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line) && static_cast<std::int32_t>(lines.size()) < n;) {
    if (line.size() > 80) lines.push_back(line);
  }
  if (lines.empty()) return invalid_argument("the benchmark text " + path + " has no story lines");
  return lines;
}

/// Up to `n` code-completion prompts (eval/code_corpus.h) from the held-out files of `dir`.
Expected<std::vector<std::string>> code_prompts(const std::string& dir, std::int32_t n) {
  if (dir.empty()) return not_found("no Python standard library found under /usr/lib (--spec-code DIR)");
  PEREGRINE_ASSIGN_OR_RETURN(const CodeCorpus corpus, split_code_corpus(dir));
  std::vector<std::string> prompts;
  for (const std::string& path : corpus.eval) {
    if (static_cast<std::int32_t>(prompts.size()) == n) break;
    PEREGRINE_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
    std::string prompt = code_completion_prompt(text, 1500, 6000);
    if (!prompt.empty()) prompts.push_back(std::move(prompt));
  }
  if (prompts.empty()) return invalid_argument("no held-out file of " + dir + " opens a function within 6000 characters");
  return prompts;
}

/// The prompts of one task. story: continue a TinyStories story from its first sentence.
/// repeat: a three-sentence passage, a blank line, then the passage's first words again, so that
/// continuing means repeating it (prompt lookup's best case). code: complete a held-out Python
/// standard library file from its start through a function's first line.
Expected<std::vector<std::string>> task_prompts(const SpecBenchArgs& a, const std::string& name) {
  if (name == "code") return code_prompts(a.code_dir.empty() ? default_python_source_dir() : a.code_dir, a.prompts);
  if (name != "story" && name != "repeat") {
    return invalid_argument("unknown --spec-tasks entry '" + name + "' (expected story, repeat or code)");
  }
  const std::string path = a.text.empty() ? shared_data_dir() + "/data/tinystories/tinystories_valid_excerpt.txt" : a.text;
  PEREGRINE_ASSIGN_OR_RETURN(const std::vector<std::string> lines, story_lines(path, a.prompts));
  std::vector<std::string> prompts;
  for (const std::string& line : lines) {
    if (name == "story") {
      prompts.push_back(first_sentences(line, 1));
    } else {
      const std::string passage = first_sentences(line, 3);
      prompts.push_back(passage + "\n\n" + passage.substr(0, passage.find(' ', 12)));
    }
  }
  return prompts;
}

Expected<std::vector<SpecBenchTask>> make_tasks(const SpecBenchArgs& a, const Tokenizer& tok) {
  std::vector<SpecBenchTask> tasks;
  for (const std::string& name : split(a.tasks)) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::vector<std::string> prompts, task_prompts(a, name));
    SpecBenchTask task{name, {}};
    for (const std::string& prompt : prompts) task.prompts.push_back(tok.encode(prompt, tok.add_bos_default()));
    tasks.push_back(std::move(task));
  }
  return tasks;
}

/// The SpecParams of a variant: chain (fixed draft_max), adaptive, tree (branching >= 2).
Expected<SpecParams> variant_params(SpecParams p, const std::string& variant) {
  if (variant == "adaptive") p.adaptive = true;
  else if (variant == "tree") p.branching = std::max(2, p.branching);
  else if (variant != "chain") return invalid_argument("unknown --spec-variants entry '" + variant + "' (chain, adaptive, tree)");
  if (variant != "tree") p.branching = 1;
  PEREGRINE_RETURN_IF_ERROR(p.validate());
  return p;
}

std::string label(const std::string& method, const std::string& variant, const SpecParams& p) {
  std::string s = method + " " + variant + " k=" + std::to_string(p.draft_max);
  if (p.branching > 1) s += " b=" + std::to_string(p.branching);
  return s;
}

/// α that makes Leviathan et al.'s E[tokens] = (1 − α^(γ+1)) / (1 − α) equal τ (bisection).
double alpha_from_tau(double tau, double gamma) {
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    const double e = mid >= 1.0 ? gamma + 1 : (1 - std::pow(mid, gamma + 1)) / (1 - mid);
    (e < tau ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

struct Column {
  SpecBenchMethod method;
  double cost_c = 0;  // draft seconds per token / target decode seconds
};

void print_results(const std::vector<SpecBenchRow>& rows, const std::vector<Column>& columns, double decode_s,
                   const std::vector<double>& verify_s, std::int32_t verify_k_max, bool greedy) {
  std::printf("| task | method | mean accepted τ | acceptance | tokens/s | speedup | decode speedup | identical |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const SpecBenchRow& r : rows) {
    std::printf("| %s | %s | %.2f | %.3f | %.1f | %.2fx | %.2fx | %s |\n", r.task.c_str(), r.method.c_str(), r.mean_accepted(),
                r.acceptance_rate(), r.tokens_per_second(), r.speedup(), r.decode_speedup(),
                !greedy ? "n/a" : r.identical ? "yes" : "NO");
  }
  std::printf("\ntarget decode step %.3f ms; verify cost v(k) = forward of 1 + k rows / 1 row:", 1e3 * decode_s);
  for (std::size_t k = 0; k < verify_s.size(); ++k) std::printf(" v(%zu)=%.2f", k, verify_s[k] / decode_s);
  std::printf("\n\n| task | method | γ (drafted/step) | α (from τ) | c (draft/target per token) | predicted (Leviathan, verify free) | predicted (measured v) | measured (decode) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const SpecBenchRow& r : rows) {
    if (r.steps == 0) continue;
    const Column* col = nullptr;
    for (const Column& c : columns) if (c.method.label == r.method) col = &c;
    if (col == nullptr) continue;
    const double gamma = static_cast<double>(r.drafted) / static_cast<double>(r.steps);
    const double tau = r.mean_accepted(), alpha = alpha_from_tau(tau, gamma);
    const auto k = static_cast<std::size_t>(std::clamp<long>(std::lround(gamma), 0, verify_k_max));
    const double v = verify_s[k] / decode_s;
    std::printf("| %s | %s | %.2f | %.3f | %.3f | %.2fx | %.2fx | %.2fx |\n", r.task.c_str(), r.method.c_str(), gamma, alpha,
                col->cost_c, tau / (gamma * col->cost_c + 1), tau / (gamma * col->cost_c + v), r.decode_speedup());
  }
}

}  // namespace

void add_spec_bench_options(CLI::App& cmd, SpecBenchArgs& a) {
  add_spec_options(cmd, a.spec);
  cmd.add_option("--spec-variants", a.variants, "With --spec: chain, adaptive and/or tree (comma list)")->capture_default_str();
  cmd.add_option("--spec-tasks", a.tasks, "With --spec: story, repeat and/or code (comma list)")->capture_default_str();
  cmd.add_option("--spec-prompts", a.prompts, "With --spec: prompts per task")->capture_default_str();
  cmd.add_option("--spec-text", a.text, "With --spec: the TinyStories text the prompts come from (one story per line)");
  cmd.add_option("--spec-code", a.code_dir,
                 "With --spec-tasks code: the directory of .py files whose held-out quarter (every fourth by name) "
                 "gives the prompts (default: the newest /usr/lib/python3.N)");
  cmd.add_option("--spec-temp", a.temperature,
                 "With --spec: 0 greedy (outputs checked identical to plain decoding), > 0 sampling at this temperature "
                 "(whole vocabulary, seeded per prompt)")
      ->capture_default_str();
}

int run_spec_bench_cli(const ModelOptions& model_options, const SpecBenchArgs& a, std::int32_t threads) {
  if (a.prompts < 1) return report(invalid_argument("--spec-prompts must be >= 1"));
  ThreadPool pool(threads);
  auto file = open_model(model_options, &pool);
  if (!file) return report(file.status());
  auto tokenizer = load_tokenizer(*file, model_options.tokenizer);
  if (!tokenizer) return report(tokenizer.status());
  auto model = LlamaModel::create(std::move(*file), weight_placement(model_options));
  if (!model) return report(model.status());
  auto tasks = make_tasks(a, **tokenizer);
  if (!tasks) return report(tasks.status());
  const std::int64_t ctx = std::min<std::int64_t>(model->config().max_seq_len, 1024);
  std::vector<DrafterSetup> setups;
  std::vector<Column> columns;
  auto pld = PldDrafter::create({});
  if (!pld) return report(pld.status());
  for (const std::string& method : split(a.spec.method)) {
    SpecOptions one = a.spec;
    one.method = method;
    if (method != "draft" && method != "medusa" && method != "eagle") one.draft_model.clear();  // --draft-* options of the other methods
    if (method != "layerskip") one.draft_layers = 0;
    auto params = spec_params(one);
    if (!params) return report(params.status());
    auto setup = make_drafter(one, *model, model_options, ctx, 1, pool);
    if (!setup) return report(setup.status());
    Drafter* drafter = setup->drafter ? setup->drafter.get() : pld->get();
    auto per_token = measure_draft_seconds_per_token(*drafter, model->config(), 64, params->draft_max, 10, pool);
    if (!per_token) return report(per_token.status());
    for (const std::string& variant : split(a.variants)) {
      auto p = variant_params(*params, variant);
      if (!p) return report(p.status());
      columns.push_back({{label(method, variant, *p), *p, setup->drafter.get()}, *per_token});
    }
    setups.push_back(std::move(*setup));
  }
  std::vector<std::int32_t> ks;
  for (std::int32_t k = 0; k <= a.spec.draft_max; ++k) ks.push_back(k);
  auto verify = measure_verify_seconds(*model, 64, ks, 10, pool);
  if (!verify) return report(verify.status());
  for (Column& c : columns) c.cost_c /= (*verify)[0];
  std::vector<SpecBenchMethod> methods;
  for (const Column& c : columns) methods.push_back(c.method);
  auto rows = run_spec_bench(*model, *tasks, methods, a.n_gen, a.reps, pool, a.temperature);
  if (!rows) return report(rows.status());
  const std::string mode = a.temperature > 0.0f ? "sampling at temperature " + std::to_string(a.temperature) : "greedy";
  std::printf("speculative decoding, %s, %d tokens per prompt, %d prompts per task, %d threads\n", mode.c_str(), a.n_gen,
              a.prompts, threads);
  print_results(*rows, columns, (*verify)[0], *verify, a.spec.draft_max, a.temperature == 0.0f);
  return 0;
}

}  // namespace peregrine::cli
