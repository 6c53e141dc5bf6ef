#include "peregrine/tokenizer/sentencepiece_tokenizer.h"

#include <filesystem>

#include "peregrine/core/runtime_library.h"
#include "peregrine/tokenizer/vocab.h"
#include "spm_piece.h"
#include "tokenizer/spm_library_api.h"

namespace peregrine {
namespace {

// libperegrine_spm.so, loaded on first use (spm_library_api.h says why it is a library of its own).
const RuntimeLibrary& spm_library() {
#ifdef PEREGRINE_SPM_LIBRARY_DIR
  const std::string build_dir = PEREGRINE_SPM_LIBRARY_DIR;
#else
  const std::string build_dir;
#endif
  static const RuntimeLibrary lib =
      load_runtime_library("libperegrine_spm.so", "PEREGRINE_SPM_LIBRARY", build_dir, PEREGRINE_SPM_LIBRARY_SYMBOL,
                           "SentencePiece library", "install libsentencepiece-dev (scripts/setup.sh) and rebuild, or set PEREGRINE_SPM_LIBRARY");
  return lib;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const SpmLibraryApi& api, void* processor) : api_(api), sp_(processor) {
    const auto pieces = api_.encode_as_pieces(sp_, "a");
    dummy_prefix_ = !pieces.empty() && pieces.front().rfind(kSpmSpace, 0) == 0;
  }
  ~SentencePieceTokenizer() override { api_.release(sp_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  using Tokenizer::encode;
  // libsentencepiece matches its user-defined pieces itself and never control pieces in text:
  // `parse` does not apply.
  std::vector<std::int32_t> encode(std::string_view text, bool add_bos, ParseSpecial /*parse*/) const override {
    const std::vector<int> ids = api_.encode(sp_, text);
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + 1);
    if (add_bos && bos_id() >= 0) out.push_back(bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  std::string decode_token(std::int32_t prev, std::int32_t id) const override {
    if (id < 0 || id >= vocab_size()) return "";
    // User-defined pieces decode like normal ones here, as SentencePiece's decoder does.
    constexpr TokenType kTypes[] = {TokenType::kNormal, TokenType::kControl, TokenType::kUnknown, TokenType::kByte};
    const TokenType type = kTypes[api_.piece_type(sp_, id)];
    return spm_decode_piece(api_.id_to_piece(sp_, id), type, dummy_prefix_ && spm_at_text_start(prev, bos_id()));
  }

  std::string piece(std::int32_t id) const override {
    return id >= 0 && id < vocab_size() ? api_.id_to_piece(sp_, id) : "";
  }
  std::int32_t vocab_size() const override { return api_.piece_size(sp_); }
  std::int32_t bos_id() const override { return api_.bos_id(sp_); }
  std::int32_t eos_id() const override { return api_.eos_id(sp_); }
  std::string kind() const override { return "sentencepiece"; }
  bool add_bos_default() const override { return bos_id() >= 0; }

 private:
  const SpmLibraryApi& api_;
  void* sp_;  // the library's SentencePieceProcessor
  bool dummy_prefix_ = true;
};

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_sentencepiece_model(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return not_found(path + ": no such SentencePiece model file");
  const RuntimeLibrary& lib = spm_library();
  if (lib.api == nullptr) return unavailable(path + ": " + lib.why);
  const auto& api = *static_cast<const SpmLibraryApi*>(lib.api);
  std::string error;
  void* sp = api.load(path, &error);
  if (sp == nullptr) return corrupt_file(path + ": not a valid SentencePiece model (" + error + ")");
  auto tok = std::make_unique<SentencePieceTokenizer>(api, sp);
  if (tok->vocab_size() <= 0) return corrupt_file(path + ": SentencePiece model has no pieces");
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace peregrine
