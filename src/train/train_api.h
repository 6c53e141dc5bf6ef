// The C-linkage entry point of the training library (libperegrine_train.so, src/train/torch/,
// built with libtorch) and the table of functions it returns; train/train_loader.cpp dlopens the
// library and calls through it. Both sides are built together from this header, so C++ types
// cross the boundary as is. Loaded RTLD_LOCAL (core/runtime_library.h): libtorch's libprotobuf
// must not meet the protobuf-lite inside libsentencepiece in one global scope
// (tokenizer/spm_library_api.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/train/distill.h"
#include "peregrine/train/eagle.h"
#include "peregrine/train/finetune.h"
#include "peregrine/train/medusa.h"

namespace peregrine::train {

struct TrainApi {
  Status (*check_student_support)(const FloatModel& m);
  Expected<FloatModel> (*initial_student)(const FloatModel& teacher, const StudentShape& shape, std::uint64_t seed);
  Expected<FloatModel> (*distill)(const LlamaModel& teacher, FloatModel student, std::span<const std::int32_t> text,
                                  std::int32_t bos, const DistillOptions& o, ThreadPool& pool, DistillReport* report,
                                  const DistillProgress& progress);
  Expected<std::vector<float>> (*student_logits)(const FloatModel& m, std::span<const std::int32_t> tokens);
  Expected<double> (*kd_loss_value)(KdLoss loss, std::span<const float> student_logits, std::span<const float> teacher_logits,
                                    std::span<const std::int64_t> targets, std::int64_t vocab, float temperature);
  Expected<MedusaHeads> (*train_medusa)(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                        std::int32_t bos, const MedusaOptions& o, ThreadPool& pool, MedusaReport* report,
                                        const DistillProgress& progress);
  Expected<EagleHead> (*train_eagle)(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                     std::int32_t bos, const EagleOptions& o, ThreadPool& pool, EagleReport* report,
                                     const DistillProgress& progress);
  Expected<EagleReferenceOutput> (*eagle_reference)(const EagleHead& head, const FloatModel& target_f32,
                                                    std::span<const std::int32_t> tokens, std::span<const float> features);
  Expected<LoraAdapter> (*finetune)(FloatModel base, std::span<const std::int32_t> text, std::span<const std::int32_t> eval_text,
                                    const FinetuneOptions& o, ThreadPool& pool, FinetuneReport* report, const DistillProgress& progress);
  Expected<std::vector<float>> (*lora_reference_logits)(const FloatModel& base, const LoraAdapter& adapter, bool qlora,
                                                        std::span<const std::int32_t> tokens);
};

}  // namespace peregrine::train

/// Name of the entry point: const peregrine::train::TrainApi* peregrine_train_api().
#define PEREGRINE_TRAIN_SYMBOL "peregrine_train_api"
