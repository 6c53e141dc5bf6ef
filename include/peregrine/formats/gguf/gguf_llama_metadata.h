// ModelConfig → GGUF llama metadata: the writing side of gguf_model.h, with the keys and
// values llama.cpp's convert_hf_to_gguf.py writes for the llama architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/formats/gguf/gguf_writer.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// llama_ftype (llama.h) of a file whose matrices are mostly `t`, as llama.cpp's loader guesses
/// it: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q2_K 10, Q3_K 12
/// (Q3_K_M), Q4_K 15 (Q4_K_M), Q5_K 17 (Q5_K_M), Q6_K 18, IQ4_NL 25, IQ4_XS 30, BF16 32; 0 for
/// the types GGUF cannot hold. A quantization mix knows its own id (quant/gguf_file_type.h).
std::uint32_t llama_file_type(DType t);

/// Adds general.architecture = c.arch, general.name = `name`, general.file_type (`file_type`
/// when given, else llama_file_type(matrix_dtype)), general.quantization_version = 2 when
/// matrix_dtype is a ggml block format, and
/// {arch}.{vocab_size, context_length, embedding_length, block_count, feed_forward_length,
/// rope.dimension_count, attention.head_count, attention.head_count_kv,
/// attention.layer_norm_rms_epsilon, rope.freq_base} from `c` (plus attention.key_length /
/// value_length when head_dim · n_heads != dim, as llama.cpp writes Qwen3's; rope.scaling.type,
/// .factor and YaRN's keys for linear and yarn RoPE scaling, LongRoPE's
/// rope.scaling.original_context_length and .attn_factor; llama3 scaling is not metadata but
/// the rope_freqs.weight tensor, LongRoPE's factors the rope_factors_short / rope_factors_long
/// tensors, which the caller writes), and peregrine.ffn_down_hadamard
/// = true when c.ffn_down_hadamard (a key llama.cpp ignores: such a file runs only in Peregrine),
/// and for a Mixture-of-Experts config {arch}.expert_count, expert_used_count,
/// expert_feed_forward_length, expert_shared_feed_forward_length (with a shared expert) and
/// expert_weights_norm (only where it differs from the family's rule).
/// Errors: those of GgufWriter::add (a key already added); kUnsupported (dynamic NTK RoPE
/// scaling, which GGUF cannot hold).
Status add_llama_metadata(GgufWriter& w, const std::string& name, const ModelConfig& c, DType matrix_dtype,
                          std::optional<std::uint32_t> file_type = std::nullopt);

/// Copies every tokenizer.* key (types kept) of the GGUF at `vocab_path`, whose
/// tokenizer.ggml.tokens must hold `vocab_size` tokens. Errors: those of GgufFile::open;
/// kInvalidArgument (no token list, or a different vocabulary size); GgufWriter::add's.
Status copy_tokenizer_metadata(GgufWriter& w, const std::string& vocab_path, std::int64_t vocab_size);

/// Copies every tokenizer.* key (types kept) of an already parsed GGUF (e.g. ModelFile::gguf).
/// Errors: kNotFound (no tokenizer.ggml.model key); GgufWriter::add's.
Status copy_tokenizer_metadata(GgufWriter& w, const GgufFile& source, const std::string& what);

/// Converts a llama2.c tokenizer.bin (tokenizer/llama2c_tokenizer.h) into the keys llama.cpp's
/// llama2.c converter writes for a SentencePiece vocabulary: tokenizer.ggml.model "llama",
/// tokens (string array), scores (f32 array), token_type (i32 array: 1 normal, 2 unknown,
/// 3 control, 6 byte for the "<0xXX>" pieces), unknown_token_id 0, bos_token_id 1,
/// eos_token_id 2 (u32). The file must hold `vocab_size` tokens.
/// Errors: those of MappedFile::open and parse_llama2c_vocab (kCorruptFile); kInvalidArgument
/// (a different vocabulary size); GgufWriter::add's.
Status add_llama2c_tokenizer_metadata(GgufWriter& w, const std::string& tokenizer_bin, std::int64_t vocab_size);

}  // namespace peregrine
