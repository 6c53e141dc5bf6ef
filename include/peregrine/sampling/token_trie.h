// The vocabulary as text for constrained decoding: the bytes each token adds to the output, and
// a byte trie over them, built once per tokenizer and shared by every grammar-constrained
// request, so that masking walks each shared prefix once (llama.cpp checks token by token;
// XGrammar and Outlines walk a trie too).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace peregrine {

class Tokenizer;

class TokenTrie {
 public:
  /// A node: its children [child_first, child_first + n_children) in `nodes()`, each reached by
  /// its `byte`, and the tokens whose bytes end here, [token_first, token_first + n_tokens) of
  /// `token_ids()`.
  struct Node {
    std::uint32_t child_first = 0, n_children = 0;
    std::uint32_t token_first = 0, n_tokens = 0;
    std::uint8_t byte = 0;
  };

  /// token_bytes[id]: the bytes token `id` adds. Tokens with no bytes (control tokens: BOS,
  /// EOS, chat markers) are left out of the trie: a grammar never produces them (the matcher
  /// allows the end-of-sequence token on its own rule).
  explicit TokenTrie(std::vector<std::string> token_bytes);

  /// The trie of `tokenizer`'s vocabulary: each token's bytes as decode_token gives them after
  /// an ordinary token (a SentencePiece "▁" is a space).
  static std::shared_ptr<const TokenTrie> of(const Tokenizer& tokenizer);

  std::span<const Node> nodes() const { return nodes_; }
  std::span<const std::int32_t> token_ids() const { return token_ids_; }
  /// The bytes of token `id` ("" for a control token or an id outside the vocabulary).
  const std::string& bytes(std::int32_t id) const;
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(bytes_.size()); }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
  std::vector<std::int32_t> token_ids_;
};

}  // namespace peregrine
