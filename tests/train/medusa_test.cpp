// Medusa-1 training (train/medusa.h) on stories260K: the heads' loss falls, training is
// deterministic, only the ResBlocks move (each head's vocabulary projection is the target's LM
// head), and the written folder loads into Medusa's own module structure (PyTorch,
// tools/medusa_layout_check.py, strict load) with the same per-head outputs as these tensors give.
#include "peregrine/train/medusa.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "stories_teacher.h"
#include "test_paths.h"

namespace peregrine::train {
namespace {

MedusaOptions small_run() {
  MedusaOptions o;
  o.heads = 3;
  o.steps = 15;
  o.batch = 4;
  o.seq = 64;
  o.warmup = 2;
  o.lr = 3e-3f;
  o.seed = 4;
  return o;
}

// argmax over the vocabulary of head k's logits for x = (1/4, …, 1/4): ResBlocks, then its
// vocabulary projection, from the tensors as named in the layout.
std::int64_t head_argmax(const MedusaHeads& m, std::int64_t k) {
  std::vector<float> x(static_cast<std::size_t>(m.hidden), 0.25f);
  for (std::int64_t j = 0; j < m.layers; ++j) {
    const std::string p = std::to_string(k) + "." + std::to_string(j) + ".linear.";
    const auto& w = m.tensors.at(p + "weight");
    const auto& b = m.tensors.at(p + "bias");
    std::vector<float> y(x);
    for (std::int64_t o = 0; o < m.hidden; ++o) {
      double s = b[static_cast<std::size_t>(o)];
      for (std::int64_t i = 0; i < m.hidden; ++i) s += static_cast<double>(w[static_cast<std::size_t>(o * m.hidden + i)]) * x[static_cast<std::size_t>(i)];
      y[static_cast<std::size_t>(o)] += static_cast<float>(s / (1.0 + std::exp(-s)));
    }
    x = y;
  }
  const auto& head = m.tensors.at(std::to_string(k) + "." + std::to_string(m.layers) + ".weight");
  std::int64_t best = 0;
  double best_logit = -INFINITY;
  for (std::int64_t v = 0; v < m.vocab; ++v) {
    double s = 0.0;
    for (std::int64_t i = 0; i < m.hidden; ++i) s += static_cast<double>(head[static_cast<std::size_t>(v * m.hidden + i)]) * x[static_cast<std::size_t>(i)];
    if (s > best_logit) best_logit = s, best = v;
  }
  return best;
}

TEST(Medusa, HeadsLearnDeterministicallyAndLoadIntoMedusasModules) {
  std::string why;
  if (!training_available(&why)) GTEST_SKIP() << why;
  const test::StoriesTeacher t = test::stories_teacher();
  ThreadPool pool(2);
  MedusaReport rep;
  auto a = train_medusa(*t.teacher, t.teacher_f32, t.text, t.bos, small_run(), pool, &rep);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_LT(rep.last_loss, rep.first_loss);
  auto b = train_medusa(*t.teacher, t.teacher_f32, t.text, t.bos, small_run(), pool);
  ASSERT_TRUE(b);
  EXPECT_EQ(a->tensors, b->tensors);
  const auto lm = t.teacher_f32.tensor("token_embd.weight");  // stories260K ties its LM head
  for (std::int64_t k = 0; k < 3; ++k) {
    const auto& head = a->tensors.at(std::to_string(k) + ".1.weight");
    EXPECT_TRUE(std::equal(head.begin(), head.end(), lm.begin())) << "head " << k << " projects with the LM head";
    const auto& w = a->tensors.at(std::to_string(k) + ".0.linear.weight");
    EXPECT_TRUE(std::any_of(w.begin(), w.end(), [](float v) { return v != 0.0f; })) << "head " << k << " trained";
  }
  const std::string dir = test::make_temp_dir() + "/medusa";
  ASSERT_TRUE(save_medusa_heads(*a, dir).is_ok());
  const std::string cmd = "/usr/bin/python3 " + test::source_dir() + "/tools/medusa_layout_check.py " + dir + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, pipe.get()) != nullptr) out += buf;
  std::string want;
  for (std::int64_t k = 0; k < 3; ++k) want += std::to_string(head_argmax(*a, k)) + "\n";
  EXPECT_EQ(out, want);
}

TEST(Medusa, BadRequestsGiveOneClearError) {
  std::string why;
  if (!training_available(&why)) GTEST_SKIP() << why;
  const test::StoriesTeacher t = test::stories_teacher();
  ThreadPool pool(1);
  MedusaOptions o = small_run();
  o.heads = 0;
  EXPECT_EQ(train_medusa(*t.teacher, t.teacher_f32, t.text, t.bos, o, pool).status().code(), ErrorCode::kInvalidArgument);
  o = small_run();
  o.seq = 4096;
  EXPECT_EQ(train_medusa(*t.teacher, t.teacher_f32, t.text, t.bos, o, pool).status().code(), ErrorCode::kInvalidArgument);
  const std::vector<std::int32_t> short_text(10, 3);
  EXPECT_EQ(train_medusa(*t.teacher, t.teacher_f32, short_text, t.bos, small_run(), pool).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine::train
