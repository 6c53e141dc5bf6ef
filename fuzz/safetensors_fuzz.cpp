// libFuzzer target: SafetensorsFile::parse on arbitrary bytes. On success every tensor view is
// read end to end and checked against its shape, and the tensors must tile the data buffer.
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "peregrine/formats/safetensors/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace peregrine;
  auto f = SafetensorsFile::parse(std::span<const std::uint8_t>(data, size), "fuzz.safetensors");
  if (!f) {
    fuzz::check_error(f.status());
    return 0;
  }
  volatile std::uint64_t sink = 0;
  std::uint64_t total = 0;
  for (const SafetensorsTensor& t : f->tensors()) {
    if (static_cast<std::uint64_t>(t.numel()) * safetensors_dtype_bytes(t.dtype) != t.nbytes) {
      fuzz::fail("safetensors nbytes does not match its shape and dtype");
    }
    if (f->find(t.name) != &t) fuzz::fail("find() does not return the tensor");
    total += t.nbytes;
    TensorView bytes;  // the tensor's extent, for the bounds check
    bytes.shape = t.shape;
    bytes.data = t.data;
    bytes.nbytes = t.nbytes;
    sink = sink + fuzz::touch(bytes, data, size);
  }
  for (const auto& [k, v] : f->metadata()) sink = sink + k.size() + v.size();
  std::uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= static_cast<std::uint64_t>(data[i]) << (8 * i);
  if (total != size - 8 - header) fuzz::fail("tensors do not cover the data buffer exactly");
  return 0;
}
