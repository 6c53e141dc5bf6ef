#include "peregrine/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "peregrine/tokenizer/vocab.h"
#include "spm_piece.h"

namespace peregrine {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : sp_(std::move(sp)) {
    const auto pieces = sp_->EncodeAsPieces("a");
    dummy_prefix_ = !pieces.empty() && pieces.front().rfind(kSpmSpace, 0) == 0;
  }

  std::vector<std::int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int> ids;
    (void)sp_->Encode(text, &ids);  // fails only for an unloaded model
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + 1);
    if (add_bos && bos_id() >= 0) out.push_back(bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  std::string decode_token(std::int32_t prev, std::int32_t id) const override {
    if (id < 0 || id >= vocab_size()) return "";
    // User-defined pieces decode like normal ones here, as SentencePiece's decoder does.
    const TokenType type = sp_->IsControl(id) ? TokenType::kControl
                           : sp_->IsUnknown(id) ? TokenType::kUnknown
                           : sp_->IsByte(id)    ? TokenType::kByte
                                                : TokenType::kNormal;
    return spm_decode_piece(sp_->IdToPiece(id), type, dummy_prefix_ && spm_at_text_start(prev, bos_id()));
  }

  std::string piece(std::int32_t id) const override {
    return id >= 0 && id < vocab_size() ? sp_->IdToPiece(id) : "";
  }
  std::int32_t vocab_size() const override { return sp_->GetPieceSize(); }
  std::int32_t bos_id() const override { return sp_->bos_id(); }
  std::int32_t eos_id() const override { return sp_->eos_id(); }
  std::string kind() const override { return "sentencepiece"; }
  bool add_bos_default() const override { return bos_id() >= 0; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  bool dummy_prefix_ = true;
};

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_sentencepiece_model(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return not_found(path + ": no such SentencePiece model file");
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto st = sp->Load(path);
  if (!st.ok()) return corrupt_file(path + ": not a valid SentencePiece model (" + st.ToString() + ")");
  if (sp->GetPieceSize() <= 0) return corrupt_file(path + ": SentencePiece model has no pieces");
  return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(std::move(sp)));
}

}  // namespace peregrine
