// libFuzzer target: GgufFile::parse on arbitrary bytes. On success every tensor view is read
// end to end and every row decoded (dequantize_row: the Q4_0..Q6_K / IQ4 block decoders on
// hostile bytes), every metadata value goes through the typed getters, and the file goes
// through the llama config + tensor validation of gguf_to_model_file.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_util.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/formats/gguf/gguf_model.h"
#include "peregrine/quant/dequantize.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace peregrine;
  auto g = GgufFile::parse(std::span<const std::uint8_t>(data, size), "fuzz.gguf");
  if (!g) {
    fuzz::check_error(g.status());
    return 0;
  }
  volatile std::uint64_t sink = 0;
  std::vector<float> values;
  for (const TensorView& t : g->tensors()) {
    const auto row = dtype_row_bytes(t.dtype, static_cast<std::uint64_t>(t.row_length()));
    if (!row || *row * static_cast<std::uint64_t>(t.n_rows()) != t.nbytes) {
      fuzz::fail("GGUF tensor nbytes does not match its shape and dtype");
    }
    sink = sink + fuzz::touch(t, data, size);
    values.resize(static_cast<std::size_t>(t.row_length()));
    for (std::int64_t r = 0; r < t.n_rows(); ++r) {  // the block decoders on hostile bytes
      dequantize_row(t, r, values);
      sink = sink + static_cast<std::uint64_t>(values[0] == values[0]);
    }
  }
  for (const auto& [key, value] : g->metadata()) {
    (void)value;
    auto i = g->get_int(key);
    if (!i) fuzz::check_error(i.status());
    auto f = g->get_float(key);
    if (!f) fuzz::check_error(f.status());
    auto s = g->get_string(key);
    if (s) sink = sink + s->size(); else fuzz::check_error(s.status());
    auto sa = g->get_string_array(key);
    if (sa) sink = sink + sa->size(); else fuzz::check_error(sa.status());
    auto na = g->get_number_array(key);
    if (na) sink = sink + na->size(); else fuzz::check_error(na.status());
  }
  auto m = gguf_to_model_file(*g, "fuzz.gguf");
  if (!m) {
    fuzz::check_error(m.status());
    return 0;
  }
  if (!m->config.validate().is_ok()) fuzz::fail("loaded model has an invalid config");
  for (const auto& [name, t] : m->tensors) sink = sink + fuzz::touch(t, data, size);
  return 0;
}
