#include "formats/tensor_data_writer.h"

namespace peregrine {

Expected<std::uint64_t> dtype_row_bytes_of(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape) {
  const std::int64_t n = shape.empty() ? 0 : shape.back();
  if (n < 1) return std::uint64_t{0};  // TensorDataWriter::add rejects the shape
  const auto row_bytes = dtype_row_bytes(dtype, static_cast<std::uint64_t>(n));
  if (!row_bytes) {
    return invalid_argument("tensor '" + name + "': rows of " + std::to_string(n) +
                            " values are not a multiple of the " + std::string(dtype_name(dtype)) + " block size");
  }
  return static_cast<std::uint64_t>(*row_bytes);
}

Status TensorDataWriter::add(const std::string& name, std::vector<std::int64_t> shape, std::uint64_t row_bytes) {
  if (file_) return invalid_argument("tensor '" + name + "' declared after the header was written");
  if (name.empty()) return invalid_argument("a tensor name is empty");
  if (shape.empty() || shape.size() > 4) {
    return invalid_argument("tensor '" + name + "' has " + std::to_string(shape.size()) + " dims (1 to 4 allowed)");
  }
  std::uint64_t numel = 1;
  for (std::int64_t d : shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (d < 1 || numel > (std::uint64_t{1} << 42) / u) {
      return invalid_argument("tensor '" + name + "' has a dim " + std::to_string(d) + " (< 1, or > 2^42 values in all)");
    }
    numel *= u;
  }
  if (!names_.insert(name).second) return invalid_argument("tensor '" + name + "' is declared twice");
  const std::uint64_t n_rows = numel / static_cast<std::uint64_t>(shape.back());
  TensorEntry e{name, std::move(shape), end_, row_bytes * n_rows};
  end_ = aligned(e.offset + e.nbytes);
  tensors_.push_back(std::move(e));
  return Status::ok();
}

Status TensorDataWriter::start(const std::string& path, std::span<const std::uint8_t> header) {
  if (file_) return invalid_argument(path + ": the header was already written");
  PEREGRINE_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(path));
  file_.emplace(std::move(f));
  return file_->write(header);
}

Status TensorDataWriter::write(std::span<const std::uint8_t> bytes) {
  if (!file_) return invalid_argument("tensor data written before the header");
  if (current_ >= tensors_.size() || bytes.size() > tensors_[current_].nbytes - current_done_) {
    return invalid_argument(file_->path() + ": more tensor bytes written than declared" +
                            (current_ < tensors_.size() ? " for '" + tensors_[current_].name + "'" : ""));
  }
  PEREGRINE_RETURN_IF_ERROR(file_->write(bytes));
  current_done_ += bytes.size();
  if (current_done_ < tensors_[current_].nbytes) return Status::ok();
  const TensorEntry& t = tensors_[current_];
  PEREGRINE_RETURN_IF_ERROR(file_->write_zeros(static_cast<std::size_t>(aligned(t.offset + t.nbytes) - t.offset - t.nbytes)));
  ++current_;
  current_done_ = 0;
  return Status::ok();
}

Status TensorDataWriter::finish() {
  if (!file_) return invalid_argument("finish before the header was written");
  if (current_ < tensors_.size()) {
    return invalid_argument(file_->path() + ": tensor '" + tensors_[current_].name + "' got " +
                            std::to_string(current_done_) + " of its " +
                            std::to_string(tensors_[current_].nbytes) + " bytes");
  }
  return file_->close();
}

}  // namespace peregrine
