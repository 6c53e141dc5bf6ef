// The libtorch side of train/eagle.h (train/torch/eagle.cpp), reached through the library's
// TrainApi table (train/train_api.h).
#pragma once

#include "peregrine/train/eagle.h"

namespace peregrine::train {

Expected<EagleHead> train_eagle_impl(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                     std::int32_t bos, const EagleOptions& o, ThreadPool& pool, EagleReport* report,
                                     const DistillProgress& progress);

Expected<EagleReferenceOutput> eagle_reference_impl(const EagleHead& head, const FloatModel& target_f32,
                                                    std::span<const std::int32_t> tokens, std::span<const float> features);

}  // namespace peregrine::train
