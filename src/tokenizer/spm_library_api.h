// The C-linkage entry point of the SentencePiece library (libperegrine_spm.so:
// tokenizer/spm_library/, linked with libsentencepiece) and the table of functions it returns;
// sentencepiece_tokenizer.cpp dlopens it (RTLD_LOCAL) and calls through it. Both sides are built
// together from this header, so C++ types cross the boundary as is.
//
// Why a library of its own: Debian's libsentencepiece carries a copy of protobuf-lite and exports
// its symbols. In one global symbol scope with libtorch's libprotobuf (the training library,
// train/train_api.h) each binds to the other's functions and the process crashes at load. Loaded
// RTLD_LOCAL, neither is in the global scope, so each keeps its own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace peregrine {

struct SpmLibraryApi {
  /// A loaded SentencePieceProcessor, or null with `error` set.
  void* (*load)(const std::string& path, std::string* error);
  void (*release)(void* processor);
  std::vector<int> (*encode)(const void* processor, std::string_view text);
  std::vector<std::string> (*encode_as_pieces)(const void* processor, std::string_view text);
  std::string (*id_to_piece)(const void* processor, int id);
  /// 0 normal, 1 control, 2 unknown, 3 byte.
  int (*piece_type)(const void* processor, int id);
  int (*piece_size)(const void* processor);
  int (*bos_id)(const void* processor);
  int (*eos_id)(const void* processor);
};

}  // namespace peregrine

/// Name of the entry point: const peregrine::SpmLibraryApi* peregrine_spm_library().
#define PEREGRINE_SPM_LIBRARY_SYMBOL "peregrine_spm_library"
