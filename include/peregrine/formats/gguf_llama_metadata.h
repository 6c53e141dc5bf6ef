// ModelConfig → GGUF llama metadata: the writing side of gguf_model.h, with the keys and
// values llama.cpp's convert_hf_to_gguf.py writes for the llama architecture.
#pragma once

#include <cstdint>
#include <string>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/formats/gguf_writer.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// llama_ftype (llama.h) of a file whose matrices are `t`: ALL_F32 0, MOSTLY_F16 1,
/// MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32.
std::uint32_t llama_file_type(DType t);

/// Adds general.architecture = llama, general.name = `name`, general.file_type
/// (llama_file_type(matrix_dtype)), general.quantization_version = 2 for Q8_0/Q4_0, and
/// llama.{vocab_size, context_length, embedding_length, block_count, feed_forward_length,
/// rope.dimension_count, attention.head_count, attention.head_count_kv,
/// attention.layer_norm_rms_epsilon, rope.freq_base} from `c`.
/// Errors: those of GgufWriter::add (a key already added).
Status add_llama_metadata(GgufWriter& w, const std::string& name, const ModelConfig& c, DType matrix_dtype);

/// Copies every tokenizer.* key (types kept) of the GGUF at `vocab_path`, whose
/// tokenizer.ggml.tokens must hold `vocab_size` tokens. Errors: those of GgufFile::open;
/// kInvalidArgument (no token list, or a different vocabulary size); GgufWriter::add's.
Status copy_tokenizer_metadata(GgufWriter& w, const std::string& vocab_path, std::int64_t vocab_size);

}  // namespace peregrine
