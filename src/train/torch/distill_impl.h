// The libtorch side of train/distill.h's initial_student and distill (train/torch/distill.cpp),
// reached through the library's TrainApi table (train/train_api.h).
#pragma once

#include "peregrine/train/distill.h"

namespace peregrine::train {

Expected<FloatModel> initial_student_impl(const FloatModel& teacher, const StudentShape& shape, std::uint64_t seed);

Expected<FloatModel> distill_impl(const LlamaModel& teacher, FloatModel student, std::span<const std::int32_t> text,
                                  std::int32_t bos, const DistillOptions& o, ThreadPool& pool, DistillReport* report,
                                  const DistillProgress& progress);

}  // namespace peregrine::train
