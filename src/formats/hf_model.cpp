#include "peregrine/formats/hf_model.h"

namespace peregrine {

// Placeholder until the safetensors reader lands (being written now).
Expected<ModelFile> load_hf_model(const std::string& dir) {
  return unsupported(dir + ": Hugging Face folders are not supported yet");
}

}  // namespace peregrine
