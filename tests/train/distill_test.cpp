// The training layer (train/distill.h, libperegrine_train.so through libtorch): the student's
// libtorch forward is the engine's forward on the same weights (stories260K: interleaved RoPE,
// GQA; an HF Llama: NeoX RoPE), every divergence has its textbook value on distributions worked
// by hand, distillation of stories260K lowers its loss, is deterministic for a seed, resumes from
// a checkpoint to the same weights, writes a GGUF the engine loads with the same logits, and bad
// requests give one clean error.
#include "peregrine/train/distill.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "peregrine/eval/logit_comparison.h"
#include "peregrine/formats/model_writer.h"
#include "stories_teacher.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine::train {
namespace {

#define REQUIRE_TRAINING()                                            \
  do {                                                                \
    std::string why;                                                  \
    if (!training_available(&why)) GTEST_SKIP() << why;               \
  } while (0)

FloatModel float_model(const std::string& path) {
  auto m = load_model_file(path);
  EXPECT_TRUE(m) << m.status().message();
  auto f = FloatModel::from(*m);
  EXPECT_TRUE(f) << f.status().message();
  return std::move(*f);
}

// Engine logits of `tokens` on the model `m` holds.
std::vector<float> engine_logits(const FloatModel& m, std::span<const std::int32_t> tokens) {
  auto model = LlamaModel::create(m.view(), WeightPlacement::kInPlace);
  EXPECT_TRUE(model) << model.status().message();
  ThreadPool pool(2);
  auto logits = teacher_forced_logits(*model, tokens, pool);
  EXPECT_TRUE(logits) << logits.status().message();
  return *logits;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  float d = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

constexpr std::int32_t kTokens[] = {1, 403, 407, 261, 500, 12, 99, 311, 275, 430, 68, 2, 17, 350, 41, 9};

TEST(LlamaStudent, ForwardIsTheEnginesOnTheSameWeights) {
  REQUIRE_TRAINING();
  for (const std::string& path : {test::stories260k_path(), test::testdata_dir() + "/hf-f32-gqa"}) {
    const FloatModel m = float_model(path);
    std::vector<std::int32_t> tokens;
    for (std::int32_t t : kTokens) tokens.push_back(t % static_cast<std::int32_t>(m.config().vocab_size));
    auto student = student_logits(m, tokens);
    ASSERT_TRUE(student) << student.status().message();
    EXPECT_LT(max_abs_diff(*student, engine_logits(m, tokens)), 1e-4f) << path;
  }
}

TEST(KdLoss, EveryDivergenceHasItsValueOnAWorkedExample) {
  REQUIRE_TRAINING();
  // One position, 3 tokens: student uniform q = (1/3, 1/3, 1/3), teacher p = (1/2, 1/4, 1/4).
  const std::vector<float> student{0.0f, 0.0f, 0.0f};
  const std::vector<float> teacher{std::log(0.5f), std::log(0.25f), std::log(0.25f)};
  const std::vector<std::int64_t> target{1};
  const double p[] = {0.5, 0.25, 0.25}, q = 1.0 / 3.0;
  double fkl = 0, rkl = 0, tvd = 0, jsd = 0;
  for (double pi : p) {
    const double m = 0.5 * (pi + q);
    fkl += pi * std::log(pi / q);
    rkl += q * std::log(q / pi);
    tvd += 0.5 * std::fabs(pi - q);
    jsd += 0.5 * (pi * std::log(pi / m) + q * std::log(q / m));
  }
  const std::pair<KdLoss, double> cases[] = {{KdLoss::kForwardKl, fkl}, {KdLoss::kReverseKl, rkl}, {KdLoss::kTvd, tvd},
                                             {KdLoss::kJsd, jsd}, {KdLoss::kCrossEntropy, std::log(3.0)}};
  for (const auto& [loss, want] : cases) {
    auto got = kd_loss_value(loss, student, teacher, target, 3, 1.0f);
    ASSERT_TRUE(got) << got.status().message();
    EXPECT_NEAR(*got, want, 1e-6) << kd_loss_name(loss);
  }
  EXPECT_GT(fkl, rkl);  // the two directions differ: mean-seeking vs mode-seeking
  // Temperature 2: the divergence of the halved logits, × T² = 4.
  auto t2 = kd_loss_value(KdLoss::kForwardKl, student, teacher, target, 3, 2.0f);
  const std::vector<float> half{teacher[0] / 2, teacher[1] / 2, teacher[2] / 2};
  auto t1 = kd_loss_value(KdLoss::kForwardKl, student, half, target, 3, 1.0f);
  ASSERT_TRUE(t2 && t1);
  EXPECT_NEAR(*t2, 4.0 * *t1, 1e-6);
  // Equal distributions: every divergence 0.
  for (KdLoss loss : {KdLoss::kForwardKl, KdLoss::kReverseKl, KdLoss::kJsd, KdLoss::kTvd}) {
    auto same = kd_loss_value(loss, teacher, teacher, target, 3, 1.0f);
    ASSERT_TRUE(same);
    EXPECT_NEAR(*same, 0.0, 1e-7) << kd_loss_name(loss);
  }
}

using Stories = test::StoriesTeacher;
Stories stories() { return test::stories_teacher(); }

DistillOptions small_run(std::int64_t steps) {
  DistillOptions o;
  o.steps = steps;
  o.batch = 4;
  o.seq = 64;
  o.warmup = 2;
  o.lr = 2e-3f;
  o.seed = 7;
  return o;
}

std::vector<float> weights_of(const FloatModel& m) {
  std::vector<float> all;
  for (const std::string& name : m.names()) {
    const auto v = m.tensor(name);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEST(Distill, LowersTheLossAndIsDeterministicForASeed) {
  REQUIRE_TRAINING();
  const Stories s = stories();
  auto init = initial_student(s.teacher_f32, {.layers = 2}, 0);
  ASSERT_TRUE(init) << init.status().message();
  EXPECT_EQ(init->config().n_layers, 2);
  // Evenly spaced blocks: the student's block 1 is the teacher's last (4).
  const std::span<const float> a_last = init->tensor("blk.1.attn_q.weight"), t_last = s.teacher_f32.tensor("blk.4.attn_q.weight");
  EXPECT_TRUE(std::equal(a_last.begin(), a_last.end(), t_last.begin()));
  ThreadPool pool(2);
  for (KdLoss loss : {KdLoss::kForwardKl, KdLoss::kReverseKl}) {
    DistillOptions o = small_run(30);
    o.loss = loss;
    DistillReport rep;
    auto a = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool, &rep);
    ASSERT_TRUE(a) << a.status().message();
    EXPECT_EQ(rep.steps, 30);
    EXPECT_LT(rep.last_loss, 0.8 * rep.first_loss) << kd_loss_name(loss);
    auto b = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool);
    ASSERT_TRUE(b);
    EXPECT_EQ(weights_of(*a), weights_of(*b)) << "same seed, same weights: " << kd_loss_name(loss);
    o.seed = 8;
    auto c = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool);
    ASSERT_TRUE(c);
    EXPECT_NE(weights_of(*a), weights_of(*c));
  }
}

TEST(Distill, OnPolicyTrainsOnTheTeachersSamplesDeterministically) {
  REQUIRE_TRAINING();
  const Stories s = stories();
  ThreadPool pool(2);
  DistillOptions o = small_run(12);
  o.on_policy = true;
  o.prompt_tokens = 4;
  DistillReport rep;
  auto a = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool, &rep);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_LT(rep.last_loss, rep.first_loss);
  auto b = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool);
  ASSERT_TRUE(b);
  EXPECT_EQ(weights_of(*a), weights_of(*b));
  o.on_policy = false;  // the same windows without the teacher's samples train other weights
  auto c = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool);
  ASSERT_TRUE(c);
  EXPECT_NE(weights_of(*a), weights_of(*c));
  o.on_policy = true;
  o.prompt_tokens = o.seq;
  EXPECT_EQ(distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(Distill, ResumesFromACheckpointToTheSameWeights) {
  REQUIRE_TRAINING();
  const Stories s = stories();
  ThreadPool pool(2);
  const std::string dir = test::make_temp_dir();
  DistillOptions o = small_run(8);
  auto whole = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool);
  ASSERT_TRUE(whole) << whole.status().message();
  o.checkpoint = dir + "/ckpt.pt";
  o.stop_at = 5;
  auto first = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool);
  ASSERT_TRUE(first) << first.status().message();
  ASSERT_TRUE(std::filesystem::exists(o.checkpoint));
  o.stop_at = 0;
  o.resume = o.checkpoint;
  o.checkpoint.clear();
  DistillReport rep;
  auto rest = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool, &rep);
  ASSERT_TRUE(rest) << rest.status().message();
  EXPECT_EQ(rep.first_step, 5);
  EXPECT_EQ(rep.steps, 3);
  EXPECT_EQ(weights_of(*rest), weights_of(*whole));
  std::filesystem::remove_all(dir);
}

TEST(Distill, TheWrittenStudentRunsInTheEngineWithTheSameLogits) {
  REQUIRE_TRAINING();
  const Stories s = stories();
  ThreadPool pool(2);
  auto student = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, small_run(3), pool);
  ASSERT_TRUE(student) << student.status().message();
  const std::string dir = test::make_temp_dir(), path = dir + "/student.gguf";
  auto tokenizer = tokenizer_file_of(s.teacher_f32.source());
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  ASSERT_TRUE(save_gguf_model(student->view(), path, *tokenizer).is_ok());
  const FloatModel loaded = float_model(path);
  EXPECT_EQ(loaded.config().n_layers, 2);
  auto trained = student_logits(*student, kTokens);
  ASSERT_TRUE(trained);
  EXPECT_LT(max_abs_diff(*trained, engine_logits(loaded, kTokens)), 1e-4f);
  std::filesystem::remove_all(dir);
}

TEST(Distill, BadRequestsGiveOneCleanError) {
  REQUIRE_TRAINING();
  const Stories s = stories();
  ThreadPool pool(2);
  auto student = initial_student(s.teacher_f32, {.layers = 2}, 0);
  ASSERT_TRUE(student);
  student->config().vocab_size = 300;
  auto vocab = distill(*s.teacher, *student, s.text, s.bos, small_run(2), pool);
  ASSERT_FALSE(vocab);
  EXPECT_EQ(vocab.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(vocab.status().message().find("vocabulary"), std::string::npos) << vocab.status().message();
  const std::vector<std::int32_t> short_text(20, 5);
  auto text = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), short_text, s.bos, small_run(2), pool);
  ASSERT_FALSE(text);
  EXPECT_NE(text.status().message().find("fewer than --seq"), std::string::npos) << text.status().message();
  DistillOptions o = small_run(2);
  o.resume = "/nonexistent/ckpt.pt";
  auto resume = distill(*s.teacher, *initial_student(s.teacher_f32, {.layers = 2}, 0), s.text, s.bos, o, pool);
  ASSERT_FALSE(resume);
  EXPECT_EQ(resume.status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(initial_student(s.teacher_f32, {.layers = 9}, 0));
  EXPECT_FALSE(initial_student(s.teacher_f32, {.heads = 3}, 0));
  for (const char* bad : {"layers", "layers=0", "depth=2", "layers=2,dim=x"}) {
    auto shape = StudentShape::parse(bad);
    ASSERT_FALSE(shape) << bad;
    EXPECT_EQ(shape.status().code(), ErrorCode::kInvalidArgument);
  }
  auto moe = FloatModel::from(*load_model_file(test::testdata_dir() + "/gguf-f32-mixtral.gguf"));
  ASSERT_TRUE(moe);
  EXPECT_EQ(check_student_support(*moe).code(), ErrorCode::kUnsupported);
}

TEST(Distill, WidthChangesDrawNewWeightsOfTheNewShape) {
  REQUIRE_TRAINING();
  const Stories s = stories();
  auto narrow = initial_student(s.teacher_f32, {.layers = 2, .dim = 32, .ffn = 96, .heads = 4, .kv_heads = 2}, 3);
  ASSERT_TRUE(narrow) << narrow.status().message();
  EXPECT_EQ(narrow->config().head_dim, 8);
  EXPECT_EQ(narrow->shape("blk.0.attn_k.weight"), (std::vector<std::int64_t>{16, 32}));
  EXPECT_EQ(narrow->config().vocab_size, s.teacher_f32.config().vocab_size);
  ThreadPool pool(2);
  DistillReport rep;
  auto trained = distill(*s.teacher, std::move(*narrow), s.text, s.bos, small_run(20), pool, &rep);
  ASSERT_TRUE(trained) << trained.status().message();
  EXPECT_LT(rep.last_loss, rep.first_loss);
}

}  // namespace
}  // namespace peregrine::train
