#include "real_model_eval.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "peregrine/core/text_file.h"
#include "peregrine/eval/logit_comparison.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

constexpr std::int64_t kMaxWindow = 256;

}  // namespace

RealModel load_real_model(const std::string& rel) {
  RealModel m;
  auto f = load_model_file(shared_dir() + "/models/" + rel);
  EXPECT_TRUE(f.has_value()) << f.status().message();
  if (!f.has_value()) return m;
  m.file = std::move(*f);
  auto tok = load_tokenizer(m.file);
  EXPECT_TRUE(tok.has_value()) << tok.status().message();
  if (tok.has_value()) m.tok = std::move(*tok);
  auto model = LlamaModel::create(m.file);
  EXPECT_TRUE(model.has_value()) << model.status().message();
  if (model.has_value()) m.f32 = std::make_unique<LlamaModel>(std::move(*model));
  auto text = read_text_file(shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt");
  EXPECT_TRUE(text.has_value());
  if (text.has_value() && m.tok) m.eval_tokens = m.tok->encode(*text, true);
  return m;
}

double mean_kld(const RealModel& m, ModelFile candidate, std::int64_t max_windows) {
  ThreadPool pool(2);
  auto model = LlamaModel::create(std::move(candidate));
  EXPECT_TRUE(model.has_value()) << model.status().message();
  if (!model.has_value() || !m.f32) return 1e9;
  const std::int64_t window = std::min(kMaxWindow, m.file.config.max_seq_len);
  auto windows = static_cast<std::int64_t>(m.eval_tokens.size()) / window;
  if (max_windows > 0) windows = std::min(windows, max_windows);
  double sum = 0.0;
  for (std::int64_t w = 0; w < windows; ++w) {
    auto c = compare_logits(*m.f32, *model, std::span<const std::int32_t>(m.eval_tokens.data() + w * window, window), pool);
    EXPECT_TRUE(c.has_value()) << c.status().message();
    if (!c.has_value()) return 1e9;
    sum += c->mean_kl;
  }
  return sum / static_cast<double>(windows);
}

std::string calibration_text_path() { return shared_dir() + "/data/tinystories/tinystories_sample.txt"; }

}  // namespace peregrine::test
