// peregrine finetune: LoRA / QLoRA fine-tuning of a model on a text (train/finetune.h, libtorch),
// the adapter written as a Hugging Face PEFT folder (model/lora_adapter.h save_peft_adapter)
// that generate --lora, lora merge and PEFT load.
#include <cstdio>
#include <memory>

#include "common.h"
#include "peregrine/core/text_file.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/train/finetune.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct FinetuneArgs {
  ModelOptions model;
  std::string output, data, eval_data, targets = "q,k,v,o,gate,up,down";
  train::FinetuneOptions o;
  std::int32_t threads = 2;
};

// The text of `path` tokenized by the model's tokenizer, BOS first.
Expected<std::vector<std::int32_t>> tokens_of(const std::string& path, const Tokenizer& tok) {
  PEREGRINE_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  return tok.encode(text, true);
}

Status run(const FinetuneArgs& a) {
  if (std::string why; !train::training_available(&why)) return unavailable(why);
  train::FinetuneOptions o = a.o;
  PEREGRINE_ASSIGN_OR_RETURN(o.targets, train::parse_lora_targets(a.targets));
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  PEREGRINE_RETURN_IF_ERROR(validate_threads(a.threads));
  ThreadPool pool(a.threads);
  PEREGRINE_ASSIGN_OR_RETURN(const ModelFile src, open_model(a.model, &pool));
  PEREGRINE_ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tok, calibration_tokenizer(src, a.model, true));
  PEREGRINE_ASSIGN_OR_RETURN(const std::vector<std::int32_t> text, tokens_of(a.data, *tok));
  std::vector<std::int32_t> eval;
  if (!a.eval_data.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(eval, tokens_of(a.eval_data, *tok));
  }
  PEREGRINE_ASSIGN_OR_RETURN(FloatModel base, FloatModel::from(src));
  PEREGRINE_RETURN_IF_ERROR(train::check_student_support(base));
  const auto line = progress_line("finetune");
  train::FinetuneReport rep;
  PEREGRINE_ASSIGN_OR_RETURN(const LoraAdapter adapter,
                             train::finetune(std::move(base), text, eval, o, pool, &rep,
                                             [&](std::int64_t step, std::int64_t steps, double, double) { line(step, steps, "steps"); }));
  const std::string base_path = a.model.model.empty() ? default_model_path() : a.model.model;
  PEREGRINE_RETURN_IF_ERROR(save_peft_adapter(adapter, a.output, base_path));
  std::printf("wrote %s: %s adapter, rank %lld, alpha %g, %zu weights, %lld trainable parameters (base projections %.3f bits/weight); "
              "loss %.4f -> %.4f over %lld steps in %.1f s\n",
              a.output.c_str(), o.qlora ? "QLoRA" : "LoRA", static_cast<long long>(o.rank), static_cast<double>(o.alpha),
              adapter.tensors.size(), static_cast<long long>(rep.trainable), rep.base_bits_per_weight, rep.first_loss, rep.last_loss,
              static_cast<long long>(rep.steps), rep.seconds);
  if (rep.eval_tokens > 0) {
    std::printf("held-out perplexity (%s, %lld tokens): %.4f before, %.4f after\n", a.eval_data.c_str(),
                static_cast<long long>(rep.eval_tokens), rep.eval_ppl_before, rep.eval_ppl_after);
  }
  return Status::ok();
}

}  // namespace

Verb add_finetune(CLI::App& app) {
  auto a = std::make_shared<FinetuneArgs>();
  CLI::App* cmd = app.add_subcommand("finetune", "Fine-tune LoRA / QLoRA adapters on a text (libtorch); writes a PEFT adapter folder");
  add_model_options(*cmd, a->model);
  cmd->add_option("-o,--output", a->output, "Output folder (adapter_config.json + adapter_model.safetensors)")->required();
  cmd->add_option("--data", a->data, "Training text (keep it apart from the evaluation text)")->required();
  cmd->add_option("--eval-data", a->eval_data, "Held-out text: its perplexity is measured before and after training");
  cmd->add_option("--lora-r", a->o.rank, "LoRA rank r")->capture_default_str();
  cmd->add_option("--lora-alpha", a->o.alpha, "LoRA alpha (scale alpha / r)")->capture_default_str();
  cmd->add_option("--target", a->targets, "Projections to adapt, among q,k,v,o,gate,up,down")->capture_default_str();
  cmd->add_flag("--qlora", a->o.qlora, "QLoRA: train on the base's projections quantized to NF4 with double quantization");
  cmd->add_option("--steps", a->o.steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--lr", a->o.lr, "AdamW peak learning rate (linear warm-up, cosine decay to lr/10)")->capture_default_str();
  cmd->add_option("--warmup", a->o.warmup, "Warm-up steps")->capture_default_str();
  cmd->add_option("--seq-len", a->o.seq, "Tokens per training window (and per evaluation window)")->capture_default_str();
  cmd->add_option("--batch", a->o.batch, "Windows per step")->capture_default_str();
  cmd->add_option("--seed", a->o.seed, "Seed of the initialization and the window sampling")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  return {cmd, [a] {
            const Status st = run(*a);
            return st ? 0 : report(st);
          }};
}

}  // namespace peregrine::cli
