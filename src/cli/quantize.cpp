// peregrine quantize: re-encodes a model's linear layers with one of the quantization methods of
// quant/quantize_model.h and writes the result as GGUF (Q8_0 / Q4_0) or a Hugging Face folder
// (GPTQ / AWQ / compressed safetensors layouts, formats/model_writer.h); with --gguf-type TYPE,
// the GGUF llama.cpp's `llama-quantize IN OUT TYPE` writes (quant/gguf_file_type.h).
#include <chrono>
#include <cstdio>
#include <memory>

#include "common.h"
#include "peregrine/model/spec/architecture.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/quant/quantize_model.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct QuantizeArgs {
  ModelOptions model;
  std::string output;
  std::string method = "rtn";
  std::string rotate;
  std::string fp8_format = "e4m3";
  std::string layout;
  std::string gguf_type;
  bool sym = false, asym = false;
  std::int32_t threads = 2;
  QuantizeOptions o;
  CLI::Option* bits = nullptr;
  CLI::Option* group = nullptr;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// QuantizeOptions from the flags; methods with 8-bit per-channel formats default to them.
Expected<QuantizeOptions> options_of(const QuantizeArgs& a) {
  QuantizeOptions o = a.o;
  auto method = quant_method_from_name(a.method);
  if (!method) return invalid_argument("--method '" + a.method + "' is not one of rtn, gptq, awq, smoothquant, llm-int8, fp8");
  o.method = *method;
  const bool eight_bit = o.method == QuantMethod::kSmoothQuant || o.method == QuantMethod::kLlmInt8 || o.method == QuantMethod::kFp8;
  if (eight_bit && a.bits->count() == 0) o.bits = 8;
  if (eight_bit && a.group->count() == 0) o.group = -1;
  if (a.sym && a.asym) return invalid_argument("--sym and --asym exclude each other");
  o.asymmetric = a.asym;
  if (!a.rotate.empty() && a.rotate != "hadamard") return invalid_argument("--rotate '" + a.rotate + "' is not 'hadamard'");
  o.rotate_hadamard = !a.rotate.empty();
  if (a.fp8_format != "e4m3" && a.fp8_format != "e5m2") return invalid_argument("--fp8-format must be e4m3 or e5m2");
  o.fp8 = a.fp8_format == "e4m3" ? DType::kF8E4M3 : DType::kF8E5M2;
  if (!a.gguf_type.empty()) {
    o.gguf_type = gguf_file_type_from_name(a.gguf_type);
    if (!o.gguf_type) return invalid_argument("--gguf-type '" + a.gguf_type + "' is not one of " + gguf_file_type_names());
    if (!ends_with(a.output, ".gguf")) {
      return invalid_argument("--gguf-type writes a GGUF file: -o must end in .gguf (got '" + a.output + "')");
    }
    if (a.bits->count() > 0 || a.group->count() > 0) {
      return invalid_argument("--gguf-type " + a.gguf_type + " fixes every tensor's format: drop --bits / --group");
    }
  }
  o.gguf_formats = ends_with(a.output, ".gguf") && !o.gguf_type;
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  return o;
}

Expected<HfQuantLayout> layout_of(const QuantizeArgs& a, const QuantizeOptions& o) {
  if (a.layout.empty()) return o.method == QuantMethod::kAwq && o.bits == 4 ? HfQuantLayout::kAwq : HfQuantLayout::kGptq;
  if (a.layout == "gptq") return HfQuantLayout::kGptq;
  if (a.layout == "awq") return HfQuantLayout::kAwq;
  return invalid_argument("--layout '" + a.layout + "' is not one of gptq, awq");
}

Status write(const ModelFile& q, const QuantizeArgs& a, const QuantizeOptions& o, const ModelFile& src) {
  std::string tokenizer = a.model.tokenizer;
  if (tokenizer.empty() && !src.gguf) {
    PEREGRINE_ASSIGN_OR_RETURN(tokenizer, tokenizer_file_of(src));
  }
  if (o.gguf_type) return save_gguf_model(q, a.output, tokenizer, llama_ftype_id(*o.gguf_type));
  if (o.gguf_formats) return save_gguf_model(q, a.output, tokenizer);
  PEREGRINE_ASSIGN_OR_RETURN(auto layout, layout_of(a, o));
  return save_hf_model(q, a.output, layout, tokenizer);
}

// A quantized Hugging Face folder of a family whose checkpoints fuse projections (Phi-3): the
// writer fuses float tensors only, so refuse before the work rather than after it.
Status check_output_family(const ModelFile& src, const QuantizeOptions& o) {
  const Architecture* arch = find_architecture(src.config.arch);
  if (o.gguf_type || o.gguf_formats || !arch || !arch->fused_gate_up) return Status::ok();
  return unsupported(src.path + ": a " + src.config.arch +
                     " Hugging Face folder holds fused Q/K/V and gate/up projections, which are written in F32 / F16 / BF16 "
                     "only; quantize into a .gguf instead");
}

int run(const QuantizeArgs& a) {
  if (Status st = validate_threads(a.threads); !st) return report(st);
  auto o = options_of(a);
  if (!o) return report(o.status());
  ThreadPool pool(a.threads);
  auto src = open_model(a.model, &pool);
  if (!src) return report(src.status());
  if (Status st = check_output_family(*src, *o); !st) return report(st);
  auto tok = calibration_tokenizer(*src, a.model, o->needs_calibration());
  if (!tok) return report(tok.status());
  const auto start = std::chrono::steady_clock::now();
  QuantizeReport rep;
  auto q = quantize_model(*src, tok->get(), *o, pool, &rep, progress_line("quantize"));
  if (!q) return report(q.status());
  if (Status st = write(*q, a, *o, *src); !st) return report(st);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string recipe = a.method + (o->gguf_type ? " " + std::string(gguf_file_type_name(*o->gguf_type)) : "") +
                             (o->smooth ? " + smoothing" : "") + (o->rotate_hadamard ? " + hadamard" : "");
  std::printf("wrote %s: %s, %lld %s quantized, %.2f MB -> %.2f MB%s in %.1f s\n", a.output.c_str(), recipe.c_str(),
              static_cast<long long>(rep.tensors_quantized), o->gguf_type ? "tensors" : "linears",
              static_cast<double>(rep.bytes_before) / 1e6,
              static_cast<double>(rep.bytes_after) / 1e6,
              rep.calib_tokens > 0 ? (", " + std::to_string(rep.calib_tokens) + " calibration tokens").c_str() : "", s);
  return 0;
}

}  // namespace

Verb add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a model's linear layers (RTN, GPTQ, AWQ, SmoothQuant, LLM.int8(), FP8)");
  add_model_options(*cmd, a->model);
  cmd->add_option("-o,--output", a->output, "Output: a .gguf file (rtn 8/4-bit group 32: Q8_0/Q4_0) or a folder (safetensors)")
      ->required();
  cmd->add_option("--gguf-type", a->gguf_type,
                  "rtn into a .gguf as llama-quantize TYPE writes it (no imatrix): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                  "Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, IQ4_NL, IQ4_XS");
  cmd->add_option("--method", a->method, "rtn, gptq, awq, smoothquant, llm-int8, fp8")->capture_default_str();
  a->bits = cmd->add_option("--bits", a->o.bits, "Weight bits: 2, 3, 4, 8 (smoothquant, llm-int8, fp8: 8)")->capture_default_str();
  a->group = cmd->add_option("--group", a->o.group, "Values per group: 32, 64, 128, ...; -1 per-channel; 0 per-tensor (rtn, fp8)")
                 ->capture_default_str();
  cmd->add_flag("--sym", a->sym, "Symmetric absmax scales (default)");
  cmd->add_flag("--asym", a->asym, "Asymmetric scales with zero points");
  cmd->add_option("--calib", a->o.calib_path, "Calibration text (gptq, awq, smoothquant); keep it apart from evaluation text");
  cmd->add_option("--calib-tokens", a->o.calib_tokens, "Calibration tokens")->capture_default_str();
  cmd->add_option("--calib-chunk", a->o.calib_chunk, "Tokens per calibration sequence")->capture_default_str();
  cmd->add_option("--rotate", a->rotate, "hadamard: random Hadamard rotation first (QuaRot)");
  cmd->add_flag("--act-order", a->o.act_order, "gptq: quantize columns by decreasing Hessian diagonal");
  cmd->add_option("--act-bits", a->o.act_bits, "rtn/gptq activations: 16 (f32) or 8 (per-token int8: W4A8, W8A8)")
      ->capture_default_str();
  cmd->add_option("--fp8-format", a->fp8_format, "fp8: e4m3 or e5m2")->capture_default_str();
  cmd->add_option("--alpha", a->o.smooth_alpha, "smoothquant migration strength")->capture_default_str();
  cmd->add_flag("--smooth", a->o.smooth, "gptq with --act-bits 8: SmoothQuant smoothing (--alpha) first (SmoothQuant + GPTQ W8A8)");
  cmd->add_option("--outlier-threshold", a->o.outlier_threshold, "llm-int8 outlier |x|")->capture_default_str();
  cmd->add_option("--damp", a->o.damp_percent, "gptq dampening (fraction of mean diag H)")->capture_default_str();
  cmd->add_option("--seed", a->o.seed, "Rotation seed")->capture_default_str();
  cmd->add_option("--layout", a->layout, "Folder layout of int weights: gptq or awq (default: awq for 4-bit awq, else gptq)");
  cmd->add_option("-t,--threads", a->threads, "Threads")->capture_default_str();
  return {cmd, [a] { return run(*a); }};
}

}  // namespace peregrine::cli
