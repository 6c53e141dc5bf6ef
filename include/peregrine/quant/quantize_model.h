// The quantization pipeline behind `peregrine quantize`: a model in, the same model with its
// decoder-layer linears (attn_q/k/v/output, ffn_gate/up/down) re-encoded by one method out.
// Embedding and LM head are kept in F16 and norms in F32 by every method (as GPTQ and AWQ do),
// so methods differ only in the linears.
//
// Methods and the papers they follow (seed 004 for the formulas, seed 002 for the tables):
//   rtn          round-to-nearest, absmax (--sym) or zero-point (--asym); per-tensor (group 0),
//                per-channel (group -1) or group-wise
//   gptq         Frantar et al. 2023 (quant/gptq.h), sequential over layers
//   awq          Lin et al. 2024 (quant/awq.h + quant/scale_folding.h), then RTN
//   smoothquant  Xiao et al. 2023 (quant/smoothquant.h): smoothing folded into the previous
//                operations, then W8A8: int8 per-channel weights, per-token dynamic int8
//                activations; `smooth` applies the same smoothing before gptq W8A8
//                (SmoothQuant + GPTQ, llm-compressor's W8A8 recipe)
//   llm-int8     Dettmers et al. 2022: int8 per-channel weights, per-token int8 activations
//                except the outlier features (|x| >= 6) computed in f32
//   fp8          E4M3 (or E5M2) weights with per-channel (group -1) or per-tensor (group 0) scales
// --rotate hadamard (QuaRot / SpinQuant, quant/rotate_model.h) can precede any method.
// rtn with a GGUF file type (QuantizeOptions::gguf_type, quant/gguf_file_type.h) instead encodes
// every matrix as llama-quantize does for that type without an importance matrix (same ggml type
// and same bytes per tensor): the mix's choices, ggml's encoders (quant/quantize_rtn.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/quant/gguf_file_type.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

enum class QuantMethod : std::uint8_t { kRtn, kGptq, kAwq, kSmoothQuant, kLlmInt8, kFp8 };

/// "rtn", "gptq", "awq", "smoothquant", "llm-int8", "fp8".
std::string_view quant_method_name(QuantMethod m);
/// Inverse of quant_method_name; nullopt if unknown.
std::optional<QuantMethod> quant_method_from_name(std::string_view name);

struct QuantizeOptions {
  QuantMethod method = QuantMethod::kRtn;
  int bits = 4;                     // rtn/gptq/awq: 2, 3, 4, 8 (smoothquant, llm-int8: 8)
  std::int64_t group = 128;         // values per group; -1 per-channel; 0 per-tensor (rtn, fp8)
  bool asymmetric = false;          // zero points (rtn, gptq, awq)
  int act_bits = 16;                // rtn/gptq: 8 quantizes activations per token (W4A8, W8A8)
  bool act_order = false;           // gptq: columns by decreasing Hessian diagonal
  bool rotate_hadamard = false;     // random Hadamard rotation first (QuaRot)
  DType fp8 = DType::kF8E4M3;       // fp8: kF8E4M3 or kF8E5M2
  float smooth_alpha = 0.5f;        // smoothquant migration strength α
  bool smooth = false;              // gptq with act_bits 8: SmoothQuant smoothing first
                                    // (the smoothquant method always smooths)
  float outlier_threshold = 6.0f;   // llm-int8
  double damp_percent = 0.01;       // gptq dampening
  std::uint64_t seed = 0;           // rotation signs
  std::string calib_path;           // calibration text (gptq, awq, smoothquant)
  std::int64_t calib_tokens = 4096;
  std::int64_t calib_chunk = 256;   // tokens per calibration forward
  bool gguf_formats = false;        // rtn: encode the linears as gguf_dtype_for(*this) (Q8_0 /
                                    // Q4_0, F16 for rows that are not whole 32-value blocks)
  std::optional<GgufFileType> gguf_type;  // rtn: every matrix (embedding and LM head included)
                                    // as llama-quantize's TYPE (gguf_tensor_dtype); bits, group,
                                    // asym and act-bits do not apply
  /// Validates the combination. Errors: kInvalidArgument naming the option.
  Status validate() const;
  /// Whether the method reads calibration data.
  bool needs_calibration() const;
};

/// What quantize_model did, for the CLI's summary.
struct QuantizeReport {
  std::int64_t tensors_quantized = 0;
  std::size_t bytes_before = 0, bytes_after = 0;  // all tensors
  std::int64_t calib_tokens = 0;
  std::vector<std::string> notes;  // per-layer details (AWQ α, GPTQ loss, fallbacks)
};

/// Progress of a long step: `done` of `total` units of `what`.
using QuantizeProgress = std::function<void(std::int64_t done, std::int64_t total, const std::string& what)>;

/// Quantizes `src` (any dtype; decoded to f32 first) with `o`. `tok` tokenizes the calibration
/// text (needed when o.needs_calibration()). The result owns its tensors: the linears as kInt
/// (rtn/gptq/awq/smoothquant/llm-int8, QuantParams from o) or F8 (fp8), token_embd/output F16,
/// norms F32; with o.rotate_hadamard the config has ffn_down_hadamard set. With o.gguf_type
/// every matrix gets gguf_tensor_dtype's type, encoded by quantize_rtn row by row (the rows are
/// split across `pool`), byte-identical with llama-quantize's tensors for an F32 source (an
/// F16 / BF16 source is widened exactly first, as llama-quantize does).
/// Errors: o.validate()'s, kUnsupported (a tensor of `src` is already quantized: not
/// F32/F16/BF16), kInvalidArgument (calibration needed but no text/tokenizer),
/// calibration and algorithm errors (e.g. GPTQ's kInvalidArgument for a Hessian that stays indefinite),
/// gguf_tensor_dtype's kUnsupported (rows that are not whole blocks of a 32-value type).
Expected<ModelFile> quantize_model(const ModelFile& src, const Tokenizer* tok, const QuantizeOptions& o,
                                   ThreadPool& pool, QuantizeReport* report = nullptr,
                                   const QuantizeProgress& progress = {});

/// The GGUF block format of a request: rtn with 8 or 4 bits,
/// group 32, symmetric, f32 activations → kQ8_0 / kQ4_0 (llama.cpp's formats; Q4_0's scale is
/// max / -8, see quant/quantize_rtn.h); nullopt when `o` has no GGUF equivalent.
std::optional<DType> gguf_dtype_for(const QuantizeOptions& o);

}  // namespace peregrine
