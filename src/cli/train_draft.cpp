// peregrine train-draft: trains draft heads on a frozen target (train/medusa.h: Medusa-1,
// train/eagle.h: EAGLE-1) and writes them in the published layouts (spec/medusa_heads.h,
// spec/eagle_head.h).
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "common.h"
#include "peregrine/core/text_file.h"
#include "peregrine/train/eagle.h"
#include "peregrine/train/medusa.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct TrainDraftArgs {
  ModelOptions model;
  std::string kind = "medusa", output, data;
  train::MedusaOptions o;  // with the options both kinds share (steps, batch, seq, lr, warmup, seed)
  train::EagleOptions eagle;
  std::optional<float> lr;  // the kind's default when not given
  bool no_bias = false;
  std::int32_t threads = 2;
};

std::string shortest(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

train::MedusaOptions medusa_options(const TrainDraftArgs& a) {
  train::MedusaOptions m = a.o;
  m.lr = a.lr.value_or(m.lr);
  return m;
}

// The EAGLE options: the shared ones from the Medusa set.
train::EagleOptions eagle_options(const TrainDraftArgs& a) {
  train::EagleOptions e = a.eagle;
  e.steps = a.o.steps;
  e.batch = a.o.batch;
  e.seq = a.o.seq;
  e.lr = a.lr.value_or(e.lr);
  e.warmup = a.o.warmup;
  e.seed = a.o.seed;
  e.bias = !a.no_bias;
  return e;
}

int run_eagle(const TrainDraftArgs& a, const LlamaModel& target, const FloatModel& f32, std::span<const std::int32_t> text,
                std::int32_t bos, ThreadPool& pool) {
  const auto line = progress_line("train-draft");
  train::EagleReport rep;
  auto head = train::train_eagle(target, f32, text, bos, eagle_options(a), pool, &rep,
                                 [&](std::int64_t step, std::int64_t steps, double, double) { line(step, steps, "steps"); });
  if (!head) return report(head.status());
  if (Status st = save_eagle_head(*head, a.output); !st) return report(st);
  std::printf("wrote %s: EAGLE-1 head (hidden %lld, 1 decoder layer), loss %.4f -> %.4f over %lld steps in %.1f s, "
              "top-1 agreement with the target %.3f\n",
              a.output.c_str(), static_cast<long long>(head->hidden), rep.first_loss, rep.last_loss, static_cast<long long>(rep.steps),
              rep.seconds, rep.last_accuracy);
  return 0;
}

int run(const TrainDraftArgs& a) {
  if (std::string why; !train::training_available(&why)) return report(unavailable(why));
  if (a.kind != "medusa" && a.kind != "eagle") return report(invalid_argument("--kind '" + a.kind + "' is not medusa or eagle"));
  if (Status st = validate_threads(a.threads); !st) return report(st);
  if (Status st = a.kind == "eagle" ? eagle_options(a).validate() : medusa_options(a).validate(); !st) return report(st);
  ThreadPool pool(a.threads);
  auto src = open_model(a.model, &pool);
  if (!src) return report(src.status());
  auto tok = calibration_tokenizer(*src, a.model, true);
  if (!tok) return report(tok.status());
  auto text = read_text_file(a.data);
  if (!text) return report(text.status());
  auto f32 = FloatModel::from(*src);
  if (!f32) return report(f32.status());
  auto target = LlamaModel::create(*src);
  if (!target) return report(target.status());
  const std::vector<std::int32_t> tokens = (*tok)->encode(*text, true);
  if (a.kind == "eagle") return run_eagle(a, *target, *f32, tokens, (*tok)->bos_id(), pool);
  const auto line = progress_line("train-draft");
  train::MedusaReport rep;
  auto heads = train::train_medusa(*target, *f32, tokens, (*tok)->bos_id(), medusa_options(a), pool, &rep,
                                   [&](std::int64_t step, std::int64_t steps, double, double) { line(step, steps, "steps"); });
  if (!heads) return report(heads.status());
  if (Status st = save_medusa_heads(*heads, a.output); !st) return report(st);
  std::printf("wrote %s: %lld Medusa heads x %lld ResBlocks (hidden %lld), loss %.4f -> %.4f over %lld steps in %.1f s\n",
              a.output.c_str(), static_cast<long long>(heads->heads), static_cast<long long>(heads->layers),
              static_cast<long long>(heads->hidden), rep.first_loss, rep.last_loss, static_cast<long long>(rep.steps), rep.seconds);
  return 0;
}

}  // namespace

Verb add_train_draft(CLI::App& app) {
  auto a = std::make_shared<TrainDraftArgs>();
  CLI::App* cmd = app.add_subcommand("train-draft", "Train draft heads on a frozen target (Medusa-1, EAGLE-1; libtorch)");
  add_model_options(*cmd, a->model);
  cmd->add_option("--kind", a->kind, "medusa or eagle (EAGLE-1)")->capture_default_str();
  cmd->add_option("-o,--output", a->output,
                  "Output folder (config.json + medusa_lm_head.safetensors, or for eagle model.safetensors)")->required();
  cmd->add_option("--data", a->data, "Training text (keep it apart from evaluation text)")->required();
  cmd->add_option("--heads", a->o.heads, "Medusa heads (head k predicts the token k + 2 ahead)")->capture_default_str();
  cmd->add_option("--head-layers", a->o.head_layers, "ResBlocks per head")->capture_default_str();
  cmd->add_option("--decay", a->o.decay, "Loss weight of head k: decay^k")->capture_default_str();
  cmd->add_option("--noise", a->eagle.noise, "eagle: uniform feature noise, amplitude noise * 512 / seq (0: none)")
      ->capture_default_str();
  cmd->add_option("--cls-weight", a->eagle.cls_weight, "eagle: weight of the cross-entropy to the target's distribution")
      ->capture_default_str();
  cmd->add_option("--reg-weight", a->eagle.reg_weight, "eagle: weight of the SmoothL1 feature regression")->capture_default_str();
  cmd->add_option("--grad-clip", a->eagle.grad_clip, "eagle: clip gradients to +-this by value (0: none)")->capture_default_str();
  cmd->add_flag("--no-bias", a->no_bias, "eagle: no bias on fc (the published heads have one)");
  cmd->add_option("--steps", a->o.steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--batch", a->o.batch, "Sequences per step")->capture_default_str();
  cmd->add_option("--seq", a->o.seq, "Tokens per sequence (BOS first)")->capture_default_str();
  cmd->add_option("--lr", a->lr, "AdamW peak learning rate (linear warm-up, cosine decay to lr/10); default medusa " +
                                     shortest(train::MedusaOptions{}.lr) + ", eagle " + shortest(train::EagleOptions{}.lr));
  cmd->add_option("--warmup", a->o.warmup, "Warm-up steps")->capture_default_str();
  cmd->add_option("--seed", a->o.seed, "Seed of the sequence sampling")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  return {cmd, [a] { return run(*a); }};
}

}  // namespace peregrine::cli
