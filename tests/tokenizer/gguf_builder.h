// A minimal in-memory GGUF v3 writer for tokenizer tests (metadata only, no tensors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace peregrine::test {

class GgufBuilder {
 public:
  GgufBuilder& str(const std::string& key, const std::string& v) {
    begin(key, 8);
    put_str(v);
    return *this;
  }
  GgufBuilder& u32(const std::string& key, std::uint32_t v) {
    begin(key, 4);
    put(v);
    return *this;
  }
  GgufBuilder& boolean(const std::string& key, bool v) {
    begin(key, 7);
    put(static_cast<std::uint8_t>(v));
    return *this;
  }
  GgufBuilder& strs(const std::string& key, const std::vector<std::string>& v) {
    begin(key, 9);
    put(std::uint32_t{8});
    put(static_cast<std::uint64_t>(v.size()));
    for (const auto& s : v) put_str(s);
    return *this;
  }
  GgufBuilder& f32s(const std::string& key, const std::vector<float>& v) {
    begin(key, 9);
    put(std::uint32_t{6});
    put(static_cast<std::uint64_t>(v.size()));
    for (float f : v) put(f);
    return *this;
  }
  GgufBuilder& i32s(const std::string& key, const std::vector<std::int32_t>& v) {
    begin(key, 9);
    put(std::uint32_t{5});
    put(static_cast<std::uint64_t>(v.size()));
    for (auto i : v) put(i);
    return *this;
  }

  /// The file image: header (magic, version 3, 0 tensors, n_kv) + the key/values.
  std::vector<std::uint8_t> bytes() const {
    std::string out = "GGUF";
    auto put_to = [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    put_to(std::uint32_t{3});
    put_to(std::uint64_t{0});
    put_to(n_kv_);
    out += body_;
    return {out.begin(), out.end()};
  }

 private:
  template <typename T>
  void put(const T& v) { body_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void put_str(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    body_ += s;
  }
  void begin(const std::string& key, std::uint32_t type) {
    put_str(key);
    put(type);
    ++n_kv_;
  }
  std::string body_;
  std::uint64_t n_kv_ = 0;
};

}  // namespace peregrine::test
