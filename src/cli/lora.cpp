// peregrine lora merge: adds LoRA adapters (PEFT folders or llama.cpp LoRA GGUFs,
// model/lora_adapter.h) into a model's weights (quant/lora_merge.h) and writes the merged model
// as F32 GGUF or a Hugging Face folder, ready for `peregrine quantize`.
// peregrine lora synth: writes a random adapter for a base (model/synth_lora.h) as a PEFT folder.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "common.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/model/synth_lora.h"
#include "peregrine/quant/float_model.h"
#include "peregrine/quant/lora_merge.h"
#include "lora_options.h"
#include "verbs.h"

namespace peregrine::cli {
namespace {

struct LoraMergeArgs {
  ModelOptions model;
  std::vector<std::string> loras;  // PATH[:SCALE]
  std::string output;
};

// Merges the adapters into the base and writes the result; `notes` gets one line per adapter.
Status merge(const LoraMergeArgs& a, std::vector<std::string>& notes) {
  std::vector<LoraSpec> specs;
  for (const std::string& s : a.loras) {
    PEREGRINE_ASSIGN_OR_RETURN(LoraSpec spec, parse_lora_spec(s));
    specs.push_back(std::move(spec));
  }
  PEREGRINE_ASSIGN_OR_RETURN(const ModelFile base, open_model(a.model));
  std::vector<LoraAdapter> adapters;
  for (const LoraSpec& s : specs) {
    PEREGRINE_ASSIGN_OR_RETURN(LoraAdapter adapter, load_lora_adapter(s.path, base));
    adapters.push_back(std::move(adapter));
  }
  PEREGRINE_ASSIGN_OR_RETURN(FloatModel merged, FloatModel::from(base));
  for (std::size_t i = 0; i < adapters.size(); ++i) {
    PEREGRINE_RETURN_IF_ERROR(merge_lora(merged, adapters[i], specs[i].scale));
    char line[512];
    std::snprintf(line, sizeof line, "merged %s: %zu weights, rank %lld, scale %g x alpha/r %g", adapters[i].path.c_str(),
                  adapters[i].tensors.size(), static_cast<long long>(adapters[i].rank), static_cast<double>(specs[i].scale),
                  static_cast<double>(adapters[i].scale()));
    notes.push_back(line);
  }
  std::string tokenizer = a.model.tokenizer;
  if (tokenizer.empty() && !base.gguf) {
    PEREGRINE_ASSIGN_OR_RETURN(tokenizer, tokenizer_file_of(base));
  }
  if (a.output.ends_with(".gguf")) return save_gguf_model(merged.view(), a.output, tokenizer);
  return save_hf_model(merged.view(), a.output, HfQuantLayout::kGptq, tokenizer);
}

struct LoraSynthArgs {
  ModelOptions model;
  std::string output;
  LoraSynthOptions synth;
  std::vector<std::string> targets = {"q", "k", "v", "o", "gate", "up", "down"};
};

// Writes a random adapter for the base; `note` gets what was written.
Status synth(LoraSynthArgs& a, std::string& note) {
  a.synth.targets.clear();
  for (const std::string& t : a.targets) {
    PEREGRINE_ASSIGN_OR_RETURN(std::string name, lora_target_name(t));
    a.synth.targets.push_back(std::move(name));
  }
  PEREGRINE_ASSIGN_OR_RETURN(const ModelFile base, open_model(a.model));
  PEREGRINE_ASSIGN_OR_RETURN(const LoraAdapter adapter, synth_lora_adapter(base, a.synth));
  const std::string model_path = a.model.model.empty() ? default_model_path() : a.model.model;
  PEREGRINE_RETURN_IF_ERROR(save_peft_adapter(adapter, a.output, std::filesystem::path(model_path).filename().string()));
  std::int64_t params = 0;
  for (const auto& [name, p] : adapter.tensors) params += static_cast<std::int64_t>(p.a.size() + p.b.size());
  char line[512];
  std::snprintf(line, sizeof line, "wrote %s: %zu weights, rank %lld, alpha %g, %lld parameters (F32), seed %u", a.output.c_str(),
                adapter.tensors.size(), static_cast<long long>(adapter.rank), static_cast<double>(adapter.alpha),
                static_cast<long long>(params), a.synth.seed);
  note = line;
  return Status::ok();
}

}  // namespace

Verb add_lora(CLI::App& app) {
  auto a = std::make_shared<LoraMergeArgs>();
  CLI::App* cmd = app.add_subcommand("lora", "LoRA adapters: merge them into a model, make random ones");
  cmd->require_subcommand(1);
  CLI::App* m = cmd->add_subcommand("merge", "Add LoRA adapters (PEFT folders, llama.cpp LoRA GGUFs) into a model's weights");
  add_model_options(*m, a->model);
  m->add_option("--lora", a->loras, "Adapter PATH[:SCALE] (a PEFT folder or a LoRA .gguf; SCALE multiplies alpha/r, default 1); repeatable")
      ->required();
  m->add_option("-o,--output", a->output, "Output: a .gguf file or a folder (safetensors), F32")->required();
  auto s = std::make_shared<LoraSynthArgs>();
  CLI::App* sy = cmd->add_subcommand("synth", "Write a random LoRA adapter (seeded normal A and B, B not zero) for a base, as a PEFT folder");
  add_model_options(*sy, s->model);
  sy->add_option("-o,--output", s->output, "Output folder (adapter_config.json + adapter_model.safetensors, F32)")->required();
  sy->add_option("--rank", s->synth.rank, "Rank r")->capture_default_str();
  sy->add_option("--alpha", s->synth.alpha, "lora_alpha (the scale is alpha / r)")->capture_default_str();
  sy->add_option("--target", s->targets, "Adapted projections: q, k, v, o, gate, up, down (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  sy->add_option("--seed", s->synth.seed, "Seed of the random A and B")->capture_default_str();
  sy->add_option("--stddev", s->synth.stddev, "Standard deviation of every A and B entry")->capture_default_str();
  return {cmd, [a, s, sy] {
            if (sy->parsed()) {
              std::string note;
              if (Status st = synth(*s, note); !st) return report(st);
              std::printf("%s\n", note.c_str());
              return 0;
            }
            std::vector<std::string> notes;
            if (Status st = merge(*a, notes); !st) return report(st);
            for (const std::string& n : notes) std::printf("%s\n", n.c_str());
            std::printf("wrote %s (F32)\n", a->output.c_str());
            return 0;
          }};
}

}  // namespace peregrine::cli
