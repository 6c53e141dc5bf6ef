#include "common.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "parallel_options.h"
#include "peregrine/core/text_file.h"
#include "peregrine/dist/mpi_world.h"
#include "peregrine/kernels/cpu/matmul/bf16_activations.h"
#include "peregrine/quant/convert_model.h"

namespace peregrine::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("-m,--model", o.model,
                 "Model: a .gguf file, a llama2.c .bin, or a Hugging Face folder "
                 "(default: the bundled stories260K)");
  cmd.add_option("--tokenizer", o.tokenizer,
                 "Tokenizer file overriding the model's (tokenizer.bin, tokenizer.model, "
                 "tokenizer.json, or a vocab .gguf)");
}

void add_dtype_option(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("--dtype", o.dtype,
                 "Convert the weight matrices on load (round-to-nearest): f32, f16, bf16, q8_0, "
                 "q4_0 or nf4 (QLoRA's NormalFloat-4; rows not a multiple of 32 — nf4: 64 — stay "
                 "f16); an already quantized model takes only f32 (decoded exactly)");
  cmd.add_option("--bf16-activations", o.bf16_activations,
                 "What BF16 weights multiply: bf16 (the activations rounded to BF16, as PyTorch and "
                 "llama.cpp compute; prefill runs as AVX512_BF16 dot products, about twice as fast) "
                 "or f32 (the activations as they are: exact products, the f32 GEMM)")
      ->check(CLI::IsMember({"bf16", "f32"}));
}

void add_mmap_option(CLI::App& cmd, ModelOptions& o) {
  cmd.add_flag("--mmap", o.mmap,
               "Read the weight matrices in place from the file mapping (pages shared with the "
               "page cache) instead of copying them at load into 2 MiB huge pages, which decode "
               "streams faster; Q4_0 is repacked into huge pages either way");
}

void add_device_option(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("-d,--device", o.device,
                 "Where the forward runs: cpu, or cuda (the first NVIDIA GPU; dense Llama-family "
                 "models, K/V in f32 or f16)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

WeightPlacement weight_placement(const ModelOptions& o) {
  if (o.device == "cuda") return WeightPlacement::kCuda;
  return o.mmap ? WeightPlacement::kInPlace : WeightPlacement::kHugePages;
}

std::string repository_file(const std::string& rel) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto candidate = exe.parent_path().parent_path().parent_path() / rel;
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
  }
  return (std::filesystem::path(PEREGRINE_DEFAULT_MODEL_DIR) / ".." / ".." / rel).lexically_normal().string();
}

std::string default_model_path() { return repository_file("models/stories260K/stories260K.bin"); }

std::string shared_data_dir() {
  if (const char* env = std::getenv("PEREGRINE_SHARED_DIR"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto candidate = exe.parent_path().parent_path().parent_path().parent_path() / "shared";
    if (std::filesystem::is_directory(candidate, ec)) return candidate.string();
  }
  return (std::filesystem::path(PEREGRINE_DEFAULT_MODEL_DIR) / ".." / ".." / ".." / "shared").lexically_normal().string();
}

Expected<DType> parse_weight_dtype(const std::string& name) {
  const auto dtype = dtype_from_name(name);
  const auto targets = convert_target_dtypes();
  if (dtype && std::find(targets.begin(), targets.end(), *dtype) != targets.end()) return *dtype;
  std::string names;
  for (DType t : targets) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
  return invalid_argument("--dtype '" + name + "' is not one of " + names);
}

Expected<ModelFile> open_model(const ModelOptions& o, ThreadPool* pool) {
  std::optional<DType> dtype;
  if (!o.dtype.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(dtype, parse_weight_dtype(o.dtype));
  }
  set_bf16_activations(o.bf16_activations == "f32" ? Bf16Activations::kF32 : Bf16Activations::kBf16);
  PEREGRINE_RETURN_IF_ERROR(start_parallel_run(o));
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile full, load_model_file(o.model.empty() ? default_model_path() : o.model));
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile m, shard_for_run(std::move(full), o));
  if (!dtype) return m;
  PEREGRINE_ASSIGN_OR_RETURN(auto fell_back, convert_model_weights(m, *dtype, pool));
  if (!fell_back.empty()) {
    std::fprintf(stderr, "peregrine: --dtype %s: %zu matrices whose rows do not fit its blocks stay f16 (%s%s)\n",
                 o.dtype.c_str(), fell_back.size(), fell_back.front().c_str(), fell_back.size() > 1 ? ", ..." : "");
  }
  return m;
}

Expected<LlamaModel> create_model(ModelFile file, const ModelOptions& o) {
  PEREGRINE_ASSIGN_OR_RETURN(LlamaModel model, LlamaModel::create(std::move(file), weight_placement(o)));
  PEREGRINE_RETURN_IF_ERROR(attach_parallel(model, o));
  return model;
}

Expected<std::unique_ptr<Tokenizer>> calibration_tokenizer(const ModelFile& m, const ModelOptions& o, bool needed) {
  if (!needed) return std::unique_ptr<Tokenizer>();
  return load_tokenizer(m, o.tokenizer);
}

Status validate_threads(std::int32_t threads) {
  constexpr std::int32_t kMaxThreads = 512;
  if (threads < 1 || threads > kMaxThreads) {
    return invalid_argument("-t/--threads must be in [1, " + std::to_string(kMaxThreads) + "] (got " +
                            std::to_string(threads) + ")");
  }
  return Status::ok();
}

std::function<void(std::int64_t, std::int64_t, const std::string&)> progress_line(std::string label) {
  const auto start = std::chrono::steady_clock::now();
  return [start, label = std::move(label), last = -1.0](std::int64_t done, std::int64_t total, const std::string& unit) mutable {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (done < total && s - last < 0.2) return;
    last = s;
    const double eta = done > 0 ? s * static_cast<double>(total - done) / static_cast<double>(done) : 0.0;
    std::fprintf(stderr, "\r%s: %lld/%lld %s  %.1f s, ETA %.1f s  %s", label.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), unit.c_str(), s, eta, done == total ? "\n" : "");
  };
}

int report(const Status& st) {
  const auto world = in_multi_rank_run() ? mpi_world() : Expected<MpiWorld*>(unavailable(""));
  if (world && (*world)->rank() > 0) {
    // Every rank usually meets the same error (they run the same code on the same input): give
    // rank 0 a second to print it and end the run, so that it is said once; an error of this
    // rank alone still gets out.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::fprintf(error_stream(), "peregrine: error (rank %d): %s\n", (*world)->rank(), st.message().c_str());
  } else {
    std::fprintf(error_stream(), "peregrine: error: %s\n", st.message().c_str());
  }
  end_run_on_error(1);
  return 1;
}

Expected<std::string> text_or_file(const std::string& text, const std::string& path) {
  if (path.empty()) return text;
  return read_text_file(path);
}

void add_sampling_options(CLI::App& cmd, SamplingParams& s) {
  cmd.add_option("--temp", s.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd.add_option("--top-k", s.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd.add_option("--top-p", s.top_p, "Top-p / nucleus (1 = off)")->capture_default_str();
  cmd.add_option("--min-p", s.min_p, "Min-p (0 = off)")->capture_default_str();
  cmd.add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")->capture_default_str();
  cmd.add_option("--presence-penalty", s.presence_penalty, "Presence penalty, [-2, 2] (0 = off)")->capture_default_str();
  cmd.add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty, [-2, 2] (0 = off)")->capture_default_str();
  cmd.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the penalties look back over (-1 = all)")->capture_default_str();
  cmd.add_option("--seed", s.seed, "RNG seed")->capture_default_str();
}

Expected<ChatModel> load_chat_model(const ModelOptions& o, const std::string& chat_template, ThreadPool& pool) {
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile file, open_model(o, &pool));
  PEREGRINE_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, load_tokenizer(file, o.tokenizer));
  PEREGRINE_ASSIGN_OR_RETURN(ChatTemplate tmpl, chat_template_for(chat_template, file));
  PEREGRINE_ASSIGN_OR_RETURN(LlamaModel model, create_model(std::move(file), o));
  return ChatModel{std::make_unique<LlamaModel>(std::move(model)), std::move(tokenizer), std::move(tmpl)};
}

Expected<ChatTemplate> chat_template_for(const std::string& option, const ModelFile& file) {
  if (option.empty()) return load_chat_template(file, "chatml");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(option, ec)) return ChatTemplate::builtin(option);
  PEREGRINE_ASSIGN_OR_RETURN(const std::string source, text_or_file("", option));
  return ChatTemplate::parse(source);
}

}  // namespace peregrine::cli
