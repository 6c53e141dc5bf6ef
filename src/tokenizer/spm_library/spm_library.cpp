// libperegrine_spm.so: libsentencepiece's SentencePieceProcessor behind the SpmLibraryApi table
// (tokenizer/spm_library_api.h).
#include <sentencepiece_processor.h>

#include "tokenizer/spm_library_api.h"

namespace peregrine {
namespace {

const sentencepiece::SentencePieceProcessor& sp(const void* p) {
  return *static_cast<const sentencepiece::SentencePieceProcessor*>(p);
}

void* load(const std::string& path, std::string* error) {
  auto* p = new sentencepiece::SentencePieceProcessor();
  const auto st = p->Load(path);
  if (st.ok()) return p;
  *error = st.ToString();
  delete p;
  return nullptr;
}

void release(void* p) { delete static_cast<sentencepiece::SentencePieceProcessor*>(p); }

std::vector<int> encode(const void* p, std::string_view text) {
  std::vector<int> ids;
  (void)sp(p).Encode(text, &ids);  // fails only for an unloaded model
  return ids;
}

std::vector<std::string> encode_as_pieces(const void* p, std::string_view text) { return sp(p).EncodeAsPieces(text); }
std::string id_to_piece(const void* p, int id) { return sp(p).IdToPiece(id); }
int piece_type(const void* p, int id) {
  return sp(p).IsControl(id) ? 1 : sp(p).IsUnknown(id) ? 2 : sp(p).IsByte(id) ? 3 : 0;
}
int piece_size(const void* p) { return sp(p).GetPieceSize(); }
int bos_id(const void* p) { return sp(p).bos_id(); }
int eos_id(const void* p) { return sp(p).eos_id(); }

constexpr SpmLibraryApi kApi{load, release, encode, encode_as_pieces, id_to_piece, piece_type, piece_size, bos_id, eos_id};

}  // namespace
}  // namespace peregrine

extern "C" __attribute__((visibility("default"))) const peregrine::SpmLibraryApi* peregrine_spm_library() {
  return &peregrine::kApi;
}
