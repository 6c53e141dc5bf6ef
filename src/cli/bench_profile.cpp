#include "bench_profile.h"

#include <cstdio>

namespace peregrine::cli {

std::vector<ProfileRow> profile_rows(const ForwardProfileTotals& totals, double forwards) {
  const ForwardOpTotals& whole = totals[static_cast<std::size_t>(ForwardOp::kForward)];
  if (whole.calls == 0 || whole.seconds <= 0.0) return {};
  const auto row = [&](const std::string& name, double seconds, double bytes) {
    return ProfileRow{name, 1e3 * seconds / forwards, seconds / whole.seconds, seconds > 0.0 ? bytes / seconds / 1e9 : 0.0};
  };
  std::vector<ProfileRow> rows;
  double inside = 0.0;
  for (std::size_t i = 0; i < kForwardOpCount; ++i) {
    const auto op = static_cast<ForwardOp>(i);
    if (op == ForwardOp::kForward || totals[i].calls == 0) continue;
    rows.push_back(row(forward_op_name(op), totals[i].seconds, totals[i].weight_bytes));
    inside += totals[i].seconds;
  }
  rows.push_back(row("other", whole.seconds - inside, 0.0));
  rows.push_back(row(forward_op_name(ForwardOp::kForward), whole.seconds, whole.weight_bytes));
  return rows;
}

void print_profile(const std::string& title, const std::vector<ProfileRow>& rows) {
  std::printf("%s\n| %-18s | %9s | %6s | %11s |\n", title.c_str(), "op", "ms", "share", "weight GB/s");
  std::printf("|--------------------|-----------|--------|-------------|\n");
  for (const ProfileRow& r : rows) {
    char gbps[16] = "";
    if (r.gbps > 0.0) std::snprintf(gbps, sizeof gbps, "%.1f", r.gbps);
    std::printf("| %-18s | %9.3f | %5.1f%% | %11s |\n", r.op.c_str(), r.ms, 100.0 * r.share, gbps);
  }
}

nlohmann::json profile_json(const std::vector<ProfileRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const ProfileRow& r : rows) out.push_back({{"op", r.op}, {"ms", r.ms}, {"share", r.share}, {"gbps", r.gbps}});
  return out;
}

}  // namespace peregrine::cli
