// Chat templates: the Jinja2 templates models ship (GGUF `tokenizer.chat_template`, Hugging
// Face tokenizer_config.json `chat_template`) rendered by our own interpreter of the Jinja
// subset chat templates use, with the settings of transformers' apply_chat_template
// (trim_blocks and lstrip_blocks on), so a conversation renders exactly as Jinja2 would.
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// One turn of a conversation.
struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;
  /// An assistant message's calls, OpenAI's [{"id", "type": "function", "function": {"name",
  /// "arguments": JSON text}}] (null: none); a template sees each arguments text parsed.
  nlohmann::ordered_json tool_calls;
  std::string tool_call_id;  // a "tool" message: the call it answers
  std::string reasoning_content;  // an assistant's reasoning (templates that replay it: Qwen3's <think>)
};

/// Variables a template sees besides `messages`.
struct ChatTemplateInputs {
  bool add_generation_prompt = true;
  std::string bos_token;  // the tokenizer's BOS / EOS text ("<s>", "</s>", ...)
  std::string eos_token;
  /// OpenAI's `tools` ([{"type": "function", "function": {"name", "description", "parameters"}}]),
  /// or null: the template's `tools` is then None.
  nlohmann::ordered_json tools = nullptr;
};

class ChatTemplate {
 public:
  /// Parses Jinja source. Errors: kInvalidArgument ("chat template line L: ...") for syntax
  /// this interpreter does not know or that Jinja2 would reject.
  static Expected<ChatTemplate> parse(std::string_view source);
  /// A built-in template by name: "chatml", "llama-2", "llama-3".
  /// Errors: kInvalidArgument naming the known names.
  static Expected<ChatTemplate> builtin(std::string_view name);
  /// The Jinja source of a built-in template. Errors: those of builtin.
  static Expected<std::string_view> builtin_source(std::string_view name);

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  /// The prompt text for `messages`. Errors: kInvalidArgument for the template's
  /// raise_exception(message) (e.g. roles that do not alternate) and for runtime type errors
  /// (the message says which).
  Expected<std::string> render(std::span<const ChatMessage> messages, const ChatTemplateInputs& inputs) const;

  /// The Jinja source (to tell which tool-call format the model was trained on).
  std::string_view source() const;

 private:
  struct Program;
  explicit ChatTemplate(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

/// The model's own template: GGUF metadata `tokenizer.chat_template`, or `chat_template` of
/// tokenizer_config.json in a Hugging Face model folder (a string, or the "default" entry of a
/// list of {name, template}; a chat_template.jinja file there takes precedence); else
/// builtin(fallback). Errors: those of parse and builtin; kIoError / kCorruptFile for an
/// unreadable or malformed tokenizer_config.json.
Expected<ChatTemplate> load_chat_template(const ModelFile& model, std::string_view fallback = "chatml");

}  // namespace peregrine
