// One token of the gated delta rule (Gated DeltaNet, model/layers/delta_net.h) over one V head's state.
//
// S: [d][d] f32, S[i][m] (i over the key's values, m over the value's); q, k, v: [d]; out: [d]; scratch: [d].
//   S = decay S
//   kv[m] = sum_i S[i][m] k[i]              (the state's prediction of v)
//   delta[m] = beta (v[m] - kv[m])
//   S[i][m] = S[i][m] + k[i] delta[m]
//   out[m] = sum_i S[i][m] q[i]
// Rounding, fixed: each sum runs over i from 0 in order, starting from 0, each term a rounded product added with
// a rounded add (no FMA: the build uses -ffp-contract=off); S is rounded to f32 after the decay and after the
// update. Every path computes lanes over m with exactly these operations, so every path gives the scalar bits
// (tests/kernels/delta_rule_test.cpp). Two passes over S: decay + prediction, then update + output.
#pragma once
#include <cstddef>

namespace preface::kernels {

// Dispatched (kernels/dispatch.h): the widest path the CPU has.
void delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
                float* scratch, size_t d);

namespace scalar {
void delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
                float* scratch, size_t d);
}
namespace avx2 {
void delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
                float* scratch, size_t d);
}
namespace avx512 {
void delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
                float* scratch, size_t d);
}

}  // namespace preface::kernels
