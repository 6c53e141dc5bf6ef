#include "peregrine/quant/float_model.h"

#include "peregrine/quant/dequantize.h"

namespace peregrine {

Expected<FloatModel> FloatModel::from(const ModelFile& m) {
  FloatModel f;
  f.source_ = m;
  for (const auto& [name, t] : m.tensors) {
    const auto rb = t.row_bytes();
    if (!rb || *rb * static_cast<std::size_t>(t.n_rows()) != t.nbytes) {
      return invalid_argument("tensor '" + name + "' " + t.shape_string() + " of " + std::string(dtype_name(t.dtype)) +
                              " does not match its " + std::to_string(t.nbytes) + " bytes");
    }
    auto values = std::make_shared<std::vector<float>>(static_cast<std::size_t>(t.numel()));
    const std::int64_t cols = t.row_length();
    for (std::int64_t r = 0; r < t.n_rows(); ++r) {
      dequantize_row(t, r, std::span<float>(*values).subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols)));
    }
    f.data_[name] = Tensor{t.shape, std::move(values)};
  }
  return f;
}

std::span<float> FloatModel::tensor(const std::string& name) { return *data_.at(name).values; }

std::span<const float> FloatModel::tensor(const std::string& name) const { return *data_.at(name).values; }

const std::vector<std::int64_t>& FloatModel::shape(const std::string& name) const { return data_.at(name).shape; }

void FloatModel::set(const std::string& name, std::vector<std::int64_t> shape, std::vector<float> values) {
  data_[name] = Tensor{std::move(shape), std::make_shared<std::vector<float>>(std::move(values))};
}

void FloatModel::rename(const std::string& from, const std::string& to) {
  Tensor t = std::move(data_.at(from));
  data_.erase(from);
  data_[to] = std::move(t);
}

std::vector<std::string> FloatModel::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : data_) out.push_back(name);
  return out;
}

ModelFile FloatModel::view() const {
  ModelFile m;
  m.format = source_.format;
  m.path = source_.path;
  m.config = source_.config;
  m.gguf = source_.gguf;
  for (const auto& [name, t] : data_) {
    TensorView v;
    v.name = name;
    v.dtype = DType::kF32;
    v.shape = t.shape;
    v.data = t.values->data();
    v.nbytes = t.values->size() * sizeof(float);
    m.tensors[name] = std::move(v);
    m.storage.push_back(t.values);
  }
  return m;
}

}  // namespace peregrine
