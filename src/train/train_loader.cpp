// Loads the training library on first use (train/distill.h, core/runtime_library.h):
// $PEREGRINE_TRAIN_LIBRARY, else libperegrine_train.so beside the running executable, else in
// the build tree it was built in. Without it every entry point reports kUnavailable with the
// reason.
#include "peregrine/core/runtime_library.h"
#include "train/train_api.h"

namespace peregrine::train {
namespace {

struct Loaded {
  const TrainApi* api = nullptr;
  std::string why;  // when api is null
};

Loaded load() {
#ifdef PEREGRINE_TRAIN_LIBRARY_DIR
  const std::string build_dir = PEREGRINE_TRAIN_LIBRARY_DIR;
#else
  const std::string build_dir;
#endif
  const RuntimeLibrary lib = load_runtime_library("libperegrine_train.so", "PEREGRINE_TRAIN_LIBRARY", build_dir, PEREGRINE_TRAIN_SYMBOL,
                                                  "training library",
                                                  "install libtorch-dev (scripts/setup.sh) and rebuild, or set PEREGRINE_TRAIN_LIBRARY");
  return {static_cast<const TrainApi*>(lib.api), lib.why};
}

const Loaded& library() {
  static const Loaded loaded = load();  // once per process (thread-safe static)
  return loaded;
}

}  // namespace

bool training_available(std::string* why) {
  if (why != nullptr) *why = library().why;
  return library().api != nullptr;
}

Status check_student_support(const FloatModel& m) {
  if (const TrainApi* api = library().api) return api->check_student_support(m);
  return unavailable(library().why);
}

Expected<std::vector<float>> student_logits(const FloatModel& m, std::span<const std::int32_t> tokens) {
  if (const TrainApi* api = library().api) return api->student_logits(m, tokens);
  return unavailable(library().why);
}

Expected<double> kd_loss_value(KdLoss loss, std::span<const float> student_logits, std::span<const float> teacher_logits,
                               std::span<const std::int64_t> targets, std::int64_t vocab, float temperature) {
  if (const TrainApi* api = library().api) return api->kd_loss_value(loss, student_logits, teacher_logits, targets, vocab, temperature);
  return unavailable(library().why);
}

Expected<FloatModel> initial_student(const FloatModel& teacher, const StudentShape& shape, std::uint64_t seed) {
  if (const TrainApi* api = library().api) return api->initial_student(teacher, shape, seed);
  return unavailable(library().why);
}

Expected<FloatModel> distill(const LlamaModel& teacher, FloatModel student, std::span<const std::int32_t> text,
                             std::int32_t bos, const DistillOptions& o, ThreadPool& pool, DistillReport* report,
                             const DistillProgress& progress) {
  if (const TrainApi* api = library().api) return api->distill(teacher, std::move(student), text, bos, o, pool, report, progress);
  return unavailable(library().why);
}

Expected<MedusaHeads> train_medusa(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                   std::int32_t bos, const MedusaOptions& o, ThreadPool& pool, MedusaReport* report,
                                   const DistillProgress& progress) {
  if (const TrainApi* api = library().api) return api->train_medusa(target, target_f32, text, bos, o, pool, report, progress);
  return unavailable(library().why);
}

Expected<EagleHead> train_eagle(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                std::int32_t bos, const EagleOptions& o, ThreadPool& pool, EagleReport* report,
                                const DistillProgress& progress) {
  if (const TrainApi* api = library().api) return api->train_eagle(target, target_f32, text, bos, o, pool, report, progress);
  return unavailable(library().why);
}

Expected<EagleReferenceOutput> eagle_reference(const EagleHead& head, const FloatModel& target_f32,
                                               std::span<const std::int32_t> tokens, std::span<const float> features) {
  if (const TrainApi* api = library().api) return api->eagle_reference(head, target_f32, tokens, features);
  return unavailable(library().why);
}

Expected<LoraAdapter> finetune(FloatModel base, std::span<const std::int32_t> text, std::span<const std::int32_t> eval_text,
                               const FinetuneOptions& o, ThreadPool& pool, FinetuneReport* report, const DistillProgress& progress) {
  if (const TrainApi* api = library().api) return api->finetune(std::move(base), text, eval_text, o, pool, report, progress);
  return unavailable(library().why);
}

Expected<std::vector<float>> lora_reference_logits(const FloatModel& base, const LoraAdapter& adapter, bool qlora,
                                                   std::span<const std::int32_t> tokens) {
  if (const TrainApi* api = library().api) return api->lora_reference_logits(base, adapter, qlora, tokens);
  return unavailable(library().why);
}

}  // namespace peregrine::train
