// The files of a `peregrine pareto` run in its output folder: pareto.json (the settings, every
// finished point and both fronts, rewritten after each point, so an interrupted run resumes
// where it stopped) and pareto.csv (one row per point, for spreadsheets and plotting).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/core/status.h"
#include "peregrine/eval/pareto_front.h"

namespace peregrine {

/// A run's folder contents.
struct ParetoRun {
  nlohmann::json setup;             // what the points depend on: model, texts, tokens, threads, CPU
  std::vector<ParetoPoint> points;  // finished points, in the order they ran
};

/// Reads DIR/pareto.json; an absent file is an empty run (setup null).
/// Errors: kCorruptFile (not JSON, or a point missing a field), kIoError.
Expected<ParetoRun> load_pareto_run(const std::string& dir);

/// Writes DIR/pareto.json (setup, points, and the indices of pareto_front for both axes) and
/// DIR/pareto.csv through temporary files renamed into place. Errors: kIoError.
Status save_pareto_run(const std::string& dir, const ParetoRun& run);

}  // namespace peregrine
