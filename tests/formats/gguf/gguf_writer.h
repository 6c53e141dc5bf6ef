// Test-only GGUF v3 writer: string/u32/i32/f32 metadata, F32 tensors and raw tensors of any ggml
// type id (enough for tiny models and for negative tests that need a well-formed file with one
// thing wrong).
#pragma once

#include <string>
#include <vector>

#include "formats/test_files.h"

namespace peregrine::test {

class GgufWriter {
 public:
  void kv_string(const std::string& key, const std::string& v) {
    put_string(kv_, key);
    append(kv_, std::uint32_t{8});
    put_string(kv_, v);
    ++n_kv_;
  }
  void kv_u32(const std::string& key, std::uint32_t v) {
    put_string(kv_, key);
    append(kv_, std::uint32_t{4});
    append(kv_, v);
    ++n_kv_;
  }
  void kv_i32(const std::string& key, std::int32_t v) {
    put_string(kv_, key);
    append(kv_, std::uint32_t{5});
    append(kv_, v);
    ++n_kv_;
  }
  void kv_f32(const std::string& key, float v) {
    put_string(kv_, key);
    append(kv_, std::uint32_t{6});
    append(kv_, v);
    ++n_kv_;
  }
  /// `shape` outermost-first (PyTorch order); written innermost-first as GGUF wants.
  void tensor_f32(const std::string& name, const std::vector<std::int64_t>& shape,
                  const std::vector<float>& values) {
    tensor_raw(name, shape, 0, f32_bytes(values));  // GGML_TYPE_F32
  }
  /// A tensor of ggml type id `ggml_type` (ggml.h enum ggml_type) holding `data` as given:
  /// nothing checks that the bytes fit the shape, so negative tests can write any mismatch.
  void tensor_raw(const std::string& name, const std::vector<std::int64_t>& shape, std::uint32_t ggml_type,
                  const Bytes& data) {
    while (data_.size() % 32 != 0) data_.push_back(0);
    put_string(info_, name);
    append(info_, static_cast<std::uint32_t>(shape.size()));
    for (auto it = shape.rbegin(); it != shape.rend(); ++it) append(info_, static_cast<std::uint64_t>(*it));
    append(info_, ggml_type);
    append(info_, static_cast<std::uint64_t>(data_.size()));
    data_.insert(data_.end(), data.begin(), data.end());
    ++n_tensors_;
  }

  Bytes bytes(std::uint32_t version = 3) const {
    Bytes b;
    append(b, std::uint32_t{0x46554747});  // "GGUF"
    append(b, version);
    append(b, n_tensors_);
    append(b, n_kv_);
    b.insert(b.end(), kv_.begin(), kv_.end());
    b.insert(b.end(), info_.begin(), info_.end());
    while (b.size() % 32 != 0) b.push_back(0);
    b.insert(b.end(), data_.begin(), data_.end());
    return b;
  }

 private:
  static void put_string(Bytes& b, const std::string& s) {
    append(b, static_cast<std::uint64_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  }
  Bytes kv_, info_, data_;
  std::uint64_t n_kv_ = 0, n_tensors_ = 0;
};

}  // namespace peregrine::test
