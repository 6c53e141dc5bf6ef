// Renders a parsed template: executes its statements and evaluates its expressions with
// Jinja2's semantics (scopes: each for-loop iteration is a fresh scope over the enclosing ones,
// `if` is not a scope; `loop.*` variables; default Undefined).
// Untrusted templates are bounded: output size, loop iterations, value nesting.
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"
#include "tokenizer/jinja/ast.h"

namespace peregrine::jinja {

struct RenderLimits {
  std::size_t max_output_bytes = std::size_t{64} << 20;
  std::int64_t max_loop_iterations = 1'000'000;  // over the whole render
};

/// The text of `body` with `globals` as the template's variables. Errors: kInvalidArgument
/// "chat template line L: <message>" for raise_exception, runtime type errors, undefined
/// values used where Jinja2 fails, and exceeded limits.
Expected<std::string> render(const Body& body, std::vector<std::pair<std::string, Value>> globals,
                             const RenderLimits& limits = {});

}  // namespace peregrine::jinja
