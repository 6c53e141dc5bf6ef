// Token-level knowledge distillation (Hinton et al. 2015) of a smaller Llama student from a
// teacher run by Peregrine's own forward: per training sequence the teacher's logits at every
// position, the student's from its libtorch copy (train/llama_student.h), and one of the
// divergences of train/kd_loss.h between softmax(teacher / T) and softmax(student / T) — forward
// KL (mean-seeking), reverse KL (mode-seeking, MiniLLM, Gu et al. 2024), JSD or TVD (DistillSpec,
// Zhou et al. 2024: the best divergence depends on the decoding mode) — or plain cross-entropy on
// the text (the baseline without a teacher), minimized by AdamW. Deterministic for a seed at a
// given thread count: sequence starts come from (seed, step), libtorch's generator is seeded.
// The engine does not depend on this layer: its libtorch code is its own library,
// libperegrine_train.so (src/train/torch/), loaded on first use (train/train_loader.cpp); the
// functions below that train report kUnavailable, with the reason, where it is not built.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/float_model.h"

namespace peregrine::train {

enum class KdLoss : std::uint8_t {
  kForwardKl,     // "fkl":  KL(p_teacher ‖ q_student) · T²
  kReverseKl,     // "rkl":  KL(q_student ‖ p_teacher) · T²
  kJsd,           // "jsd":  ½ KL(p ‖ m) + ½ KL(q ‖ m), m = ½(p + q), · T²
  kTvd,           // "tvd":  ½ Σ |p − q|
  kCrossEntropy,  // "ce":   −log q_student(next token of the text), no teacher
};

/// The loss of a --loss name (fkl, rkl, jsd, tvd, ce); nullopt for another name.
std::optional<KdLoss> kd_loss_from_name(std::string_view name);
std::string_view kd_loss_name(KdLoss loss);

/// The student's shape, as `--student-shape` spells it: comma-separated key=value pairs among
/// layers, dim, ffn, heads, kv-heads (e.g. "layers=2" or "layers=2,dim=48,heads=6,kv-heads=2");
/// 0 keeps the teacher's value.
struct StudentShape {
  std::int64_t layers = 0, dim = 0, ffn = 0, heads = 0, kv_heads = 0;
  /// Errors: kInvalidArgument naming the bad pair (unknown key, value not a positive integer).
  static Expected<StudentShape> parse(std::string_view spec);
};

/// Whether the training library loads (libtorch built in); else `why` says what is missing.
bool training_available(std::string* why = nullptr);

/// Whether the student covers `m`: a dense model (no experts) with SwiGLU, no biases, no Q/K
/// norms, no sliding window, soft-caps, embedding scale, norm offset, RoPE scaling, RoPE
/// frequency tensor or online Hadamard rotation. Errors: kUnsupported naming the feature,
/// kInvalidArgument (a tensor missing), kUnavailable (no training library).
Status check_student_support(const FloatModel& m);

/// The student's forward on one sequence, run by libtorch (the parity check against the
/// engine's): logits [tokens.size(), vocab] f32 at positions 0..n−1. Errors: those of
/// check_student_support; kInvalidArgument (no tokens, more than the context).
Expected<std::vector<float>> student_logits(const FloatModel& m, std::span<const std::int32_t> tokens);

/// The loss `loss` as distill minimizes it (train/torch/kd_loss.h), on logits [N, vocab] f32 of
/// the student and the teacher and next-token targets [N] (kCrossEntropy; −1 skips a position).
/// Errors: kInvalidArgument (sizes), kUnavailable.
Expected<double> kd_loss_value(KdLoss loss, std::span<const float> student_logits, std::span<const float> teacher_logits,
                               std::span<const std::int64_t> targets, std::int64_t vocab, float temperature);

/// The student before training, from the teacher's f32 copy: with only `layers` set, the
/// teacher's embedding, LM head, final norm and `layers` of its blocks evenly spaced from the
/// first to the last (as DistilBERT initializes from every other layer); with a width changed,
/// every tensor drawn anew (normal, std 0.02 for matrices; norms 1) from `seed`, the tokenizer
/// and vocabulary kept. Errors: kInvalidArgument (more layers than the teacher; heads not a
/// multiple of kv-heads; dim not a multiple of heads; an odd head dimension),
/// check_student_support's.
Expected<FloatModel> initial_student(const FloatModel& teacher, const StudentShape& shape, std::uint64_t seed);

struct DistillOptions {
  KdLoss loss = KdLoss::kForwardKl;
  float temperature = 1.0f;      // T of softmax(logits / T), > 0
  std::int64_t steps = 200;      // optimizer steps
  std::int64_t batch = 8;        // sequences per step
  std::int64_t seq = 128;        // tokens per sequence (BOS included), <= both contexts
  float lr = 1e-3f;              // AdamW peak learning rate; linear warm-up over the first
  std::int64_t warmup = 10;      // `warmup` steps, cosine decay to lr / 10 at the last
  float weight_decay = 0.0f;
  std::uint64_t seed = 0;
  std::string checkpoint;        // written every `save_every` steps and at the end when set
  std::int64_t save_every = 0;   // 0: only at the end
  std::string resume;            // a checkpoint to continue from (same options)
  bool on_policy = false;        // train on teacher samples: each window cut to BOS +
  std::int64_t prompt_tokens = 8;  // `prompt_tokens` text tokens, the rest drawn from the
                                   // teacher at temperature 1 (its logits collected meanwhile)
  std::int64_t stop_at = 0;      // stop after this step (a checkpoint is written there when
                                 // `checkpoint` is set), e.g. a run split over sessions; 0: steps
  /// Errors: kInvalidArgument naming the out-of-range field.
  Status validate() const;
};

struct DistillReport {
  std::int64_t steps = 0;         // steps run in this call (after any resumed ones)
  std::int64_t first_step = 0;    // the step it started at (0, or the resumed checkpoint's)
  std::int64_t tokens = 0;        // student tokens trained on in this call
  double first_loss = 0.0;        // the loss of its first step
  double last_loss = 0.0;         // the mean loss of its last min(10, steps) steps
  double seconds = 0.0;
};

/// Called after every step: step (1-based), the step this call stops after, that step's loss,
/// tokens/s so far.
using DistillProgress = std::function<void(std::int64_t step, std::int64_t steps, double loss, double tokens_per_s)>;

/// Trains `student` (the same vocabulary as `teacher`; check_student_support) on sequences of
/// `text` (token ids, BOS first): each step takes `batch` windows of seq − 1 tokens at starts
/// drawn from (seed, step), each prefixed with `bos` (−1: none, the window is seq tokens), gets
/// the teacher's logits from `teacher`'s forward (not for kCrossEntropy) and minimizes the loss
/// over every position (ce: every position but the last, against the next token). With
/// `on_policy` the windows' tails are the teacher's own samples instead (Gu et al. 2024,
/// Agarwal et al. 2024 and DistillSpec train on generated sequences; here the teacher's); with
/// kCrossEntropy that is sequence-level KD (Kim & Rush 2016). Returns the
/// trained student. Errors: kInvalidArgument (vocabularies differ, text shorter than seq + 1
/// tokens, seq longer than a context, options out of range), kNotFound / kCorruptFile (resume
/// checkpoint missing or not one of these), the teacher's forward's.
Expected<FloatModel> distill(const LlamaModel& teacher, FloatModel student, std::span<const std::int32_t> text,
                             std::int32_t bos, const DistillOptions& o, ThreadPool& pool, DistillReport* report = nullptr,
                             const DistillProgress& progress = {});

}  // namespace peregrine::train
