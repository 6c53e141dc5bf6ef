// GPTQ (quant/gptq.h) on real calibration data: stories260K run over the start of a real
// TinyStories text with an ActivationObserver; each linear layer's Hessian H = (2/n) Σ x xᵀ
// comes from the inputs it saw. GPTQ must reconstruct the layer outputs X Wᵀ better than RTN
// with the same grid (quant/int_group.h), match an unbatched scalar twin of the algorithm, and
// handle grid weights, dead inputs, threads and bad inputs as documented.
#include "peregrine/quant/gptq.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "peregrine/formats/model_file.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

constexpr std::size_t kCalibrationTokens = 400;

/// A linear layer's weights and the inputs it saw during the calibration forward.
struct Calibration {
  std::string name;
  std::int64_t rows = 0, cols = 0, n = 0;
  std::vector<float> w;       // [rows, cols]
  std::vector<float> x;       // [n, cols]
  std::vector<double> h;      // [cols, cols] (2/n) Σ x xᵀ
};

class Recorder : public ActivationObserver {
 public:
  void observe(std::int64_t layer, LinearInput input, std::span<const float> x, std::int64_t) override {
    auto& dst = inputs[{layer, input}];
    dst.insert(dst.end(), x.begin(), x.end());
  }
  std::map<std::pair<std::int64_t, LinearInput>, std::vector<float>> inputs;
};

std::vector<double> hessian_of(const std::vector<float>& x, std::int64_t n, std::int64_t cols) {
  std::vector<double> h(static_cast<std::size_t>(cols * cols));
  for (std::int64_t t = 0; t < n; ++t) {
    const float* xt = x.data() + t * cols;
    for (std::int64_t a = 0; a < cols; ++a) {
      for (std::int64_t b = 0; b < cols; ++b) {
        h[static_cast<std::size_t>(a * cols + b)] += 2.0 / static_cast<double>(n) * xt[a] * xt[b];
      }
    }
  }
  return h;
}

/// Runs stories260K over the first kCalibrationTokens tokens of the TinyStories sample and
/// returns the calibration of `names` (e.g. "blk.0.attn_q") for every layer listed.
std::map<std::string, Calibration> calibrate() {
  auto model = test::load_stories260k();
  auto tok = load_tokenizer(model->file());
  EXPECT_TRUE(tok) << tok.status().message();
  auto ids = (*tok)->encode(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt"), true);
  EXPECT_GE(ids.size(), kCalibrationTokens);
  ids.resize(kCalibrationTokens);
  Batch batch;
  for (std::size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<std::int32_t>(i), 0, i + 1 == ids.size());
  KvCache cache = test::make_kv_cache(model->config(), static_cast<std::int64_t>(ids.size()));
  ThreadPool pool(2);
  std::vector<float> logits;
  Recorder recorder;
  const Status st = model->forward(batch, cache, logits, pool, 0, &recorder);
  EXPECT_TRUE(st) << st.message();

  std::map<std::string, Calibration> out;
  const std::pair<const char*, LinearInput> linears[] = {
      {"attn_q", LinearInput::kAttention}, {"ffn_gate", LinearInput::kFfn}, {"ffn_down", LinearInput::kFfnDown}};
  for (std::int64_t layer : {0, 2, 4}) {
    for (const auto& [linear, input] : linears) {
      const std::string name = "blk." + std::to_string(layer) + "." + linear;
      const TensorView& t = model->file().tensors.at(name + ".weight");
      EXPECT_EQ(t.dtype, DType::kF32);
      Calibration c{name, t.shape[0], t.shape[1], static_cast<std::int64_t>(ids.size()),
                    {}, recorder.inputs.at({layer, input}), {}};
      const auto* data = static_cast<const float*>(t.data);
      c.w.assign(data, data + t.numel());
      EXPECT_EQ(c.x.size(), static_cast<std::size_t>(c.n * c.cols));
      c.h = hessian_of(c.x, c.n, c.cols);
      out[name] = std::move(c);
    }
  }
  return out;
}

const std::map<std::string, Calibration>& calibrations() {
  static const std::map<std::string, Calibration> c = calibrate();
  return c;
}

/// ||X Wᵀ - X Ŵᵀ||² over the calibration inputs.
double output_error(const Calibration& c, const std::vector<float>& w_hat) {
  double sum = 0.0;
  for (std::int64_t t = 0; t < c.n; ++t) {
    for (std::int64_t r = 0; r < c.rows; ++r) {
      double d = 0.0;
      for (std::int64_t j = 0; j < c.cols; ++j) {
        const auto i = static_cast<std::size_t>(r * c.cols + j);
        d += static_cast<double>(c.x[static_cast<std::size_t>(t * c.cols + j)]) * (c.w[i] - w_hat[i]);
      }
      sum += d * d;
    }
  }
  return sum;
}

std::vector<float> decode(const std::vector<std::uint8_t>& packed, std::int64_t rows, std::int64_t cols,
                          const QuantParams& p) {
  const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(cols));
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = std::span(out).subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols));
    dequantize_int_row(p, packed.data() + rb * static_cast<std::size_t>(r), row);
  }
  return out;
}

QuantParams params(int bits, std::int64_t group_size, bool asymmetric) {
  QuantParams p;
  p.bits = bits;
  p.group_size = group_size;
  p.asymmetric = asymmetric;
  return p;
}

std::string describe(const Calibration& c, const QuantParams& p) {
  return c.name + " " + std::to_string(p.bits) + "-bit g" +
         (p.group_size == c.cols ? "col" : std::to_string(p.group_size)) +
         (p.asymmetric ? " asym" : " sym");
}

/// Every quantization setting of the tests: bits 4 and 3, group 32 (partial last group for
/// ffn_down's 172 inputs) and per-channel, symmetric and asymmetric.
std::vector<QuantParams> settings(std::int64_t cols) {
  std::vector<QuantParams> out;
  for (int bits : {4, 3}) {
    for (std::int64_t g : {std::int64_t{32}, cols}) {
      for (bool asym : {false, true}) out.push_back(params(bits, g, asym));
    }
  }
  return out;
}

/// GPTQ vs RTN output error on every calibrated matrix and setting; returns the geometric mean
/// of the GPTQ/RTN error ratios per bit width.
std::map<int, double> check_beats_rtn(bool act_order) {
  std::map<int, double> log_ratio_sum;
  std::map<int, int> count;
  for (const auto& [name, c] : calibrations()) {
    for (const QuantParams& p : settings(c.cols)) {
      GptqOptions o;
      o.params = p;
      o.act_order = act_order;
      auto r = gptq_quantize(c.w, c.rows, c.cols, c.h, o);
      EXPECT_TRUE(r) << r.status().message();
      if (!r) continue;
      EXPECT_EQ(r->dequantized, decode(r->packed, c.rows, c.cols, p)) << describe(c, p);
      EXPECT_TRUE(std::isfinite(r->loss) && r->loss > 0.0) << describe(c, p);
      const double gptq = output_error(c, r->dequantized);
      const double rtn = output_error(c, decode(quantize_int_rtn(c.w, c.rows, c.cols, p), c.rows, c.cols, p));
      EXPECT_LT(gptq, rtn) << describe(c, p);
      std::printf("[ gptq%s ] %-28s output error GPTQ %.4g RTN %.4g ratio %.3f\n", act_order ? " act" : "",
                  describe(c, p).c_str(), gptq, rtn, gptq / rtn);
      log_ratio_sum[p.bits] += std::log(gptq / rtn);
      ++count[p.bits];
    }
  }
  std::map<int, double> geomean;
  for (const auto& [bits, sum] : log_ratio_sum) geomean[bits] = std::exp(sum / count[bits]);
  return geomean;
}

TEST(Gptq, BeatsRtnOnRealActivations) {
  const auto geomean = check_beats_rtn(false);
  std::printf("[ gptq ] geometric mean GPTQ/RTN: 4-bit %.3f, 3-bit %.3f\n", geomean.at(4), geomean.at(3));
}

TEST(Gptq, ActOrderBeatsRtnOnRealActivations) {
  const auto geomean = check_beats_rtn(true);
  std::printf("[ gptq act ] geometric mean GPTQ/RTN: 4-bit %.3f, 3-bit %.3f\n", geomean.at(4), geomean.at(3));
}

/// (H + λI)⁻¹ by Gauss-Jordan elimination, [n, n] row-major.
std::vector<double> damped_inverse(std::vector<double> h, std::size_t n, double damp_percent) {
  double mean_diag = 0.0;
  for (std::size_t j = 0; j < n; ++j) mean_diag += h[j * n + j] / static_cast<double>(n);
  for (std::size_t j = 0; j < n; ++j) h[j * n + j] += damp_percent * mean_diag;
  std::vector<double> inv(n * n, 0.0);
  for (std::size_t j = 0; j < n; ++j) inv[j * n + j] = 1.0;
  for (std::size_t k = 0; k < n; ++k) {
    const double pivot = h[k * n + k];
    for (std::size_t j = 0; j < n; ++j) {
      h[k * n + j] /= pivot;
      inv[k * n + j] /= pivot;
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (i == k) continue;
      const double f = h[i * n + k];
      for (std::size_t j = 0; j < n; ++j) {
        h[i * n + j] -= f * h[k * n + j];
        inv[i * n + j] -= f * inv[k * n + j];
      }
    }
  }
  return inv;
}

/// Algorithm 1 without Cholesky or lazy batches, in the OBS form (Frantar et al. eqs. 2-3):
/// after quantizing column j, the not-yet-quantized columns F get w_F -= (w_j - q_j) /
/// [H_F⁻¹]_jj · [H_F⁻¹]_j,F, and H_F⁻¹ drops j by one Gaussian elimination step. Columns in
/// natural order (group scales from the current weights at each group's first column) or by
/// decreasing diag(H) (group scales from the original weights). No dead inputs.
std::vector<float> unbatched_gptq(const Calibration& c, const QuantParams& p, double damp_percent, bool act_order) {
  const auto n = static_cast<std::size_t>(c.cols), gs = static_cast<std::size_t>(p.group_size);
  std::vector<double> inv = damped_inverse(c.h, n, damp_percent), w(c.w.begin(), c.w.end());
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const auto by_diag = [&c, n](std::size_t a, std::size_t b) { return c.h[a * n + a] > c.h[b * n + b]; };
  if (act_order) std::stable_sort(order.begin(), order.end(), by_diag);
  // scales[r * groups + g]; all of them now for act-order, each at its first column otherwise.
  const std::size_t groups = (n + gs - 1) / gs;
  std::vector<GroupScale> scales(static_cast<std::size_t>(c.rows) * groups);
  const auto set_scale = [&](std::size_t r, std::size_t g) {
    const std::vector<float> group(w.begin() + static_cast<std::ptrdiff_t>(r * n + g * gs),
                                   w.begin() + static_cast<std::ptrdiff_t>(r * n + std::min(n, (g + 1) * gs)));
    scales[r * groups + g] = rtn_group_scale(group, p.bits, p.asymmetric);
  };
  for (std::size_t r = 0; act_order && r < static_cast<std::size_t>(c.rows); ++r) {
    for (std::size_t g = 0; g < groups; ++g) set_scale(r, g);
  }
  std::vector<bool> done(n, false);
  std::vector<float> out(w.size());
  for (std::size_t j : order) {
    done[j] = true;
    for (std::size_t r = 0; r < static_cast<std::size_t>(c.rows); ++r) {
      if (!act_order && j % gs == 0) set_scale(r, j / gs);
      const GroupScale& g = scales[r * groups + j / gs];
      const float q = dequantize_code(quantize_code(static_cast<float>(w[r * n + j]), g, p.bits), g);
      out[r * n + j] = q;
      const double e = (w[r * n + j] - q) / inv[j * n + j];
      for (std::size_t k = 0; k < n; ++k) {
        if (!done[k]) w[r * n + k] -= e * inv[j * n + k];
      }
    }
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n && !done[a]; ++b) {
        if (!done[b]) inv[a * n + b] -= inv[a * n + j] * inv[j * n + b] / inv[j * n + j];
      }
    }
  }
  return out;
}

TEST(Gptq, MatchesUnbatchedAlgorithm) {
  for (const char* name : {"blk.2.attn_q", "blk.2.ffn_down"}) {
    const Calibration& c = calibrations().at(name);
    for (const QuantParams& p : settings(c.cols)) {
      for (bool act_order : {false, true}) {
        GptqOptions o;
        o.params = p;
        o.block_size = 16;
        o.act_order = act_order;
        auto r = gptq_quantize(c.w, c.rows, c.cols, c.h, o);
        ASSERT_TRUE(r) << r.status().message();
        EXPECT_EQ(r->dequantized, unbatched_gptq(c, p, o.damp_percent, act_order))
            << describe(c, p) << " act " << act_order;
      }
    }
  }
}

TEST(Gptq, BlockSizeAndThreadsDoNotChangeTheResult) {
  ThreadPool pool(2);
  for (const char* name : {"blk.0.ffn_gate", "blk.0.ffn_down"}) {
    const Calibration& c = calibrations().at(name);
    for (bool act_order : {false, true}) {
      GptqOptions o;
      o.params = params(4, 32, true);
      o.act_order = act_order;
      auto base = gptq_quantize(c.w, c.rows, c.cols, c.h, o);
      ASSERT_TRUE(base) << base.status().message();
      for (std::int64_t block : {1, 7, 128, 1000}) {
        o.block_size = block;
        auto r = gptq_quantize(c.w, c.rows, c.cols, c.h, o, block % 2 == 0 ? &pool : nullptr);
        ASSERT_TRUE(r) << r.status().message();
        EXPECT_EQ(r->packed, base->packed) << name << " block " << block;
        EXPECT_NEAR(r->loss, base->loss, 1e-9 * base->loss) << name << " block " << block;
      }
      auto threaded = gptq_quantize(c.w, c.rows, c.cols, c.h, o, &pool);
      ASSERT_TRUE(threaded);
      o.block_size = 1000;
      auto serial = gptq_quantize(c.w, c.rows, c.cols, c.h, o);
      ASSERT_TRUE(serial);
      EXPECT_EQ(threaded->packed, serial->packed);
      EXPECT_EQ(threaded->dequantized, serial->dequantized);
      EXPECT_EQ(threaded->loss, serial->loss);
    }
  }
}

TEST(Gptq, WeightsOnTheGridStayUnchanged) {
  const Calibration& c = calibrations().at("blk.0.attn_q");
  for (const QuantParams& p : settings(c.cols)) {
    // Weights that RTN maps to themselves: RTN-decoded weights, re-quantized until RTN
    // recomputes the same grid from them (an asymmetric group whose extreme codes rounded
    // inwards gets a narrower range the next time).
    std::vector<std::uint8_t> packed = quantize_int_rtn(c.w, c.rows, c.cols, p);
    std::vector<float> grid = decode(packed, c.rows, c.cols, p);
    for (int i = 0; i < 4 && quantize_int_rtn(grid, c.rows, c.cols, p) != packed; ++i) {
      packed = quantize_int_rtn(grid, c.rows, c.cols, p);
      grid = decode(packed, c.rows, c.cols, p);
    }
    ASSERT_EQ(quantize_int_rtn(grid, c.rows, c.cols, p), packed) << describe(c, p);
    for (bool act_order : {false, true}) {
      GptqOptions o;
      o.params = p;
      o.act_order = act_order;
      auto r = gptq_quantize(grid, c.rows, c.cols, c.h, o);
      ASSERT_TRUE(r) << r.status().message();
      EXPECT_EQ(r->dequantized, grid) << describe(c, p);
      EXPECT_EQ(r->packed, packed) << describe(c, p);
      EXPECT_EQ(r->loss, 0.0);
    }
  }
}

TEST(Gptq, DeadInputsAreZeroedAndTheRestStillBeatsRtn) {
  Calibration c = calibrations().at("blk.4.ffn_down");
  const std::int64_t dead[] = {3, 100, 171};
  for (std::int64_t t = 0; t < c.n; ++t) {
    for (std::int64_t j : dead) c.x[static_cast<std::size_t>(t * c.cols + j)] = 0.0f;
  }
  c.h = hessian_of(c.x, c.n, c.cols);
  for (bool act_order : {false, true}) {
    GptqOptions o;
    o.params = params(4, 32, true);
    o.act_order = act_order;
    auto r = gptq_quantize(c.w, c.rows, c.cols, c.h, o);
    ASSERT_TRUE(r) << r.status().message();
    for (std::int64_t row = 0; row < c.rows; ++row) {
      for (std::int64_t j : dead) EXPECT_EQ(r->dequantized[static_cast<std::size_t>(row * c.cols + j)], 0.0f);
    }
    EXPECT_EQ(r->dequantized, decode(r->packed, c.rows, c.cols, o.params));
    const double rtn = output_error(c, decode(quantize_int_rtn(c.w, c.rows, c.cols, o.params), c.rows, c.cols, o.params));
    EXPECT_LT(output_error(c, r->dequantized), rtn);
  }
}

TEST(Gptq, AllDeadHessianQuantizesToZero) {
  const Calibration& c = calibrations().at("blk.0.attn_q");
  GptqOptions o;
  o.params = params(4, 32, false);
  o.damp_percent = 0.0;
  auto r = gptq_quantize(c.w, c.rows, c.cols, std::vector<double>(c.h.size(), 0.0), o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(std::all_of(r->dequantized.begin(), r->dequantized.end(), [](float v) { return v == 0.0f; }));
}

TEST(Gptq, IndefiniteHessianNeedsDampening) {
  const std::vector<float> w = {0.5f, -0.25f, 0.125f, 1.0f};
  const std::vector<double> h = {1.0, 2.0, 2.0, 1.0};  // eigenvalues 3 and -1
  GptqOptions o;
  o.params = params(4, 2, false);
  o.damp_percent = 0.0;
  auto r = gptq_quantize(w, 2, 2, h, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("positive definite"), std::string::npos) << r.status().message();
  o.damp_percent = 0.01;  // λ doubles from 0.01 past 1 within the 10 retries
  EXPECT_TRUE(gptq_quantize(w, 2, 2, h, o));
}

TEST(Gptq, RejectsBadInputs) {
  const std::vector<float> w(8, 0.5f);
  const std::vector<double> h = {2.0, 0.5, 0.0, 0.0, 0.5, 2.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0};
  GptqOptions good;
  good.params = params(4, 2, true);
  ASSERT_TRUE(gptq_quantize(w, 2, 4, h, good));
  const auto expect_invalid = [&](std::span<const float> w2, std::int64_t rows, std::int64_t cols,
                                  std::span<const double> h2, const GptqOptions& o, const char* what) {
    auto r = gptq_quantize(w2, rows, cols, h2, o);
    ASSERT_FALSE(r) << what;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << what;
  };
  expect_invalid(w, 0, 4, h, good, "zero rows");
  expect_invalid(w, 3, 4, h, good, "w size");
  expect_invalid(w, 4, 2, h, good, "hessian size");
  expect_invalid(std::span(w).first(7), 2, 4, h, good, "short w");
  GptqOptions o = good;
  o.params.bits = 5;
  expect_invalid(w, 2, 4, h, o, "bits 5");
  o = good;
  o.params.group_size = 0;
  expect_invalid(w, 2, 4, h, o, "group 0");
  o.params.group_size = 5;
  expect_invalid(w, 2, 4, h, o, "group > cols");
  o = good;
  o.block_size = 0;
  expect_invalid(w, 2, 4, h, o, "block 0");
  o = good;
  o.damp_percent = -0.01;
  expect_invalid(w, 2, 4, h, o, "negative damp");
  o.damp_percent = std::nan("");
  expect_invalid(w, 2, 4, h, o, "NaN damp");
  std::vector<float> w_nan = w;
  w_nan[3] = std::nanf("");
  expect_invalid(w_nan, 2, 4, h, good, "NaN weight");
  std::vector<double> h_inf = h;
  h_inf[1] = INFINITY;
  expect_invalid(w, 2, 4, h_inf, good, "infinite hessian");
}

}  // namespace
}  // namespace peregrine
