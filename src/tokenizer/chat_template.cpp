#include "peregrine/tokenizer/chat_template.h"

#include <filesystem>

#include "peregrine/core/json_util.h"
#include "peregrine/core/mapped_file.h"
#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/to_json.h"

namespace peregrine {
namespace {

// ChatML (OpenAI / Qwen / many fine-tunes).
constexpr std::string_view kChatml =
    "{%- for message in messages %}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

// Meta's Llama 2 chat format, as meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json has it:
// [INST] turns, the system prompt in <<SYS>> inside the first one, BOS before each user turn.
constexpr std::string_view kLlama2 =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "{%- set loop_messages = messages[1:] %}\n"
    "{%- set system_message = messages[0]['content'] %}\n"
    "{%- else %}\n"
    "{%- set loop_messages = messages %}\n"
    "{%- set system_message = false %}\n"
    "{%- endif %}\n"
    "{%- for message in loop_messages %}\n"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
    "{%- endif %}\n"
    "{%- if loop.index0 == 0 and system_message != false %}\n"
    "{%- set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}\n"
    "{%- else %}\n"
    "{%- set content = message['content'] %}\n"
    "{%- endif %}\n"
    "{%- if message['role'] == 'user' %}\n"
    "{{- bos_token + '[INST] ' + content.strip() + ' [/INST]' }}\n"
    "{%- elif message['role'] == 'assistant' %}\n"
    "{{- ' ' + content.strip() + ' ' + eos_token }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n";

// Meta's Llama 3 instruct format (meta-llama/Meta-Llama-3-8B-Instruct without tools).
constexpr std::string_view kLlama3 =
    "{{- bos_token }}\n"
    "{%- for message in messages %}\n"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n";

Expected<std::string> read_text(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const auto bytes = file->bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// `chat_template` of a tokenizer_config.json: a string, or a list of {name, template} of which
// "default" is taken. nullopt when there is none.
Expected<std::optional<std::string>> template_from_tokenizer_config(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(const std::string text, read_text(path));
  PEREGRINE_ASSIGN_OR_RETURN(const nlohmann::json j, json_util::parse(text, path));
  const auto none = std::optional<std::string>{};
  if (!j.is_object() || !j.contains("chat_template")) return none;
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return std::optional<std::string>(t.get<std::string>());
  if (!t.is_array()) return corrupt_file(path + ": chat_template is a JSON " + json_util::type_name(t) + ", expected a string or a list");
  for (const auto& entry : t) {
    if (entry.is_object() && entry.contains("name") && entry["name"] == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      return std::optional<std::string>(entry["template"].get<std::string>());
    }
  }
  return none;
}

// The template text a model carries, or nullopt.
Expected<std::optional<std::string>> model_template_source(const ModelFile& model) {
  if (model.gguf && model.gguf->find("tokenizer.chat_template")) {
    PEREGRINE_ASSIGN_OR_RETURN(std::string s, model.gguf->get_string("tokenizer.chat_template"));
    return std::optional<std::string>(std::move(s));
  }
  if (model.format != ModelFormat::kHuggingFace) return std::optional<std::string>{};
  const std::filesystem::path dir(model.path);
  std::error_code ec;
  if (std::filesystem::exists(dir / "chat_template.jinja", ec)) {
    PEREGRINE_ASSIGN_OR_RETURN(std::string s, read_text((dir / "chat_template.jinja").string()));
    return std::optional<std::string>(std::move(s));
  }
  if (!std::filesystem::exists(dir / "tokenizer_config.json", ec)) return std::optional<std::string>{};
  return template_from_tokenizer_config((dir / "tokenizer_config.json").string());
}

}  // namespace

struct ChatTemplate::Program {
  jinja::Body body;
  std::string source;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Program> program) : program_(std::move(program)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  PEREGRINE_ASSIGN_OR_RETURN(jinja::Body body, jinja::parse_template(source));
  return ChatTemplate(std::make_unique<Program>(Program{std::move(body), std::string(source)}));
}

std::string_view ChatTemplate::source() const { return program_->source; }

Expected<std::string_view> ChatTemplate::builtin_source(std::string_view name) {
  if (name == "chatml") return kChatml;
  if (name == "llama-2") return kLlama2;
  if (name == "llama-3") return kLlama3;
  return invalid_argument(std::string("unknown chat template '").append(name) + "' (known: chatml, llama-2, llama-3)");
}

Expected<ChatTemplate> ChatTemplate::builtin(std::string_view name) {
  PEREGRINE_ASSIGN_OR_RETURN(const std::string_view source, builtin_source(name));
  return parse(source);
}

namespace {

// A message as a template sees it: role and content, and an assistant's tool_calls with each
// call's arguments parsed (templates write them with tojson) and reasoning_content, a tool
// message's tool_call_id.
jinja::Value message_value(const ChatMessage& m) {
  std::vector<std::pair<std::string, jinja::Value>> items = {{"role", m.role}, {"content", m.content}};
  if (!m.tool_calls.is_null()) {
    nlohmann::ordered_json calls = m.tool_calls;
    for (auto& call : calls) {
      auto& args = call["function"]["arguments"];
      if (args.is_string()) {
        auto parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
        if (!parsed.is_discarded()) args = std::move(parsed);
      }
    }
    items.emplace_back("tool_calls", jinja::from_json(calls));
  }
  if (!m.tool_call_id.empty()) items.emplace_back("tool_call_id", m.tool_call_id);
  if (!m.reasoning_content.empty()) items.emplace_back("reasoning_content", m.reasoning_content);
  return jinja::make_dict(std::move(items));
}

}  // namespace

Expected<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, const ChatTemplateInputs& inputs) const {
  std::vector<jinja::Value> list;
  for (const ChatMessage& m : messages) list.push_back(message_value(m));
  // The variables transformers' apply_chat_template passes (tools and documents None when absent).
  return jinja::render(program_->body, {{"messages", jinja::make_list(std::move(list))},
                                        {"add_generation_prompt", inputs.add_generation_prompt},
                                        {"bos_token", inputs.bos_token},
                                        {"eos_token", inputs.eos_token},
                                        {"tools", inputs.tools.is_null() ? jinja::Value(jinja::None{}) : jinja::from_json(inputs.tools)},
                                        {"documents", jinja::None{}}});
}

Expected<ChatTemplate> load_chat_template(const ModelFile& model, std::string_view fallback) {
  PEREGRINE_ASSIGN_OR_RETURN(const std::optional<std::string> source, model_template_source(model));
  if (source) return ChatTemplate::parse(*source);
  return ChatTemplate::builtin(fallback);
}

}  // namespace peregrine
