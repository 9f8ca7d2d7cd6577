// qwen2 (Qwen 2 / 2.5): the shared block with NEOX RoPE and Q/K/V biases. qwen3 (Qwen 3 dense): NEOX RoPE, no
// biases, Q and K RMS-normalized per head before RoPE.
#include "model/arch/registry.h"

namespace preface::model {

extern const Architecture kQwen2 = {"qwen2", /*rope_neox=*/true, /*qkv_bias=*/true, /*qk_norm=*/false,
                                    /*fused_projections=*/false, nullptr, standard_block,
                                    standard_memory};
extern const Architecture kQwen3 = {"qwen3", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true,
                                    /*fused_projections=*/false, nullptr, standard_block,
                                    standard_memory};

}  // namespace preface::model
