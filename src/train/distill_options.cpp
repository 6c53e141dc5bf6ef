#include "peregrine/train/distill.h"
#include "peregrine/train/eagle.h"
#include "peregrine/train/medusa.h"

#include <cmath>
#include <exception>
#include <string>

namespace peregrine::train {
namespace {

constexpr std::pair<KdLoss, std::string_view> kLossNames[] = {{KdLoss::kForwardKl, "fkl"},
                                                              {KdLoss::kReverseKl, "rkl"},
                                                              {KdLoss::kJsd, "jsd"},
                                                              {KdLoss::kTvd, "tvd"},
                                                              {KdLoss::kCrossEntropy, "ce"}};

}  // namespace

std::optional<KdLoss> kd_loss_from_name(std::string_view name) {
  for (const auto& [loss, n] : kLossNames) {
    if (n == name) return loss;
  }
  return std::nullopt;
}

std::string_view kd_loss_name(KdLoss loss) {
  for (const auto& [l, n] : kLossNames) {
    if (l == loss) return n;
  }
  return "?";
}

Expected<StudentShape> StudentShape::parse(std::string_view spec) {
  StudentShape s;
  std::size_t pos = 0;
  while (pos <= spec.size() && !spec.empty()) {
    const std::size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string pair(spec.substr(pos, end - pos));
    const std::size_t eq = pair.find('=');
    const std::string key = pair.substr(0, eq), value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    std::int64_t* field = key == "layers" ? &s.layers : key == "dim" ? &s.dim : key == "ffn" ? &s.ffn
                        : key == "heads" ? &s.heads : key == "kv-heads" ? &s.kv_heads : nullptr;
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (field == nullptr || used != value.size() || value.empty() || v <= 0) {
      return invalid_argument("--student-shape: '" + pair + "' is not one of layers=N, dim=N, ffn=N, heads=N, kv-heads=N (N > 0)");
    }
    *field = v;
    pos = end + 1;
  }
  return s;
}

Status DistillOptions::validate() const {
  if (!(temperature > 0.0f) || !std::isfinite(temperature)) return invalid_argument("--temperature must be > 0");
  if (steps < 1) return invalid_argument("--steps must be >= 1");
  if (batch < 1) return invalid_argument("--batch must be >= 1");
  if (seq < 2) return invalid_argument("--seq must be >= 2");
  if (!(lr > 0.0f) || !std::isfinite(lr)) return invalid_argument("--lr must be > 0");
  if (warmup < 0 || save_every < 0) return invalid_argument("--warmup and --save-every must be >= 0");
  if (stop_at < 0 || stop_at > steps) return invalid_argument("--stop-at must be in [0, --steps]");
  if (on_policy && (prompt_tokens < 1 || prompt_tokens >= seq)) return invalid_argument("--prompt-tokens must be in [1, --seq)");
  if (!(weight_decay >= 0.0f)) return invalid_argument("--weight-decay must be >= 0");
  return Status::ok();
}

Status MedusaOptions::validate() const {
  if (heads < 1 || heads > 16) return invalid_argument("--heads must be in [1, 16]");
  if (head_layers < 0 || head_layers > 8) return invalid_argument("--head-layers must be in [0, 8]");
  if (!(decay > 0.0f && decay <= 1.0f)) return invalid_argument("--decay must be in (0, 1]");
  if (steps < 1 || batch < 1) return invalid_argument("--steps and --batch must be >= 1");
  if (seq < heads + 2) return invalid_argument("--seq must be at least --heads + 2");
  if (!(lr > 0.0f) || !std::isfinite(lr)) return invalid_argument("--lr must be > 0");
  if (warmup < 0) return invalid_argument("--warmup must be >= 0");
  return Status::ok();
}

Status EagleOptions::validate() const {
  if (steps < 1 || batch < 1) return invalid_argument("--steps and --batch must be >= 1");
  if (seq < 3) return invalid_argument("--seq must be >= 3");
  if (!(lr > 0.0f) || !std::isfinite(lr)) return invalid_argument("--lr must be > 0");
  if (warmup < 0) return invalid_argument("--warmup must be >= 0");
  if (!(noise >= 0.0f) || !std::isfinite(noise)) return invalid_argument("--noise must be >= 0");
  if (!(cls_weight >= 0.0f) || !(reg_weight >= 0.0f) || !std::isfinite(cls_weight) || !std::isfinite(reg_weight) ||
      cls_weight + reg_weight <= 0.0f) {
    return invalid_argument("--cls-weight and --reg-weight must be >= 0, not both 0");
  }
  if (!(grad_clip >= 0.0f) || !std::isfinite(grad_clip)) return invalid_argument("--grad-clip must be >= 0");
  return Status::ok();
}

}  // namespace peregrine::train
