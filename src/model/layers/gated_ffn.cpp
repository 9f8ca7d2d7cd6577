#include "model/layers/gated_ffn.h"

#include <string>

#include "kernels/ops.h"
#include "model/layers/weights.h"

namespace preface::model {

GatedFfn::GatedFfn(const gguf::File& file, const Config& c, int32_t il, const FfnOptions& o)
    : activation_(o.activation) {
  const int64_t dim = c.dim, ffn = c.ffn_of(il);
  const std::string p = "blk." + std::to_string(il) + ".";
  norm_ = load_vector(file, p + o.norm + ".weight", dim);
  if (o.fused_gate_up) {
    const kernels::Matrix gate_up = load_matrix(file, p + "ffn_up.weight", 2 * ffn, dim);
    w_gate_ = row_view(gate_up, 0, ffn);
    w_up_ = row_view(gate_up, ffn, ffn);
  } else {
    w_gate_ = load_matrix(file, p + "ffn_gate.weight", ffn, dim);
    w_up_ = load_matrix(file, p + "ffn_up.weight", ffn, dim);
  }
  w_down_ = load_matrix(file, p + "ffn_down.weight", dim, ffn);
  if (o.post_norm) post_norm_ = load_vector(file, p + "post_ffw_norm.weight", dim);
}

void GatedFfn::collect_matrices(std::vector<kernels::Matrix*>& out) {
  for (kernels::Matrix* w : {&w_gate_, &w_up_, &w_down_}) out.push_back(w);
}

void GatedFfn::forward(const Step& s, int32_t) const {
  Activations& a = s.act;
  const int64_t nt = static_cast<int64_t>(s.batch.size());
  const size_t ffn = static_cast<size_t>(w_gate_.n_rows);
  norm_input(s, norm_);
  kernels::matmul_multi(s.pool, {&w_gate_, &w_up_}, a.xb.data(), nt, {a.gate.data(), a.up.data()},
                        a.quant_scratch);
  for_tokens(s.pool, nt, [&](size_t t0, size_t t1) {
    if (activation_ == FfnActivation::GeGLU) {
      kernels::geglu(a.gate.data() + t0 * ffn, a.up.data() + t0 * ffn, (t1 - t0) * ffn);
    } else {
      kernels::swiglu(a.gate.data() + t0 * ffn, a.up.data() + t0 * ffn, (t1 - t0) * ffn);
    }
  });
  kernels::matmul(s.pool, w_down_, a.gate.data(), nt, a.ffn_out.data(), a.quant_scratch);
  add_output(s, a.ffn_out.data(), post_norm_);
}

}  // namespace preface::model
