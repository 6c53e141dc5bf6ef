// The libtorch side of train/finetune.h (train/torch/finetune.cpp), reached through the
// library's TrainApi table (train/train_api.h).
#pragma once

#include "peregrine/train/finetune.h"

namespace peregrine::train {

Expected<LoraAdapter> finetune_impl(FloatModel base, std::span<const std::int32_t> text, std::span<const std::int32_t> eval_text,
                                    const FinetuneOptions& o, ThreadPool& pool, FinetuneReport* report, const DistillProgress& progress);

Expected<std::vector<float>> lora_reference_logits_impl(const FloatModel& base, const LoraAdapter& adapter, bool qlora,
                                                        std::span<const std::int32_t> tokens);

}  // namespace peregrine::train
