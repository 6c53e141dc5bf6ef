// `peregrine eval outliers`: the activation outlier statistics of every linear input of a model
// on a text (quant/outlier_stats.h), the measurement behind SmoothQuant and LLM.int8().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace peregrine::cli {

/// Registers `outliers` under `eval`; returns how to run it (the exit code).
std::function<int()> add_eval_outliers(CLI::App& eval, CLI::App*& command);

}  // namespace peregrine::cli
