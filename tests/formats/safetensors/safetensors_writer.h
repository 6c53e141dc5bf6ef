// Test-only safetensors writer (header JSON built by hand, so tests can also break it).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "formats/test_files.h"

namespace peregrine::test {

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", or anything else for negative tests
  std::vector<std::int64_t> shape;
  Bytes data;
};

/// u64 header length + header bytes (padded with spaces to a multiple of 8) + data.
inline Bytes safetensors_from_header(const std::string& header, const Bytes& data) {
  std::string h = header;
  while ((8 + h.size()) % 8 != 0) h += ' ';
  Bytes b(8 + h.size() + data.size());
  const auto n = static_cast<std::uint64_t>(h.size());
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, h.data(), h.size());
  if (!data.empty()) std::memcpy(b.data() + 8 + h.size(), data.data(), data.size());
  return b;
}

/// A valid file holding `tensors` back to back, in the given order.
inline Bytes safetensors_bytes(const std::vector<StTensor>& tensors,
                               const nlohmann::json& metadata = nullptr) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  Bytes data;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  return safetensors_from_header(h.dump(), data);
}

}  // namespace peregrine::test
