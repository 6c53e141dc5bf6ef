// `bench --profile`: the forwards' time per op kind (model/forward_profile.h) as a table and
// as JSON, per forward (pp) or per decoded token (tg).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/model/forward_profile.h"

namespace peregrine::cli {

/// One op kind's share of the forwards.
struct ProfileRow {
  std::string op;
  double ms = 0.0;     // milliseconds per forward
  double share = 0.0;  // of the whole forward's time, 0..1
  double gbps = 0.0;   // weight bytes its matmuls read per second of its time (0: none)
};

/// Rows of the op kinds that ran, then "other" (the forward's time outside them: batch checks,
/// KV reservation, scratch buffers) and the total; `forwards` > 0 is the number of forwards in
/// `totals`.
std::vector<ProfileRow> profile_rows(const ForwardProfileTotals& totals, double forwards);

/// Prints `title` and the rows as a Markdown table.
void print_profile(const std::string& title, const std::vector<ProfileRow>& rows);

/// [{"op", "ms", "share", "gbps"}, ...]
nlohmann::json profile_json(const std::vector<ProfileRow>& rows);

}  // namespace peregrine::cli
