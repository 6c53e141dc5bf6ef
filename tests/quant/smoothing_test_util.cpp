#include "smoothing_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "peregrine/eval/logit_comparison.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

LlamaModel build(const FloatModel& m) {
  auto model = LlamaModel::create(m.view());
  if (!model) {
    ADD_FAILURE() << model.status().message();
    std::abort();
  }
  return std::move(*model);
}

class Recorder : public ActivationObserver {
 public:
  explicit Recorder(ActivationMap& out) : out_(out) {}
  void observe(std::int64_t layer, LinearInput input, std::span<const float> x, std::int64_t n_rows) override {
    Activations& a = out_[{layer, input}];
    a.width = static_cast<std::int64_t>(x.size()) / n_rows;
    a.x.insert(a.x.end(), x.begin(), x.end());
  }

 private:
  ActivationMap& out_;
};

}  // namespace

std::string stories260k_bin() { return shared_dir() + "/models/stories260K/stories260K.bin"; }
std::string aidreams260k_bin() { return shared_dir() + "/models/aidreams260K/aidreams260K.bin"; }

FloatModel load_float_model(const std::string& path) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file) << file.status().message();
  if (!file) return {};
  auto m = FloatModel::from(*file);
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::move(*m) : FloatModel{};
}

std::vector<std::int32_t> story_tokens(const FloatModel& m) {
  auto tok = load_tokenizer(m.source(), "");
  EXPECT_TRUE(tok) << tok.status().message();
  if (!tok) return {};
  const std::string text = read_file(shared_dir() + "/data/tinystories/tinystories_sample.txt");
  auto ids = (*tok)->encode(text, true);
  ids.resize(std::min<std::size_t>(ids.size(), static_cast<std::size_t>(m.config().max_seq_len)));
  return ids;
}

std::vector<float> model_logits(const FloatModel& m, std::span<const std::int32_t> tokens, ThreadPool& pool) {
  const LlamaModel model = build(m);
  auto logits = teacher_forced_logits(model, tokens, pool);
  EXPECT_TRUE(logits) << logits.status().message();
  return logits ? std::move(*logits) : std::vector<float>{};
}

double max_relative_diff(std::span<const float> a, std::span<const float> b) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
  }
  return diff / scale;
}

ActivationMap record_activations(const FloatModel& m, std::span<const std::int32_t> tokens, ThreadPool& pool) {
  const LlamaModel model = build(m);
  KvCache cache = make_kv_cache(model.config(), static_cast<std::int64_t>(tokens.size()));
  Batch batch;
  for (std::size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<std::int32_t>(i), 0, i + 1 == tokens.size());
  ActivationMap out;
  Recorder recorder(out);
  std::vector<float> logits;
  const Status st = model.forward(batch, cache, logits, pool, 0, &recorder);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return out;
}

}  // namespace peregrine::test
