// phi3 (Phi-3, Phi-3.5, Phi-4-mini): the shared block over fused attn_qkv and gate+up ffn_up matrices, NEOX RoPE
// (LongRoPE factors are read by config.cpp). phi3.attention.sliding_window is not applied, as llama.cpp has not
// since mid-2025 (README).
#include "model/arch/registry.h"

namespace preface::model {

extern const Architecture kPhi3 = {"phi3", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/false,
                                   /*fused_projections=*/true, nullptr, standard_block,
                                    standard_memory};

}  // namespace preface::model
