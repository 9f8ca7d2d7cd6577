#include "kernels/delta_rule.h"

#include "kernels/dispatch.h"

namespace preface::kernels {

void delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay, float* out,
                float* scratch, size_t d) {
  kernel_table().delta_rule(S, q, k, v, beta, decay, out, scratch, d);
}

void scalar::delta_rule(float* S, const float* q, const float* k, const float* v, float beta, float decay,
                        float* out, float* scratch, size_t d) {
  float* kv = scratch;
  for (size_t m = 0; m < d; ++m) kv[m] = 0.0f;
  for (size_t i = 0; i < d; ++i) {
    float* row = S + i * d;
    for (size_t m = 0; m < d; ++m) {
      row[m] = row[m] * decay;
      kv[m] = kv[m] + row[m] * k[i];
    }
  }
  for (size_t m = 0; m < d; ++m) kv[m] = beta * (v[m] - kv[m]);  // the delta
  for (size_t m = 0; m < d; ++m) out[m] = 0.0f;
  for (size_t i = 0; i < d; ++i) {
    float* row = S + i * d;
    for (size_t m = 0; m < d; ++m) {
      row[m] = row[m] + k[i] * kv[m];
      out[m] = out[m] + row[m] * q[i];
    }
  }
}

}  // namespace preface::kernels
