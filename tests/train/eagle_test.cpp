// EAGLE-1 training (train/eagle.h) on stories260K: the loss falls, training is deterministic for a
// seed, eagle_reference's first row equals a hand-written evaluation of the layout (fc reads the
// token's embedding first, then the feature; one query row attends only to itself), the trained
// head agrees with the target's top-1 on held-out text more often than an untrained one, and the
// written folder loads strictly into EAGLE's own module structure (PyTorch,
// tools/eagle_layout_check.py) with the same predicted features on every row.
#include "peregrine/train/eagle.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "peregrine/train/target_features.h"
#include "stories_teacher.h"
#include "test_paths.h"

namespace peregrine::train {
namespace {

EagleOptions small_run() {
  EagleOptions o;
  o.steps = 60;
  o.batch = 4;
  o.seq = 64;
  o.warmup = 4;
  o.seed = 3;
  return o;
}

using Vec = std::vector<double>;

// y = W x (+ b) with W [out, in] row-major.
Vec linear(const std::vector<float>& w, const Vec& x, const std::vector<float>* b = nullptr) {
  const std::size_t in = x.size(), out = w.size() / in;
  Vec y(out, 0.0);
  for (std::size_t o = 0; o < out; ++o) {
    double s = b != nullptr ? (*b)[o] : 0.0;
    for (std::size_t i = 0; i < in; ++i) s += static_cast<double>(w[o * in + i]) * x[i];
    y[o] = s;
  }
  return y;
}

// The head's predicted feature for the first row (position 0), written out from the layout's
// tensors: with one row, attention's softmax is 1 and RoPE does not touch V.
Vec first_row_by_hand(const EagleHead& h, const FloatModel& target, std::int32_t next_token, std::span<const float> f0) {
  const auto& t = h.tensors;
  const std::size_t d = static_cast<std::size_t>(h.hidden);
  const auto embedding = target.tensor("token_embd.weight");
  Vec x(2 * d);
  for (std::size_t i = 0; i < d; ++i) {
    x[i] = embedding[static_cast<std::size_t>(next_token) * d + i];  // cat(embed(x_1), f_0)
    x[d + i] = f0[i];
  }
  Vec h0 = linear(t.at("fc.weight"), x, &t.at("fc.bias"));
  const Vec v = linear(t.at("layers.0.self_attn.v_proj.weight"), h0);
  const std::size_t hd = static_cast<std::size_t>(h.head_dim), group = static_cast<std::size_t>(h.heads / h.kv_heads);
  Vec attn(static_cast<std::size_t>(h.heads) * hd);
  for (std::size_t q = 0; q < static_cast<std::size_t>(h.heads); ++q) {
    for (std::size_t i = 0; i < hd; ++i) attn[q * hd + i] = v[(q / group) * hd + i];
  }
  const Vec o = linear(t.at("layers.0.self_attn.o_proj.weight"), attn);
  for (std::size_t i = 0; i < d; ++i) h0[i] += o[i];
  double ss = 0.0;
  for (double a : h0) ss += a * a;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(d) + h.rms_eps);
  Vec n(d);
  for (std::size_t i = 0; i < d; ++i) n[i] = h0[i] * r * t.at("layers.0.post_attention_layernorm.weight")[i];
  const Vec g = linear(t.at("layers.0.mlp.gate_proj.weight"), n), u = linear(t.at("layers.0.mlp.up_proj.weight"), n);
  Vec act(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  const Vec m = linear(t.at("layers.0.mlp.down_proj.weight"), act);
  for (std::size_t i = 0; i < d; ++i) h0[i] += m[i];
  return h0;
}

std::int64_t argmax(std::span<const float> v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

// How often the head's top-1 for x_{i+2} equals the target's, over the rows of `tokens`.
double agreement(const EagleHead& head, const test::StoriesTeacher& t, std::span<const std::int32_t> tokens, ThreadPool& pool) {
  auto f = target_features(*t.teacher, tokens, pool);  // f_0..f_T
  EXPECT_TRUE(f) << f.status().message();
  const std::int64_t T = static_cast<std::int64_t>(tokens.size()) - 1, d = head.hidden, V = head.vocab;
  auto out = eagle_reference(head, t.teacher_f32, tokens, std::span<const float>(*f).first(static_cast<std::size_t>(T * d)));
  EXPECT_TRUE(out) << out.status().message();
  const auto lm = t.teacher_f32.tensor("token_embd.weight");  // stories260K ties its LM head
  std::int64_t same = 0;
  for (std::int64_t i = 0; i < T; ++i) {
    std::vector<float> target_logits(static_cast<std::size_t>(V));
    for (std::int64_t v = 0; v < V; ++v) {
      double s = 0.0;
      for (std::int64_t j = 0; j < d; ++j) {
        s += static_cast<double>(lm[static_cast<std::size_t>(v * d + j)]) * (*f)[static_cast<std::size_t>((i + 1) * d + j)];
      }
      target_logits[static_cast<std::size_t>(v)] = static_cast<float>(s);
    }
    const auto row = std::span<const float>(out->logits).subspan(static_cast<std::size_t>(i * V), static_cast<std::size_t>(V));
    same += argmax(target_logits) == argmax(row);
  }
  return static_cast<double>(same) / static_cast<double>(T);
}

TEST(Eagle, HeadLearnsDeterministicallyAndAgreesWithTheTarget) {
  std::string why;
  if (!training_available(&why)) GTEST_SKIP() << why;
  const test::StoriesTeacher t = test::stories_teacher();
  ThreadPool pool(1);  // libtorch's threads and the pool's would contend on a 2-core machine
  EagleReport rep;
  auto a = train_eagle(*t.teacher, t.teacher_f32, t.text, t.bos, small_run(), pool, &rep);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_LT(rep.last_loss, 0.8 * rep.first_loss);
  auto b = train_eagle(*t.teacher, t.teacher_f32, t.text, t.bos, small_run(), pool);
  ASSERT_TRUE(b);
  EXPECT_EQ(a->tensors, b->tensors);
  const auto embedding = t.teacher_f32.tensor("token_embd.weight");
  const auto& copy = a->tensors.at("embed_tokens.weight");
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), embedding.begin(), embedding.end())) << "the target's embedding, frozen";

  // Held-out text: the trained head's top-1 agrees with the target's more often than at its start.
  EagleOptions untrained = small_run();
  untrained.steps = 1;
  untrained.lr = 1e-12f;
  auto start = train_eagle(*t.teacher, t.teacher_f32, t.text, t.bos, untrained, pool);
  ASSERT_TRUE(start);
  const std::span<const std::int32_t> held(t.held_out.data(), std::min<std::size_t>(t.held_out.size(), 257));
  const double trained = agreement(*a, t, held, pool), initial = agreement(*start, t, held, pool);
  std::printf("held-out top-1 agreement with the target: trained %.3f, untrained %.3f\n", trained, initial);
  EXPECT_GT(trained, initial + 0.1);
}

TEST(Eagle, ReferenceMatchesTheLayoutByHandAndInEaglesOwnModules) {
  std::string why;
  if (!training_available(&why)) GTEST_SKIP() << why;
  const test::StoriesTeacher t = test::stories_teacher();
  ThreadPool pool(1);
  EagleOptions o = small_run();
  o.steps = 3;
  auto head = train_eagle(*t.teacher, t.teacher_f32, t.text, t.bos, o, pool);
  ASSERT_TRUE(head) << head.status().message();
  const std::vector<std::int32_t> tokens(t.held_out.begin(), t.held_out.begin() + 9);  // x_0..x_8: T = 8 rows
  auto f = target_features(*t.teacher, std::span(tokens).first(8), pool);
  ASSERT_TRUE(f) << f.status().message();
  auto out = eagle_reference(*head, t.teacher_f32, tokens, *f);
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ(out->rows, 8);
  ASSERT_EQ(out->features.size(), 8u * 64u);
  ASSERT_EQ(out->logits.size(), 8u * 512u);
  const Vec row0 = first_row_by_hand(*head, t.teacher_f32, tokens[1], std::span<const float>(*f).first(64));
  for (std::size_t i = 0; i < 64; ++i) EXPECT_NEAR(out->features[i], row0[i], 1e-4 * (1.0 + std::abs(row0[i]))) << i;
  // Logits are the target's LM head (tied: the embedding) on the predicted feature.
  const auto lm = t.teacher_f32.tensor("token_embd.weight");
  for (std::size_t v : {0u, 17u, 511u}) {
    double s = 0.0;
    for (std::size_t i = 0; i < 64; ++i) s += static_cast<double>(lm[v * 64 + i]) * out->features[i];
    EXPECT_NEAR(out->logits[v], s, 1e-4 * (1.0 + std::abs(s)));
  }
  // Bad requests.
  EXPECT_EQ(eagle_reference(*head, t.teacher_f32, std::span(tokens).first(8), *f).status().code(), ErrorCode::kInvalidArgument);
  std::vector<std::int32_t> outside = tokens;
  outside[3] = 512;
  EXPECT_EQ(eagle_reference(*head, t.teacher_f32, outside, *f).status().code(), ErrorCode::kInvalidArgument);
  EagleHead wrong = *head;
  wrong.tensors.erase("fc.bias");
  EXPECT_EQ(eagle_reference(wrong, t.teacher_f32, tokens, *f).status().code(), ErrorCode::kInvalidArgument);

  // The folder in EAGLE's module structure, strict load, every row.
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 torch / numpy missing";
  const std::string dir = test::make_temp_dir() + "/eagle";
  ASSERT_TRUE(save_eagle_head(*head, dir).is_ok());
  {
    std::ofstream in(dir + "/inputs.json");
    in.precision(9);
    in << "{\"tokens\": [";
    for (std::size_t i = 0; i < tokens.size(); ++i) in << (i ? ", " : "") << tokens[i];
    in << "], \"features\": [";
    for (std::size_t r = 0; r < 8; ++r) {
      in << (r ? ", [" : "[");
      for (std::size_t i = 0; i < 64; ++i) in << (i ? ", " : "") << (*f)[r * 64 + i];
      in << "]";
    }
    in << "]}";
  }
  const std::string cmd =
      "/usr/bin/python3 " + test::source_dir() + "/tools/eagle_layout_check.py " + dir + " " + dir + "/inputs.json 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe.get()) != nullptr) text += buf;
  std::istringstream lines(text);
  std::vector<double> values;
  for (double v; lines >> v;) values.push_back(v);
  ASSERT_EQ(values.size(), out->features.size()) << text;
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(out->features[i], values[i], 1e-4 * (1.0 + std::abs(values[i]))) << i;
}

TEST(Eagle, BadRequestsGiveOneClearError) {
  std::string why;
  if (!training_available(&why)) GTEST_SKIP() << why;
  const test::StoriesTeacher t = test::stories_teacher();
  ThreadPool pool(1);
  EagleOptions o = small_run();
  o.seq = 2;
  EXPECT_EQ(train_eagle(*t.teacher, t.teacher_f32, t.text, t.bos, o, pool).status().code(), ErrorCode::kInvalidArgument);
  o = small_run();
  o.seq = 4096;
  EXPECT_EQ(train_eagle(*t.teacher, t.teacher_f32, t.text, t.bos, o, pool).status().code(), ErrorCode::kInvalidArgument);
  o = small_run();
  o.noise = -1.0f;
  EXPECT_EQ(train_eagle(*t.teacher, t.teacher_f32, t.text, t.bos, o, pool).status().code(), ErrorCode::kInvalidArgument);
  const std::vector<std::int32_t> short_text(10, 3);
  EXPECT_EQ(train_eagle(*t.teacher, t.teacher_f32, short_text, t.bos, small_run(), pool).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine::train
