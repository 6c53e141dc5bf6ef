// Shared pieces of the `peregrine` verbs: model/tokenizer options and error reporting.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine::cli {

/// -m / --tokenizer options every model-reading verb takes.
struct ModelOptions {
  std::string model;      // empty = the bundled stories260K
  std::string tokenizer;  // override
};

/// Adds -m/--model and --tokenizer to `cmd`.
void add_model_options(CLI::App& cmd, ModelOptions& o);

/// The bundled default model: models/stories260K/stories260K.bin next to the executable's
/// repository (build/bin/../../models), else the source tree it was built from.
std::string default_model_path();

/// Loads the model file (default path when o.model is empty).
Expected<ModelFile> open_model(const ModelOptions& o);

/// -t/--threads must be in [1, 512]. Errors: kInvalidArgument.
Status validate_threads(std::int32_t threads);

/// Prints "peregrine: error: <message>" to stderr; returns the exit code (1).
int report(const Status& st);

/// The text of a `TEXT | -f FILE` pair: the whole file when `file` is set, else `text`.
/// Errors: kNotFound (file missing) / kIoError.
Expected<std::string> text_or_file(const std::string& text, const std::string& file);

}  // namespace peregrine::cli
