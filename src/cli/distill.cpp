// peregrine distill: token-level knowledge distillation of a smaller Llama student from a teacher
// (train/distill.h, through libtorch), written as GGUF or a Hugging Face folder.
#include <chrono>
#include <cstdio>
#include <memory>

#include "common.h"
#include "peregrine/core/text_file.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/train/distill.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct DistillArgs {
  ModelOptions model;
  std::string student, student_shape, output, data, loss = "fkl", checkpoint, resume;
  float temperature = 1.0f, lr = 1e-3f, weight_decay = 0.0f;
  std::int64_t steps = 200, batch = 8, seq = 128, warmup = 10, save_every = 0, stop_at = 0, prompt_tokens = 8;
  bool on_policy = false;
  std::uint64_t seed = 0;
  std::int32_t threads = 2;
};

Expected<train::DistillOptions> options_of(const DistillArgs& a) {
  train::DistillOptions o;
  const auto loss = train::kd_loss_from_name(a.loss);
  if (!loss) return invalid_argument("--loss '" + a.loss + "' is not one of fkl, rkl, jsd, tvd, ce");
  o.loss = *loss;
  o.temperature = a.temperature;
  o.steps = a.steps;
  o.batch = a.batch;
  o.seq = a.seq;
  o.lr = a.lr;
  o.warmup = a.warmup;
  o.weight_decay = a.weight_decay;
  o.seed = a.seed;
  o.checkpoint = a.checkpoint;
  o.save_every = a.save_every;
  o.resume = a.resume;
  o.stop_at = a.stop_at;
  o.on_policy = a.on_policy;
  o.prompt_tokens = a.prompt_tokens;
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  return o;
}

// The student before training: --student's model, or the teacher reshaped by --student-shape.
Expected<FloatModel> initial(const DistillArgs& a, const ModelFile& teacher) {
  if (a.student.empty() == a.student_shape.empty()) return invalid_argument("give one of --student FILE and --student-shape SPEC");
  if (!a.student.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(const ModelFile init, load_model_file(a.student));
    return FloatModel::from(init);  // distill checks what the student may be
  }
  PEREGRINE_ASSIGN_OR_RETURN(const auto shape, train::StudentShape::parse(a.student_shape));
  PEREGRINE_ASSIGN_OR_RETURN(const FloatModel t, FloatModel::from(teacher));
  return train::initial_student(t, shape, a.seed);
}

Status write(const FloatModel& student, const DistillArgs& a, const ModelFile& teacher) {
  std::string tokenizer = a.model.tokenizer;
  if (tokenizer.empty() && !teacher.gguf) {
    PEREGRINE_ASSIGN_OR_RETURN(tokenizer, tokenizer_file_of(teacher));
  }
  if (a.output.ends_with(".gguf")) return save_gguf_model(student.view(), a.output, tokenizer);
  return save_hf_model(student.view(), a.output, HfQuantLayout::kGptq, tokenizer);
}

int run(const DistillArgs& a) {
  if (std::string why; !train::training_available(&why)) return report(unavailable(why));
  if (Status st = validate_threads(a.threads); !st) return report(st);
  auto o = options_of(a);
  if (!o) return report(o.status());
  ThreadPool pool(a.threads);
  auto src = open_model(a.model, &pool);
  if (!src) return report(src.status());
  auto tok = calibration_tokenizer(*src, a.model, true);
  if (!tok) return report(tok.status());
  auto text = read_text_file(a.data);
  if (!text) return report(text.status());
  const std::vector<std::int32_t> tokens = (*tok)->encode(*text, true);
  auto student = initial(a, *src);
  if (!student) return report(student.status());
  auto teacher = LlamaModel::create(*src);
  if (!teacher) return report(teacher.status());
  const auto start = std::chrono::steady_clock::now();
  const auto line = [start, last = -1.0](std::int64_t step, std::int64_t steps, double loss, double tps) mutable {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step < steps && s - last < 0.2) return;  // redrawn at most every 0.2 s
    last = s;
    std::fprintf(stderr, "\rdistill: step %lld/%lld  loss %.4f  %.0f tok/s  %.1f s, ETA %.1f s  %s", static_cast<long long>(step),
                 static_cast<long long>(steps), loss, tps, s, s / static_cast<double>(step) * static_cast<double>(steps - step),
                 step == steps ? "\n" : "");
  };
  train::DistillReport rep;
  auto trained = train::distill(*teacher, std::move(*student), tokens, (*tok)->bos_id(), *o, pool, &rep, line);
  if (!trained) return report(trained.status());
  if (Status st = write(*trained, a, *src); !st) return report(st);
  std::printf("wrote %s: %lld-layer student (dim %lld), %s loss %.4f -> %.4f over steps %lld-%lld, %lld tokens in %.1f s\n",
              a.output.c_str(), static_cast<long long>(trained->config().n_layers), static_cast<long long>(trained->config().dim),
              a.loss.c_str(), rep.first_loss, rep.last_loss, static_cast<long long>(rep.first_step + 1),
              static_cast<long long>(rep.first_step + rep.steps), static_cast<long long>(rep.tokens), rep.seconds);
  return 0;
}
}  // namespace

Verb add_distill(CLI::App& app) {
  auto a = std::make_shared<DistillArgs>();
  CLI::App* cmd = app.add_subcommand("distill", "Distill a smaller student from a teacher model (forward / reverse KL, JSD, TVD; libtorch)");
  add_model_options(*cmd, a->model);
  cmd->add_option("--student", a->student, "The student's initial weights: a model file with the teacher's vocabulary");
  cmd->add_option("--student-shape", a->student_shape,
                  "Or the teacher reshaped: layers=N keeps N evenly spaced blocks; dim=, ffn=, heads=, kv-heads= draw new weights");
  cmd->add_option("-o,--output", a->output, "Output: a .gguf file or a folder (safetensors)")->required();
  cmd->add_option("--data", a->data, "Training text (keep it apart from evaluation text)")->required();
  cmd->add_option("--loss", a->loss, "fkl (forward KL), rkl (reverse KL), jsd, tvd, or ce (cross-entropy on the text, no teacher)")
      ->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "Softmax temperature of both distributions")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--batch", a->batch, "Sequences per step")->capture_default_str();
  cmd->add_option("--seq", a->seq, "Tokens per sequence (BOS first)")->capture_default_str();
  cmd->add_option("--lr", a->lr, "AdamW peak learning rate (linear warm-up, cosine decay to lr/10)")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Warm-up steps")->capture_default_str();
  cmd->add_option("--weight-decay", a->weight_decay, "AdamW weight decay")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the sequence sampling and of new weights")->capture_default_str();
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint file written every --save-every steps and at the end");
  cmd->add_option("--save-every", a->save_every, "Steps between checkpoints (0: only at the end)")->capture_default_str();
  cmd->add_option("--resume", a->resume, "Continue from this checkpoint (same options)");
  cmd->add_option("--stop-at", a->stop_at, "Stop after this step (the checkpoint is written there; --resume continues)")
      ->capture_default_str();
  cmd->add_flag("--on-policy", a->on_policy,
                "Train on the teacher's own samples: BOS + --prompt-tokens of each window, the rest drawn from the teacher (T = 1)");
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "With --on-policy: text tokens each sample starts from")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  return {cmd, [a] { return run(*a); }};
}

}  // namespace peregrine::cli
