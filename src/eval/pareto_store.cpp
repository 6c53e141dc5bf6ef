#include "peregrine/eval/pareto_store.h"

#include <cstdio>
#include <filesystem>

#include "peregrine/core/json_util.h"
#include "peregrine/core/output_file.h"
#include "peregrine/core/text_file.h"

namespace peregrine {
namespace {

// The numeric fields of a point, in the CSV's column order.
constexpr struct {
  const char* key;
  double ParetoPoint::*field;
} kNumbers[] = {{"kld", &ParetoPoint::kld},
                {"top1", &ParetoPoint::top1},
                {"ppl", &ParetoPoint::ppl},
                {"ref_ppl", &ParetoPoint::ref_ppl},
                {"weight_bytes", &ParetoPoint::weight_bytes},
                {"decode_bytes_per_token", &ParetoPoint::decode_bytes},
                {"decode_tps", &ParetoPoint::decode_tps},
                {"prefill_tps", &ParetoPoint::prefill_tps},
                {"seconds", &ParetoPoint::seconds}};

nlohmann::json to_json(const ParetoPoint& p) {
  nlohmann::json j = {{"name", p.name}, {"technique", p.technique}, {"describe", p.describe}};
  for (const auto& n : kNumbers) j[n.key] = p.*n.field;
  j["ppl_increase_pct"] = p.ppl_increase_pct();
  return j;
}

Expected<ParetoPoint> from_json(const nlohmann::json& j, const std::string& path) {
  ParetoPoint p;
  try {
    p.name = j.at("name").get<std::string>();
    p.technique = j.at("technique").get<std::string>();
    p.describe = j.at("describe").get<std::string>();
    for (const auto& n : kNumbers) p.*n.field = j.at(n.key).get<double>();
  } catch (const nlohmann::json::exception& e) {
    return corrupt_file(path + ": a point is incomplete (" + e.what() + "); remove the file to start over");
  }
  return p;
}

std::string csv(const std::vector<ParetoPoint>& points) {
  std::string out = "name,technique";
  for (const auto& n : kNumbers) out += std::string(",") + n.key;
  out += ",ppl_increase_pct\n";
  char buf[64];
  for (const ParetoPoint& p : points) {
    out += p.name + "," + p.technique;
    for (const auto& n : kNumbers) {
      std::snprintf(buf, sizeof buf, ",%.9g", p.*n.field);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, ",%.6g\n", p.ppl_increase_pct());
    out += buf;
  }
  return out;
}

/// Writes `text` to `path` through path + ".tmp" and a rename. Errors: kIoError.
Status replace_file(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  PEREGRINE_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(tmp.string()));
  PEREGRINE_RETURN_IF_ERROR(f.write({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}));
  PEREGRINE_RETURN_IF_ERROR(f.close());
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace

Expected<ParetoRun> load_pareto_run(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "pareto.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ParetoRun{};
  PEREGRINE_ASSIGN_OR_RETURN(const std::string text, read_text_file(path.string()));
  auto j = json_util::parse(text, path.string());
  if (!j) return corrupt_file(j.status().message() + "; remove the file to start over");
  ParetoRun run;
  run.setup = j->value("setup", nlohmann::json());
  const nlohmann::json points = j->value("points", nlohmann::json::array());
  if (!points.is_array()) return corrupt_file(path.string() + ": \"points\" is not an array; remove the file to start over");
  for (const nlohmann::json& p : points) {
    PEREGRINE_ASSIGN_OR_RETURN(ParetoPoint point, from_json(p, path.string()));
    run.points.push_back(std::move(point));
  }
  return run;
}

Status save_pareto_run(const std::string& dir, const ParetoRun& run) {
  nlohmann::json points = nlohmann::json::array();
  for (const ParetoPoint& p : run.points) points.push_back(to_json(p));
  const nlohmann::json j = {{"setup", run.setup},
                            {"points", points},
                            {"front_speed", pareto_front(run.points, ParetoAxis::kSpeed)},
                            {"front_size", pareto_front(run.points, ParetoAxis::kSize)}};
  const std::filesystem::path d(dir);
  PEREGRINE_RETURN_IF_ERROR(replace_file(d / "pareto.json", j.dump(2) + "\n"));
  return replace_file(d / "pareto.csv", csv(run.points));
}

}  // namespace peregrine
