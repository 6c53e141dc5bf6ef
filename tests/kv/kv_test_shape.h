// A small KV shape for KV cache tests (no model needed: KvCache only reads its KvShape).
#pragma once

#include "peregrine/kv/kv_shape.h"

namespace peregrine::test {

/// 2 layers, 2 KV heads of head_dim 16 (kv_dim 32, so q8_0 is allowed).
inline KvShape kv_test_shape() { return KvShape{2, 2, 16}; }

}  // namespace peregrine::test
