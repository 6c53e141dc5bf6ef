// peregrine train-draft: trains draft heads on a frozen target (train/medusa.h: Medusa-1) and
// writes them in the published layout (formats/medusa_heads.h).
#include <chrono>
#include <cstdio>
#include <memory>

#include "common.h"
#include "peregrine/core/text_file.h"
#include "peregrine/train/medusa.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct TrainDraftArgs {
  ModelOptions model;
  std::string kind = "medusa", output, data;
  train::MedusaOptions o;
  std::int32_t threads = 2;
};

int run(const TrainDraftArgs& a) {
  if (std::string why; !train::training_available(&why)) return report(unavailable(why));
  if (a.kind != "medusa") {
    return report(a.kind == "eagle" ? unsupported("--kind eagle is not implemented yet; medusa is")
                                    : invalid_argument("--kind '" + a.kind + "' is not medusa or eagle"));
  }
  if (Status st = validate_threads(a.threads); !st) return report(st);
  if (Status st = a.o.validate(); !st) return report(st);
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
  const auto line = progress_line("train-draft");
  train::MedusaReport rep;
  auto heads = train::train_medusa(*target, *f32, (*tok)->encode(*text, true), (*tok)->bos_id(), a.o, pool, &rep,
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
  CLI::App* cmd = app.add_subcommand("train-draft", "Train draft heads on a frozen target (Medusa-1; libtorch)");
  add_model_options(*cmd, a->model);
  cmd->add_option("--kind", a->kind, "medusa (eagle: not yet)")->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Output folder (config.json + medusa_lm_head.safetensors)")->required();
  cmd->add_option("--data", a->data, "Training text (keep it apart from evaluation text)")->required();
  cmd->add_option("--heads", a->o.heads, "Medusa heads (head k predicts the token k + 2 ahead)")->capture_default_str();
  cmd->add_option("--head-layers", a->o.head_layers, "ResBlocks per head")->capture_default_str();
  cmd->add_option("--decay", a->o.decay, "Loss weight of head k: decay^k")->capture_default_str();
  cmd->add_option("--steps", a->o.steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--batch", a->o.batch, "Sequences per step")->capture_default_str();
  cmd->add_option("--seq", a->o.seq, "Tokens per sequence (BOS first)")->capture_default_str();
  cmd->add_option("--lr", a->o.lr, "AdamW peak learning rate (linear warm-up, cosine decay to lr/10)")->capture_default_str();
  cmd->add_option("--warmup", a->o.warmup, "Warm-up steps")->capture_default_str();
  cmd->add_option("--seed", a->o.seed, "Seed of the sequence sampling")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  return {cmd, [a] { return run(*a); }};
}

}  // namespace peregrine::cli
