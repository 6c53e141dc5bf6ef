#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  std::int32_t prev = -1;
  for (auto id : ids) {
    out += decode_token(prev, id);
    prev = id;
  }
  return out;
}

}  // namespace peregrine
