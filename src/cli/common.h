// Shared pieces of the `peregrine` verbs: model/tokenizer options and error reporting.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/sampling/sampler.h"
#include "peregrine/tokenizer/chat_template.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine::cli {

/// -m / --tokenizer (/ --dtype) options of the model-reading verbs.
struct ModelOptions {
  std::string model;      // empty = the bundled stories260K
  std::string tokenizer;  // override
  std::string dtype;      // empty = as stored; else one of convert_target_dtypes(), converted on load
  std::string bf16_activations = "bf16";  // --bf16-activations: bf16 or f32 (kernels/cpu/matmul/bf16_activations.h)
  bool mmap = false;      // --mmap: weights read in place (WeightPlacement::kInPlace)
  std::string device = "cpu";  // -d/--device: cpu, or cuda (WeightPlacement::kCuda)
  std::int32_t tp = 1;         // --tp: tensor-parallel MPI ranks (cli/parallel_options.h)
  std::int32_t pp = 1;         // --pp: pipeline stages (MPI ranks: tp · pp in all)
  std::int32_t pp_micro_batches = 0;  // --pp-micro-batches: parts of a batch in flight through the stages (0: one per stage)
};

/// Adds -m/--model and --tokenizer to `cmd`.
void add_model_options(CLI::App& cmd, ModelOptions& o);
/// Adds --dtype (weight conversion on load) and --bf16-activations (what BF16 weights multiply)
/// to `cmd`.
void add_dtype_option(CLI::App& cmd, ModelOptions& o);
/// Adds --mmap (weights read in place rather than copied into huge pages) to `cmd`.
void add_mmap_option(CLI::App& cmd, ModelOptions& o);
/// Adds -d/--device cpu|cuda (where the forward runs; backend/cuda_forward.h) to `cmd`.
void add_device_option(CLI::App& cmd, ModelOptions& o);
/// The WeightPlacement of LlamaModel::create that `o` asks for (kCuda for -d cuda).
WeightPlacement weight_placement(const ModelOptions& o);

/// `rel` (e.g. "tools/pareto_plot.py") in the repository the executable was built in
/// (build/bin/../../rel) when it exists there, else in the source tree it was built from.
std::string repository_file(const std::string& rel);

/// The bundled default model: models/stories260K/stories260K.bin next to the executable's
/// repository (build/bin/../../models), else the source tree it was built from.
std::string default_model_path();

/// The shared data folder (real models, tokenizers): $PEREGRINE_SHARED_DIR if set, else
/// `shared` beside the repository the executable was built in (build/bin/../../../shared), else
/// beside the source tree it was built from.
std::string shared_data_dir();

/// A progress line on stderr, "<label>: 3/10 <unit>  2.1 s, ETA 4.5 s", redrawn in place at
/// most every 0.2 s and after the last unit, which ends the line.
std::function<void(std::int64_t done, std::int64_t total, const std::string& unit)> progress_line(std::string label);

/// The weight dtype a --dtype value names, if weights can be encoded to it (one of
/// convert_target_dtypes(): f32, f16, bf16, q8_0, q4_0; formats Peregrine only reads, such as
/// q4_k, are not). Errors: kInvalidArgument "--dtype 'X' is not one of f32, f16, ...".
Expected<DType> parse_weight_dtype(const std::string& name);

/// Loads the model file (default path when o.model is empty), under --tp N joins the MPI run and
/// keeps this rank's shard (cli/parallel_options.h), and with --dtype converts its weight
/// matrices in memory (quant/convert_model.h, rows split over `pool` if given), noting on
/// stderr the matrices that fell back to f16. Errors: those of load_model_file,
/// start_parallel_run / shard_model_file and convert_model_weights (an already quantized model
/// takes only f32); kInvalidArgument for a --dtype that is not one of convert_target_dtypes().
Expected<ModelFile> open_model(const ModelOptions& o, ThreadPool* pool = nullptr);

/// LlamaModel::create(file, weight_placement(o)), joined to this rank's tensor-parallel group
/// under --tp. Errors: those of LlamaModel::create and attach_parallel.
Expected<LlamaModel> create_model(ModelFile file, const ModelOptions& o);

/// Checks a -t/--threads value: [1, 512]. Errors: kInvalidArgument naming the value.
Status validate_threads(std::int32_t threads);

/// The tokenizer calibration text is read with (quantize, prune): m's own or o.tokenizer's when
/// `needed`, else null. Errors: load_tokenizer's.
Expected<std::unique_ptr<Tokenizer>> calibration_tokenizer(const ModelFile& m, const ModelOptions& o, bool needed);

/// Prints "peregrine: error: <message>" to stderr and returns the exit code (1). In an MPI run it
/// then ends every rank (cli/parallel_options.h); a rank other than 0 waits a second first and
/// prints "peregrine: error (rank R): ...", so an error every rank meets is printed once.
int report(const Status& st);

/// Adds --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n and --seed.
void add_sampling_options(CLI::App& cmd, SamplingParams& s);

/// The chat template a --chat-template value names: a file with Jinja source, else a built-in
/// name (ChatTemplate::builtin); empty: the model's own template, falling back to chatml.
/// Errors: those of ChatTemplate::parse / builtin / load_chat_template, text_or_file's.
Expected<ChatTemplate> chat_template_for(const std::string& option, const ModelFile& file);

/// A model as chat and serve use it: the weights, the tokenizer, and the chat template.
struct ChatModel {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ChatTemplate chat_template;
};

/// Opens -m's model (on `pool`), its tokenizer (or --tokenizer) and chat_template_for(`chat_template`).
/// Errors: those of open_model, load_tokenizer, chat_template_for and create_model.
Expected<ChatModel> load_chat_model(const ModelOptions& o, const std::string& chat_template, ThreadPool& pool);

/// The text of a `TEXT | -f FILE` pair: the whole file when `file` is set, else `text`.
/// Errors: kNotFound (file missing) / kIoError.
Expected<std::string> text_or_file(const std::string& text, const std::string& file);

}  // namespace peregrine::cli
