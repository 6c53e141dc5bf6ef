// peregrine pareto: "which configuration of this model should I run on this machine?" — runs a
// set of configurations of one model (eval/pareto_configs.h) against its F32 reference, writes
// their quality (KLD, perplexity) and cost (decode / prefill tokens/s, bytes) to a folder as
// JSON and CSV (eval/pareto_store.h; resumable), prints the Pareto fronts, recommends the
// fastest configuration within a quality budget, and plots both fronts with matplotlib
// (tools/pareto_plot.py, run by the project's virtual environment).
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "peregrine/core/available_memory.h"
#include "peregrine/core/output_file.h"
#include "peregrine/core/text_file.h"
#include "peregrine/eval/pareto_store.h"
#include "peregrine/eval/pareto_sweep.h"
#include "peregrine/kernels/cpu/isa.h"
#include "verbs.h"

extern char** environ;

namespace peregrine::cli {
namespace {

struct ParetoArgs {
  ModelOptions model;
  std::string out;
  std::string configs = "all";
  std::string eval_text, calib_text;
  std::int64_t eval_tokens = 2048, ctx = 512;
  BenchParams bench{128, 32, 1, 2};
  std::int32_t threads = 2;
  std::optional<double> max_kld, max_ppl_increase;
  std::string python;
  bool restart = false, no_plot = false, list = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Status check_args(const ParetoArgs& a) {
  PEREGRINE_RETURN_IF_ERROR(validate_threads(a.threads));
  if (a.eval_tokens < 64) return invalid_argument("--eval-tokens must be >= 64 (got " + std::to_string(a.eval_tokens) + ")");
  if (a.ctx < 16 || a.ctx > a.eval_tokens) {
    return invalid_argument("--ctx must be in [16, --eval-tokens] (got " + std::to_string(a.ctx) + ")");
  }
  if (a.bench.n_prompt < 1 || a.bench.n_gen < 1 || a.bench.reps < 1) {
    return invalid_argument("--n-prompt, --n-gen and --repetitions must be >= 1");
  }
  if (a.max_kld && !(*a.max_kld >= 0.0)) return invalid_argument("--max-kld must be >= 0");
  if (a.max_ppl_increase && !(*a.max_ppl_increase >= 0.0)) return invalid_argument("--max-ppl-increase must be >= 0");
  if (a.out.empty()) return invalid_argument("-o/--output: the folder for the results is required");
  return Status::ok();
}

void print_catalogue() {
  for (const ParetoConfig& c : pareto_catalogue()) {
    std::printf("%-18s %-6s %s%s\n", c.name.c_str(), c.technique.c_str(), c.describe.c_str(),
                c.needs_calibration() ? " [calibrated]" : "");
  }
}

/// The texts of a sweep: evaluation tokens and the calibration text's path.
struct Texts {
  std::vector<std::int32_t> tokens;
  std::string calib_path;
  std::string eval_name;
};

/// --eval-text (default: WikiText-2's test set) cut to its first --eval-tokens tokens. Without
/// --calib-text, the evaluated text is the file's first half and the calibration text its second
/// half, written to DIR/calibration.txt, so the two never overlap.
Expected<Texts> read_texts(const ParetoArgs& a, const Tokenizer& tok) {
  const std::string eval_path = a.eval_text.empty() ? shared_data_dir() + "/data/wikitext-2/wiki.test.raw" : a.eval_text;
  PEREGRINE_ASSIGN_OR_RETURN(std::string text, read_text_file(eval_path));
  Texts t{{}, a.calib_text, std::filesystem::path(eval_path).filename().string()};
  if (a.calib_text.empty()) {
    const std::size_t half = text.size() / 2;
    t.calib_path = (std::filesystem::path(a.out) / "calibration.txt").string();
    PEREGRINE_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(t.calib_path));
    PEREGRINE_RETURN_IF_ERROR(f.write({reinterpret_cast<const std::uint8_t*>(text.data()) + half, text.size() - half}));
    PEREGRINE_RETURN_IF_ERROR(f.close());
    text.resize(half);
  }
  const std::size_t enough_chars = static_cast<std::size_t>(a.eval_tokens) * 16;  // > 10 characters per token
  if (text.size() > enough_chars) text.resize(enough_chars);
  t.tokens = tok.encode(text, tok.add_bos_default());
  if (static_cast<std::int64_t>(t.tokens.size()) < a.eval_tokens) {
    return invalid_argument(eval_path + (a.calib_text.empty() ? " (its first half)" : "") + " holds " +
                            std::to_string(t.tokens.size()) + " tokens, fewer than --eval-tokens " + std::to_string(a.eval_tokens));
  }
  t.tokens.resize(static_cast<std::size_t>(a.eval_tokens));
  return t;
}

/// What the points depend on; a folder holding points of other settings is not resumed.
nlohmann::json setup_of(const ParetoArgs& a, const ModelFile& file, const Texts& t) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file.path, ec);
  return {{"model", std::filesystem::path(file.path).filename().string()},
          {"model_bytes", ec ? 0 : size},
          {"eval_text", t.eval_name},
          {"calib_text", a.calib_text.empty() ? "second half of " + t.eval_name : a.calib_text},
          {"eval_tokens", a.eval_tokens},
          {"ctx", a.ctx},
          {"n_prompt", a.bench.n_prompt},
          {"n_gen", a.bench.n_gen},
          {"threads", a.threads},
          {"kernels", std::string(isa_level_name(isa_level()))}};
}

bool has_point(const ParetoRun& run, const std::string& name) {
  for (const ParetoPoint& p : run.points) {
    if (p.name == name) return true;
  }
  return false;
}

/// Prints every point (lowest KLD first) with its front membership: S on the speed front, B on
/// the bytes front.
void print_points(const std::vector<ParetoPoint>& points) {
  const auto speed = pareto_front(points, ParetoAxis::kSpeed), size = pareto_front(points, ParetoAxis::kSize);
  std::vector<std::size_t> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return points[x].kld < points[y].kld; });
  std::printf("\n| %-18s | %-6s | %10s | %6s | %9s | %8s | %9s | %10s | %-5s |\n", "config", "tech", "KLD (nats)", "top-1",
              "ppl", "ppl +%", "size (MB)", "decode t/s", "front");
  std::printf("|--------------------|--------|------------|--------|-----------|----------|-----------|------------|-------|\n");
  for (std::size_t i : order) {
    const ParetoPoint& p = points[i];
    const bool s = std::find(speed.begin(), speed.end(), i) != speed.end(), b = std::find(size.begin(), size.end(), i) != size.end();
    std::printf("| %-18s | %-6s | %10.5f | %6.3f | %9.3f | %+8.2f | %9.1f | %10.2f | %-5s |\n", p.name.c_str(), p.technique.c_str(),
                p.kld, p.top1, p.ppl, p.ppl_increase_pct(), p.weight_bytes / 1e6, p.decode_tps,
                (std::string(s ? "S" : "") + (b ? "B" : "")).c_str());
  }
  std::printf("front S: no other configuration has a lower KLD and a faster decode; B: a lower KLD and fewer bytes\n");
}

void print_recommendation(const ParetoArgs& a, const std::vector<ParetoPoint>& points) {
  if (!a.max_kld && !a.max_ppl_increase) {
    std::printf("give --max-kld NATS and/or --max-ppl-increase PERCENT for the fastest configuration within that budget\n");
    return;
  }
  const auto best = recommend(points, {a.max_kld, a.max_ppl_increase});
  char budget[96] = "";
  if (a.max_kld) std::snprintf(budget, sizeof budget, "KLD <= %g nats", *a.max_kld);
  if (a.max_ppl_increase) {
    const std::size_t used = std::strlen(budget);
    std::snprintf(budget + used, sizeof budget - used, "%sppl <= +%g%%", used > 0 ? ", " : "", *a.max_ppl_increase);
  }
  if (!best) {
    std::printf("no configuration is within the budget (%s)\n", budget);
    return;
  }
  const ParetoPoint& p = points[*best];
  std::printf("recommended within the budget (%s): %s — %s: KLD %.5f, ppl %+.2f%%, decode %.2f tok/s, prefill %.1f tok/s, %.1f MB\n",
              budget, p.name.c_str(), p.describe.c_str(), p.kld, p.ppl_increase_pct(), p.decode_tps, p.prefill_tps,
              p.weight_bytes / 1e6);
}

/// Runs `python tools/pareto_plot.py DIR`. Errors: kUnavailable (no interpreter, or the script
/// failed: matplotlib missing).
Status plot(const ParetoArgs& a) {
  std::string python = a.python;
  if (python.empty()) {
    const char* env = std::getenv("PEREGRINE_PYTHON");
    python = env != nullptr && *env != '\0' ? env : repository_file(".venv/bin/python");
  }
  std::string script = repository_file("tools/pareto_plot.py"), dir = a.out;
  std::vector<char*> argv = {python.data(), script.data(), dir.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    return unavailable("cannot run " + python + " to plot (make the virtual environment with scripts/setup.sh, or pass --python)");
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return unavailable(python + " " + script + " failed (is matplotlib installed? scripts/setup.sh installs it)");
  }
  return Status::ok();
}

/// The reference: -m's model with every matrix F32, its tokenizer and the texts; its engine
/// model and logits once there is something to compare with them (add_reference_logits).
struct Reference {
  ModelFile file;
  std::unique_ptr<Tokenizer> tok;
  Texts texts;
  std::optional<LlamaModel> model;
  ReferenceLogits logits;
  double seconds = 0.0;   // its evaluation's wall time
  bool in_place = false;  // its weights read in place rather than copied into huge pages
};

Expected<Reference> load_reference(const ParetoArgs& a, ThreadPool& pool) {
  ModelOptions o = a.model;
  o.dtype = "f32";
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile file, open_model(o, &pool));
  if (a.ctx > file.config.max_seq_len) {
    return invalid_argument("--ctx " + std::to_string(a.ctx) + " is longer than the model's context " +
                            std::to_string(file.config.max_seq_len));
  }
  PEREGRINE_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, load_tokenizer(file, a.model.tokenizer));
  PEREGRINE_ASSIGN_OR_RETURN(Texts texts, read_texts(a, *tok));
  return Reference{std::move(file), std::move(tok), std::move(texts), std::nullopt, {}, 0.0, false};
}

/// Builds the reference's engine model and its logits over the evaluation tokens. The sweep
/// holds the F32 file, these logits and one configuration (its file and its copy): where the
/// reference's own copy into huge pages would not leave room for them, its weights are read in
/// place (as --mmap), which its points say.
Status add_reference_logits(const ParetoArgs& a, Reference& ref, ThreadPool& pool) {
  const auto f32_bytes = static_cast<double>(ref.file.weight_bytes());
  const auto available = available_memory_bytes();
  ref.in_place = available && 3.0 * f32_bytes > static_cast<double>(*available);
  if (ref.in_place) {
    std::printf("pareto: the F32 reference (%.1f GB) is read in place: a copy would not leave room for the sweep (%.1f GB available)\n",
                f32_bytes / 1e9, static_cast<double>(*available) / 1e9);
  }
  PEREGRINE_ASSIGN_OR_RETURN(ref.model, LlamaModel::create(ref.file, ref.in_place ? WeightPlacement::kInPlace : WeightPlacement::kHugePages));
  const auto start = Clock::now();
  auto line = progress_line("pareto: reference logits");
  PEREGRINE_ASSIGN_OR_RETURN(ref.logits, reference_logits(*ref.model, ref.texts.tokens, {a.ctx, a.ctx / 2, DType::kF32}, pool,
                                                          [&](std::int64_t d, std::int64_t n) { line(d, n, "windows"); }));
  ref.seconds = seconds_since(start);
  return Status::ok();
}

/// Measures `todo` into `run`, saving after each point; prints a line per configuration with
/// the time left (the prior of ParetoConfig::build_cost, rescaled by the times measured so
/// far). Returns the number of configurations that failed.
std::size_t sweep(const ParetoArgs& a, const Reference& ref, const std::vector<ParetoConfig>& todo, ParetoRun& run,
                  ThreadPool& pool) {
  const ParetoSweep s{ref.file, *ref.model, ref.logits, ref.texts.tokens, *ref.tok, ref.texts.calib_path, a.bench, ref.in_place};
  // Prior cost of a configuration, in reference evaluations: its own evaluation, the timing
  // (about as long), and its build.
  auto cost = [](const ParetoConfig& c) { return 2.0 + c.build_cost(); };
  double total = 0.0, done_cost = 0.0;
  for (const ParetoConfig& c : todo) total += cost(c);
  std::printf("pareto: %zu configuration(s) to run, about %.1f min (the reference's evaluation took %.1f s)\n", todo.size(),
              total * ref.seconds / 60.0, ref.seconds);
  std::fflush(stdout);  // before the progress lines on stderr
  const auto start = Clock::now();
  std::size_t failed = 0;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const double elapsed = seconds_since(start);
    const double per_cost = done_cost > 0.0 ? elapsed / done_cost : ref.seconds;
    std::fprintf(stderr, "pareto: [%zu/%zu] %-18s  %.1f min elapsed, about %.1f min left\n", i + 1, todo.size(),
                 todo[i].name.c_str(), elapsed / 60.0, (total - done_cost) * per_cost / 60.0);
    auto p = measure_pareto_point(s, todo[i], pool);
    done_cost += cost(todo[i]);
    if (!p) {
      std::fprintf(stderr, "pareto: %s failed: %s\n", todo[i].name.c_str(), p.status().message().c_str());
      ++failed;
      continue;
    }
    run.points.push_back(std::move(*p));
    if (Status st = save_pareto_run(a.out, run); !st) {
      std::fprintf(stderr, "pareto: %s\n", st.message().c_str());
      ++failed;
    }
  }
  std::printf("pareto: ran %zu configuration(s) in %.1f min\n", todo.size() - failed, seconds_since(start) / 60.0);
  return failed;
}

/// Loads DIR's earlier run, refusing one of other settings unless --restart.
Expected<ParetoRun> previous_run(const ParetoArgs& a, const nlohmann::json& setup) {
  PEREGRINE_ASSIGN_OR_RETURN(ParetoRun run, load_pareto_run(a.out));
  if (a.restart || run.setup.is_null()) return ParetoRun{setup, {}};
  if (run.setup != setup) {
    return invalid_argument(a.out + " holds a run of other settings (" + run.setup.dump() + ", now " + setup.dump() +
                            "): give another -o, or --restart to replace it");
  }
  return run;
}

int run(const ParetoArgs& a) {
  if (a.list) {
    print_catalogue();
    return 0;
  }
  if (Status st = check_args(a); !st) return report(st);
  auto configs = select_pareto_configs(a.configs);
  if (!configs) return report(configs.status());
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) return report(io_error("cannot create " + a.out + ": " + ec.message()));
  ThreadPool pool(a.threads);
  auto ref = load_reference(a, pool);
  if (!ref) return report(ref.status());
  auto run = previous_run(a, setup_of(a, ref->file, ref->texts));
  if (!run) return report(run.status());
  std::vector<ParetoConfig> todo;
  for (const ParetoConfig& c : *configs) {
    if (!has_point(*run, c.name)) todo.push_back(c);
  }
  if (todo.size() < configs->size()) {
    std::printf("pareto: %zu of the %zu configurations were measured earlier in %s (not run again)\n",
                configs->size() - todo.size(), configs->size(), a.out.c_str());
  }
  std::fflush(stdout);
  if (!todo.empty()) {
    if (Status st = add_reference_logits(a, *ref, pool); !st) return report(st);
  }
  const std::size_t failed = todo.empty() ? 0 : sweep(a, *ref, todo, *run, pool);
  if (Status st = save_pareto_run(a.out, *run); !st) return report(st);
  print_points(run->points);
  print_recommendation(a, run->points);
  if (!a.no_plot) {
    if (Status st = plot(a); !st) return report(st);
  }
  std::printf("wrote %s/pareto.json, pareto.csv%s\n", a.out.c_str(), a.no_plot ? "" : ", pareto_speed.png, pareto_size.png");
  if (failed > 0) return report(unavailable(std::to_string(failed) + " configuration(s) failed (above); run again to retry them"));
  return 0;
}

}  // namespace

Verb add_pareto(CLI::App& app) {
  auto a = std::make_shared<ParetoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "pareto", "Quality vs compute of a model's configurations (quantization, pruning, KV types) on this machine: fronts, plots, advice");
  add_model_options(*cmd, a->model);
  cmd->add_option("-o,--output", a->out, "Folder for pareto.json / .csv / *.png (an earlier run there of the same settings resumes)");
  cmd->add_option("--configs", a->configs, "all, quick (no calibration), or comma-separated names (--list)")->capture_default_str();
  cmd->add_flag("--list", a->list, "List the configurations and exit");
  cmd->add_option("--eval-text", a->eval_text, "Evaluation text (default: WikiText-2 test, its first half)");
  cmd->add_option("--calib-text", a->calib_text,
                  "Calibration text for GPTQ, AWQ, SmoothQuant, Wanda, SparseGPT (default: the evaluation file's second half)");
  cmd->add_option("--eval-tokens", a->eval_tokens, "Tokens of the evaluation text scored")->capture_default_str();
  cmd->add_option("--ctx", a->ctx, "Tokens per evaluation window (stride ctx / 2)")->capture_default_str();
  cmd->add_option("-p,--n-prompt", a->bench.n_prompt, "Prompt tokens of the prefill timing")->capture_default_str();
  cmd->add_option("-n,--n-gen", a->bench.n_gen, "Decoded tokens of the decode timing")->capture_default_str();
  cmd->add_option("-r,--repetitions", a->bench.reps, "Timed repetitions of each timing")->capture_default_str();
  cmd->add_option("--max-kld", a->max_kld, "Quality budget: mean KL divergence from the reference, nats");
  cmd->add_option("--max-ppl-increase", a->max_ppl_increase, "Quality budget: perplexity increase over the reference, percent");
  cmd->add_flag("--restart", a->restart, "Discard the points already in -o");
  cmd->add_flag("--no-plot", a->no_plot, "Write only JSON and CSV");
  cmd->add_option("--python", a->python, "Python with matplotlib for the plots (default: $PEREGRINE_PYTHON, else the repository's .venv)");
  cmd->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  return {cmd, [a] { return run(*a); }};
}

}  // namespace peregrine::cli
