// The libtorch side of train/medusa.h's train_medusa (train/torch/medusa.cpp), reached through the
// library's TrainApi table (train/train_api.h).
#pragma once

#include "peregrine/train/medusa.h"

namespace peregrine::train {

Expected<MedusaHeads> train_medusa_impl(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                        std::int32_t bos, const MedusaOptions& o, ThreadPool& pool, MedusaReport* report,
                                        const DistillProgress& progress);

}  // namespace peregrine::train
