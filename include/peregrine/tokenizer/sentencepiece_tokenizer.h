// SentencePiece .model files (serialized ModelProto) through libsentencepiece, which lives in its
// own library loaded on first use (libperegrine_spm.so; src/tokenizer/spm_library_api.h).
#pragma once

#include <memory>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// Loads a SentencePiece model (BPE or unigram) with libsentencepiece; kind() "sentencepiece".
/// encode = SentencePieceProcessor::Encode (+ BOS); decode_token follows the same rules as
/// SpmTokenizer ("▁" → ' ', byte pieces → raw bytes, control → "", unknown → " ⁇ ", the
/// dummy-prefix space dropped at the start / after BOS when the model adds one).
/// Errors: kNotFound (no such file), kCorruptFile (libsentencepiece cannot parse it),
/// kUnavailable (libperegrine_spm.so not built or not loadable).
Expected<std::unique_ptr<Tokenizer>> load_sentencepiece_model(const std::string& path);

}  // namespace peregrine
