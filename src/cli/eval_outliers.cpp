#include "eval_outliers.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common.h"
#include "peregrine/quant/outlier_stats.h"

namespace peregrine::cli {
namespace {

struct OutlierArgs {
  ModelOptions model;
  std::string text_file;           // -f: the calibration text
  std::int64_t tokens = 2048;      // text tokens run through the model
  std::int64_t chunk = 512;        // tokens per forward
  float threshold = 6.0f;          // LLM.int8()'s outlier magnitude
  std::int64_t sample_rows = 512;  // rows per input the errors and row shares come from
  std::int32_t threads = 2;
  bool json = false;
};

// The four linear inputs of a layer, by LinearInput.
constexpr std::array<const char*, 4> kInputNames = {"attn_qkv", "attn_output", "ffn_gate_up", "ffn_down"};

Status check(const OutlierArgs& a) {
  PEREGRINE_RETURN_IF_ERROR(validate_threads(a.threads));
  if (a.tokens < 2) return invalid_argument("--tokens must be >= 2 (got " + std::to_string(a.tokens) + ")");
  if (a.chunk < 2) return invalid_argument("--chunk must be >= 2 (got " + std::to_string(a.chunk) + ")");
  if (!(a.threshold > 0.0f)) return invalid_argument("--threshold must be > 0 (got " + std::to_string(a.threshold) + ")");
  if (a.sample_rows < 1) return invalid_argument("--sample-rows must be >= 1 (got " + std::to_string(a.sample_rows) + ")");
  return Status::ok();
}

nlohmann::json to_json(const OutlierStats& s, std::int64_t layer, int input) {
  return {{"layer", layer},
          {"input", kInputNames[static_cast<std::size_t>(input)]},
          {"width", s.width},
          {"rows", s.n_rows},
          {"sample_rows", s.sample_rows},
          {"abs_max", s.abs_max},
          {"median_channel_max", s.median_channel_max},
          {"max_to_median", s.max_to_median()},
          {"outlier_channels", s.outlier_channels},
          {"outlier_row_share", s.outlier_row_share},
          {"int8_error", s.int8_error},
          {"int8_error_decomposed", s.int8_error_decomposed}};
}

void print_table(const std::vector<std::array<OutlierStats, 4>>& layers, float threshold) {
  std::printf("| layer | input | width | max |x| | median channel max | max / median | channels >= %g | rows with one | int8 error | outliers kept exact |\n",
              threshold);
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::array<double, 4> err{}, dec{};
  std::array<std::int64_t, 4> with{};
  for (std::size_t l = 0; l < layers.size(); ++l) {
    for (int in = 0; in < 4; ++in) {
      const OutlierStats& s = layers[l][static_cast<std::size_t>(in)];
      std::printf("| %zu | %s | %lld | %.2f | %.3f | %.1f | %lld | %.1f%% | %.4f | %.4f |\n", l, kInputNames[static_cast<std::size_t>(in)],
                  static_cast<long long>(s.width), s.abs_max, s.median_channel_max, s.max_to_median(),
                  static_cast<long long>(s.outlier_channels), 100.0 * s.outlier_row_share, s.int8_error, s.int8_error_decomposed);
      err[static_cast<std::size_t>(in)] += s.int8_error / static_cast<double>(layers.size());
      dec[static_cast<std::size_t>(in)] += s.int8_error_decomposed / static_cast<double>(layers.size());
      with[static_cast<std::size_t>(in)] += s.outlier_channels > 0;
    }
  }
  std::printf("\nper input over the %zu layers: layers with channels >= %g, mean int8 error (per-token absmax) -> with those channels exact\n",
              layers.size(), threshold);
  for (std::size_t in = 0; in < 4; ++in) {
    std::printf("  %-12s %3lld layers   %.4f -> %.4f\n", kInputNames[in], static_cast<long long>(with[in]), err[in], dec[in]);
  }
}

int run(const OutlierArgs& a) {
  if (Status st = check(a); !st.is_ok()) return report(st);
  ThreadPool pool(a.threads);
  auto file = open_model(a.model, &pool);
  if (!file) return report(file.status());
  const std::string name = std::filesystem::path(file->path).filename().string();
  auto tok = load_tokenizer(*file, a.model.tokenizer);
  if (!tok) return report(tok.status());
  auto model = LlamaModel::create(std::move(*file), weight_placement(a.model));
  if (!model) return report(model.status());
  auto chunks = calibration_chunks(**tok, a.text_file, a.tokens, std::min(a.chunk, model->config().max_seq_len));
  if (!chunks) return report(chunks.status());
  const std::int64_t n_layers = model->config().n_layers;
  auto stats = calibrate(*model, 0, n_layers - 1, *chunks, {false, a.sample_rows}, pool);
  if (!stats) return report(stats.status());
  std::vector<std::array<OutlierStats, 4>> layers(stats->size());
  for (std::size_t l = 0; l < stats->size(); ++l) {
    for (std::size_t in = 0; in < 4; ++in) layers[l][in] = outlier_stats((*stats)[l][in], a.threshold);
  }
  std::int64_t n_tokens = 0;
  for (const auto& c : *chunks) n_tokens += static_cast<std::int64_t>(c.size());
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t l = 0; l < layers.size(); ++l) {
      for (int in = 0; in < 4; ++in) rows.push_back(to_json(layers[l][static_cast<std::size_t>(in)], static_cast<std::int64_t>(l), in));
    }
    const nlohmann::json j = {{"model", name}, {"text", a.text_file}, {"tokens", n_tokens}, {"threshold", a.threshold}, {"inputs", rows}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("model: %s  text: %s  %lld tokens in chunks of %lld; errors over the first %lld rows of each input\n\n", name.c_str(),
                a.text_file.c_str(), static_cast<long long>(n_tokens), static_cast<long long>(a.chunk),
                static_cast<long long>(a.sample_rows));
    print_table(layers, a.threshold);
  }
  return 0;
}

}  // namespace

std::function<int()> add_eval_outliers(CLI::App& eval, CLI::App*& command) {
  auto a = std::make_shared<OutlierArgs>();
  command = eval.add_subcommand(
      "outliers",
      "Activation outliers of every linear input on a text (max |x| against the median channel's, channels >= --threshold, "
      "per-token int8 error with and without them): what SmoothQuant and LLM.int8() answer");
  add_model_options(*command, a->model);
  add_mmap_option(*command, a->model);
  command->add_option("-f,--file", a->text_file, "Text to run (keep it apart from evaluation text)")->required();
  command->add_option("--tokens", a->tokens, "Text tokens to run")->capture_default_str();
  command->add_option("--chunk", a->chunk, "Tokens per forward (each a fresh sequence)")->capture_default_str();
  command->add_option("--threshold", a->threshold, "Outlier magnitude (LLM.int8(): 6)")->capture_default_str();
  command->add_option("--sample-rows", a->sample_rows, "Rows of each input the errors and row shares come from")->capture_default_str();
  command->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  command->add_flag("--json", a->json, "Print one JSON object instead of the table");
  return [a] { return run(*a); };
}

}  // namespace peregrine::cli
