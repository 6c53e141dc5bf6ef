#include "train/torch/distill_impl.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <random>

#include "peregrine/eval/eval_windows.h"
#include "peregrine/eval/logit_comparison.h"
#include "train/torch/kd_loss.h"
#include "train/torch/llama_student.h"
#include "train/torch/training_steps.h"

namespace peregrine::train {
namespace {

// A deep copy of `from`'s tensor `name` into `to` under `as`.
void copy_tensor(const FloatModel& from, const std::string& name, FloatModel& to, const std::string& as) {
  const auto v = from.tensor(name);
  to.set(as, from.shape(name), std::vector<float>(v.begin(), v.end()));
}

// The teacher's config with the shape's changes; whether a width changed.
Expected<std::pair<ModelConfig, bool>> student_config(const ModelConfig& t, const StudentShape& s) {
  ModelConfig c = t;
  const auto pick = [](std::int64_t v, std::int64_t dflt) { return v > 0 ? v : dflt; };
  c.n_layers = pick(s.layers, t.n_layers);
  c.dim = pick(s.dim, t.dim);
  c.ffn_dim = pick(s.ffn, t.ffn_dim);
  c.n_heads = pick(s.heads, t.n_heads);
  c.n_kv_heads = pick(s.kv_heads, s.heads > 0 && s.kv_heads == 0 ? std::min(c.n_heads, t.n_kv_heads) : t.n_kv_heads);
  if (c.n_layers > t.n_layers) {
    return invalid_argument("--student-shape: layers=" + std::to_string(c.n_layers) + " is more than the teacher's " +
                            std::to_string(t.n_layers));
  }
  if (c.n_heads % c.n_kv_heads != 0) return invalid_argument("--student-shape: heads must be a multiple of kv-heads");
  if (c.dim % c.n_heads != 0 || (c.dim / c.n_heads) % 2 != 0) {
    return invalid_argument("--student-shape: dim / heads must be an even whole number (the head dimension)");
  }
  const bool width = c.dim != t.dim || c.ffn_dim != t.ffn_dim || c.n_heads != t.n_heads || c.n_kv_heads != t.n_kv_heads;
  if (width) c.head_dim = c.dim / c.n_heads;
  return std::pair{c, width};
}

// Every tensor of config c drawn anew: matrices normal(0, 0.02), norms 1.
void random_weights(FloatModel& m, const std::vector<std::string>& names, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const std::string& name : names) {
    const auto shape = llama_tensor_shape(m.config(), name);
    std::int64_t n = 1;
    for (std::int64_t d : *shape) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
    if (!is_norm_weight(name)) {
      for (float& x : v) x = normal(rng);
    }
    m.set(name, *shape, std::move(v));
  }
}

// The teacher's logits [batch, seq, vocab] of every sequence, from Peregrine's forward.
Expected<torch::Tensor> teacher_logits(const LlamaModel& teacher, const torch::Tensor& tokens, ThreadPool& pool) {
  const std::int64_t B = tokens.size(0), T = tokens.size(1), V = teacher.config().vocab_size;
  torch::Tensor out = torch::empty({B, T, V}, torch::kFloat32);
  for (std::int64_t b = 0; b < B; ++b) {
    const torch::Tensor row = tokens[b].to(torch::kInt32).contiguous();
    const std::span<const std::int32_t> ids(row.data_ptr<std::int32_t>(), static_cast<std::size_t>(T));
    PEREGRINE_ASSIGN_OR_RETURN(const auto logits, teacher_forced_logits(teacher, ids, pool));
    std::copy(logits.begin(), logits.end(), out[b].data_ptr<float>());
  }
  return out;
}

// Samples the rest of `ids` (its first `from` tokens given) from the teacher at temperature 1,
// one decode forward per token, and writes the teacher's logits at every position into
// `logits` ([ids.size(), vocab]).
Status sample_from_teacher(const LlamaModel& teacher, std::span<std::int64_t> ids, std::int64_t from, float* logits,
                           std::mt19937_64& rng, ThreadPool& pool) {
  const std::int64_t T = static_cast<std::int64_t>(ids.size()), V = teacher.config().vocab_size;
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(teacher.config(), T, DType::kF32));
  std::vector<float> out;
  Batch prefix;
  for (std::int64_t i = 0; i < from; ++i) prefix.add(static_cast<std::int32_t>(ids[i]), static_cast<std::int32_t>(i), 0, true);
  PEREGRINE_RETURN_IF_ERROR(teacher.forward(prefix, cache, out, pool));
  std::copy(out.begin(), out.end(), logits);
  for (std::int64_t i = from; i < T; ++i) {
    const float* last = logits + (i - 1) * V;
    const float peak = *std::max_element(last, last + V);
    std::vector<double> p(static_cast<std::size_t>(V));
    for (std::int64_t v = 0; v < V; ++v) p[static_cast<std::size_t>(v)] = std::exp(static_cast<double>(last[v] - peak));
    ids[static_cast<std::size_t>(i)] = std::discrete_distribution<std::int64_t>(p.begin(), p.end())(rng);
    Batch next;
    next.add(static_cast<std::int32_t>(ids[static_cast<std::size_t>(i)]), static_cast<std::int32_t>(i), 0, true);
    PEREGRINE_RETURN_IF_ERROR(teacher.forward(next, cache, out, pool));
    std::copy(out.begin(), out.end(), logits + i * V);
  }
  return Status::ok();
}

// On-policy data (--on-policy): the step's windows cut to BOS + `prompt_tokens` text tokens,
// the rest sampled from the teacher; `tokens` rewritten in place, the teacher's logits
// [batch, seq, vocab] returned.
Expected<torch::Tensor> teacher_samples(const LlamaModel& teacher, torch::Tensor& tokens, const DistillOptions& o,
                                        std::int64_t step, ThreadPool& pool) {
  const std::int64_t B = tokens.size(0), T = tokens.size(1);
  torch::Tensor logits = torch::empty({B, T, teacher.config().vocab_size}, torch::kFloat32);
  std::mt19937_64 rng(o.seed * 1000003u + static_cast<std::uint64_t>(step) + 0x9E3779B97F4A7C15ull);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::span<std::int64_t> ids(tokens[b].data_ptr<std::int64_t>(), static_cast<std::size_t>(T));
    PEREGRINE_RETURN_IF_ERROR(sample_from_teacher(teacher, ids, std::min(T, o.prompt_tokens + 1), logits[b].data_ptr<float>(), rng, pool));
  }
  return logits;
}

// Names a torch archive accepts (no dots) for the canonical tensor names.
std::string archive_key(const std::string& name) {
  std::string k = "w/" + name;
  std::replace(k.begin(), k.end(), '.', '_');
  return k;
}

void save_checkpoint(const std::string& path, const LlamaStudent& s, torch::optim::AdamW& opt, std::int64_t step) {
  torch::serialize::OutputArchive archive;
  for (const auto& [name, t] : s.named_parameters()) archive.write(archive_key(name), t.detach());
  archive.write("step", torch::tensor(step));
  torch::serialize::OutputArchive state;
  opt.save(state);
  archive.write("optimizer", state);
  archive.save_to(path);
}

// Loads a checkpoint into the student's tensors and the optimizer; returns its step.
Expected<std::int64_t> load_checkpoint(const std::string& path, LlamaStudent& s, torch::optim::AdamW& opt) {
  if (!std::filesystem::exists(path)) return not_found("checkpoint " + path + " does not exist");
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    const torch::NoGradGuard no_grad;
    for (const auto& [name, t] : s.named_parameters()) {
      torch::Tensor saved;
      archive.read(archive_key(name), saved);
      if (!saved.sizes().equals(t.sizes())) return corrupt_file("checkpoint " + path + ": " + name + " has another shape");
      t.copy_(saved);
    }
    torch::Tensor step;
    archive.read("step", step);
    torch::serialize::InputArchive state;
    archive.read("optimizer", state);
    opt.load(state);
    return step.item<std::int64_t>();
  } catch (const c10::Error& e) {
    return corrupt_file("checkpoint " + path + " is not a distill checkpoint of this student: " + e.what_without_backtrace());
  }
}

}  // namespace

Expected<FloatModel> initial_student_impl(const FloatModel& teacher, const StudentShape& shape, std::uint64_t seed) {
  PEREGRINE_RETURN_IF_ERROR(check_student_support_impl(teacher));
  PEREGRINE_ASSIGN_OR_RETURN(const auto planned, student_config(teacher.config(), shape));
  const auto& [config, width] = planned;
  FloatModel s = teacher;  // shares the teacher's buffers until every tensor is replaced below
  for (const std::string& name : teacher.names()) s.erase(name);
  s.config() = config;
  std::vector<std::string> names{"token_embd.weight", "output_norm.weight"};
  if (!config.tied_embeddings) names.push_back("output.weight");
  const char* per_layer[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
  if (width) {
    for (std::int64_t l = 0; l < config.n_layers; ++l) {
      for (const char* t : per_layer) names.push_back(layer_tensor_name(l, t));
    }
    random_weights(s, names, seed);
    return s;
  }
  for (const std::string& name : names) copy_tensor(teacher, name, s, name);
  const std::int64_t n = config.n_layers, from = teacher.config().n_layers;
  for (std::int64_t l = 0; l < n; ++l) {  // evenly spaced: 0, …, from − 1
    const std::int64_t src = n == 1 ? 0 : (l * (from - 1) + (n - 1) / 2) / (n - 1);
    for (const char* t : per_layer) copy_tensor(teacher, layer_tensor_name(src, t), s, layer_tensor_name(l, t));
  }
  return s;
}

Expected<FloatModel> distill_impl(const LlamaModel& teacher, FloatModel student, std::span<const std::int32_t> text,
                             std::int32_t bos, const DistillOptions& o, ThreadPool& pool, DistillReport* report,
                             const DistillProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  const ModelConfig& tc = teacher.config();
  if (student.config().vocab_size != tc.vocab_size) {
    return invalid_argument("the student's vocabulary has " + std::to_string(student.config().vocab_size) +
                            " tokens, the teacher's " + std::to_string(tc.vocab_size) + ": they must be the same");
  }
  if (o.seq > std::min(tc.max_seq_len, student.config().max_seq_len)) {
    return invalid_argument("--seq " + std::to_string(o.seq) + " is longer than a model's context (" +
                            std::to_string(std::min(tc.max_seq_len, student.config().max_seq_len)) + ")");
  }
  if (static_cast<std::int64_t>(text.size()) < o.seq + 1) {
    return invalid_argument("the training text holds " + std::to_string(text.size()) + " tokens, fewer than --seq + 1 = " +
                            std::to_string(o.seq + 1));
  }
  PEREGRINE_ASSIGN_OR_RETURN(LlamaStudent s, LlamaStudent::from(student));
  torch::manual_seed(o.seed);
  torch::set_num_threads(static_cast<int>(pool.n_threads()));
  torch::optim::AdamW opt(s.parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  std::int64_t first = 0;
  if (!o.resume.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(first, load_checkpoint(o.resume, s, opt));
  }
  DistillReport rep;
  rep.first_step = first;
  const auto t0 = std::chrono::steady_clock::now();
  LossLog log;
  const std::int64_t last = o.stop_at > 0 ? o.stop_at : o.steps;
  for (std::int64_t step = first; step < last; ++step) {
    for (auto& group : opt.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(cosine_learning_rate(o.lr, o.warmup, o.steps, step));
    }
    torch::Tensor tokens = text_windows(text, bos, o.batch, o.seq, o.seed, step);
    torch::Tensor target_logits = torch::empty({0});
    if (o.on_policy) {
      PEREGRINE_ASSIGN_OR_RETURN(target_logits, teacher_samples(teacher, tokens, o, step, pool));
      target_logits = target_logits.view({-1, tc.vocab_size});
    } else if (o.loss != KdLoss::kCrossEntropy) {
      PEREGRINE_ASSIGN_OR_RETURN(target_logits, teacher_logits(teacher, tokens, pool));
      target_logits = target_logits.view({-1, tc.vocab_size});
    }
    const torch::Tensor next = torch::cat({tokens.slice(1, 1), torch::full({o.batch, 1}, -1, torch::kInt64)}, 1).view(-1);
    const torch::Tensor loss = kd_loss(o.loss, s.forward(tokens).view({-1, tc.vocab_size}), target_logits, next, o.temperature);
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.losses.push_back(loss.item<double>());
    rep.tokens += o.batch * o.seq;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (progress) progress(step + 1, last, log.losses.back(), static_cast<double>(rep.tokens) / std::max(seconds, 1e-9));
    if (!o.checkpoint.empty() && (step + 1 == last || (o.save_every > 0 && (step + 1) % o.save_every == 0))) {
      save_checkpoint(o.checkpoint, s, opt, step + 1);
    }
  }
  rep.steps = static_cast<std::int64_t>(log.losses.size());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.first_loss = log.first();
  rep.last_loss = log.last();
  if (report != nullptr) *report = rep;
  s.write_to(student);
  return student;
}

}  // namespace peregrine::train
