// A small model shape for KV cache tests (no weights needed: KvCache only reads the config).
#pragma once

#include "peregrine/formats/model_file.h"

namespace peregrine::test {

/// 2 layers, 2 KV heads of head_dim 16 (kv_dim 32, so q8_0 is allowed).
inline ModelConfig kv_test_config() {
  ModelConfig c;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_dim = 128;
  c.vocab_size = 32;
  c.max_seq_len = 1024;
  return c;
}

}  // namespace peregrine::test
