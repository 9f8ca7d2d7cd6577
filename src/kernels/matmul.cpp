#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/dot.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "util/error.h"
#include "util/fp16.h"

namespace preface::kernels {

namespace {

// Weight rows per parallel_for grain unit: a thread's chunk is a multiple of this (and of every tile height).
constexpr int64_t kRowGrain = 16;
// Up to this many activation rows are quantized on the calling thread: waking the pool costs more.
constexpr int64_t kSerialQuantizeTokens = 4;

// Several matrices' gemm jobs as one row range: job i owns rows [row_offset[i], row_offset[i] + args[i].n_rows),
// and row_offset[i + 1] is that end rounded up to kRowGrain, so that every job's rows start on a multiple of the
// grain (whole row groups, repack.h, and tiles begin at a job's own row 0).
struct MultiGemm {
  GemmFn gemm[kMaxFused];
  GemmArgs args[kMaxFused];
  int64_t row_offset[kMaxFused + 1];
  size_t n_jobs;

  void run(int64_t begin, int64_t end) const {
    for (size_t i = 0; i < n_jobs; ++i) {
      const int64_t lo = std::max(begin, row_offset[i]), hi = std::min(end, row_offset[i] + args[i].n_rows);
      if (lo < hi) gemm[i](args[i], lo - row_offset[i], hi - row_offset[i]);
    }
  }
};

// Quantizes x: [n_tokens][n_cols] to Q8_0 in scratch, laid out as blocks [n_tokens][n_blocks], then (each from a
// 64-byte aligned offset) f32 of each block's d, [n_tokens][n_blocks], each block's sum of values (int32,
// [n_tokens][n_blocks], GemmArgs::x_sums) and, when `pairs` is not null, the paired layout
// (GemmArgs::x_pairs, [n_tokens][n_cols] int8). Returns the blocks; *scales = the floats, *sums = the sums,
// *pairs = the paired values.
const BlockQ8_0* quantize_activations(ThreadPool& pool, const KernelTable& k, const float* x, int64_t n_tokens,
                                      size_t n_cols, std::vector<uint8_t>& scratch, const float** scales,
                                      const int32_t** sums, const int8_t** pairs) {
  const size_t n_blocks = n_cols / gguf::kQuantBlock;
  const size_t n_all = static_cast<size_t>(n_tokens) * n_blocks;
  const size_t scales_offset = (n_all * sizeof(BlockQ8_0) + 63) / 64 * 64;
  const size_t sums_offset = scales_offset + (n_all * sizeof(float) + 63) / 64 * 64;
  const size_t pairs_offset = sums_offset + (n_all * sizeof(int32_t) + 63) / 64 * 64;
  const size_t bytes = pairs_offset + (pairs != nullptr ? n_all * gguf::kQuantBlock : 0);
  if (scratch.size() < bytes) scratch.resize(bytes);
  auto* xq = reinterpret_cast<BlockQ8_0*>(scratch.data());  // operator new alignment >= alignof(BlockQ8_0)
  auto* xs = reinterpret_cast<float*>(scratch.data() + scales_offset);
  auto* xsum = reinterpret_cast<int32_t*>(scratch.data() + sums_offset);
  auto* xpair = pairs != nullptr ? reinterpret_cast<int8_t*>(scratch.data() + pairs_offset) : nullptr;
  const struct {
    void (*quantize)(const float*, BlockQ8_0*, size_t);
    const float* x;  // [n_tokens][n_cols]
    BlockQ8_0* xq;   // [n_tokens][n_blocks]
    float* xs;       // [n_tokens][n_blocks]
    int32_t* xsum;   // [n_tokens][n_blocks]
    int8_t* xpair;   // [n_tokens][n_blocks * 32], or nullptr
    size_t n_cols, n_blocks;
  } job{k.quantize_row_q8_0, x, xq, xs, xsum, xpair, n_cols, n_blocks};
  const auto* jp = &job;
  const auto run = [jp](int64_t t0, int64_t t1) {
    for (size_t t = static_cast<size_t>(t0); t < static_cast<size_t>(t1); ++t) {
      BlockQ8_0* blocks = jp->xq + t * jp->n_blocks;
      jp->quantize(jp->x + t * jp->n_cols, blocks, jp->n_cols);
      for (size_t b = 0; b < jp->n_blocks; ++b) {
        jp->xs[t * jp->n_blocks + b] = f16_to_f32(blocks[b].d);
        int32_t s = 0;
        for (const int8_t q : blocks[b].qs) s += q;
        jp->xsum[t * jp->n_blocks + b] = s;
      }
      if (jp->xpair == nullptr) continue;
      int8_t* out = jp->xpair + t * jp->n_blocks * gguf::kQuantBlock;
      for (size_t b = 0; b < jp->n_blocks / 4 * 4; b += 2) {  // pairs within whole groups of 4 blocks
        const int8_t* q0 = blocks[b].qs;
        const int8_t* q1 = blocks[b + 1].qs;
        int8_t* o = out + b * gguf::kQuantBlock;
        std::memcpy(o, q0, 16);
        std::memcpy(o + 16, q1, 16);
        std::memcpy(o + 32, q0 + 16, 16);
        std::memcpy(o + 48, q1 + 16, 16);
      }
    }
  };
  if (n_tokens <= kSerialQuantizeTokens) {
    run(0, n_tokens);
  } else {
    pool.parallel_for(n_tokens, run);
  }
  *scales = xs;
  *sums = xsum;
  if (pairs != nullptr) *pairs = xpair;
  return xq;
}

// The activations a matrix's kernel reads: Q8_0/Q4_0 and the Q8_0-format rows of quant.h read Q8_0 blocks
// (quantize_activations), the K-quants Q8_K super-blocks, the float types f32.
ActFormat act_format(gguf::TensorType type) {
  if (type == gguf::TensorType::Q8_0 || type == gguf::TensorType::Q4_0) return ActFormat::Q8_0;
  const QuantTraits* t = quant_traits(type);
  return t != nullptr ? t->act : ActFormat::F32;
}

// x: [n_tokens][n_cols] as Q8_K rows in out (n_cols / 256 blocks each).
void quantize_activations_q8_k(ThreadPool& pool, const float* x, int64_t n_tokens, size_t n_cols,
                               std::vector<uint8_t>& out) {
  const size_t row_bytes = n_cols / kQK * sizeof(BlockQ8_K);
  out.resize(static_cast<size_t>(n_tokens) * row_bytes);
  auto* xq = reinterpret_cast<BlockQ8_K*>(out.data());  // operator new alignment >= alignof(BlockQ8_K)
  const auto run = [x, xq, n_cols](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      quantize_row_q8_k(x + static_cast<size_t>(t) * n_cols, xq + static_cast<size_t>(t) * (n_cols / kQK), n_cols);
    }
  };
  if (n_tokens <= kSerialQuantizeTokens) {
    run(0, n_tokens);
  } else {
    pool.parallel_for(n_tokens, run);
  }
}

void check_matrix(const Matrix& w) {
  if (w.n_rows < 0 || w.n_cols < 0) {
    throw Error("matrix has a negative shape: " + std::to_string(w.n_rows) + " x " + std::to_string(w.n_cols));
  }
  if (!gguf::tensor_type_from_raw(static_cast<uint32_t>(w.type)) || !gguf::type_is_computed(w.type)) {
    throw Error("matrix has tensor type " + std::string(gguf::tensor_type_name(w.type)) + ", which has no kernel");
  }
  if (w.data == nullptr && w.n_rows > 0 && w.n_cols > 0) throw Error("matrix has no data");
  if (w.row_groups && (!row_group_type(w.type) || !kernel_table().row_group_layouts)) {
    throw Error("matrix of " + std::string(gguf::tensor_type_name(w.type)) +
                " is packed into row groups, which only the AVX-512 VNNI and AMX kernels read (Q4_0, Q8_0, the "
                "K-quants and IQ4_XS only)");
  }
  // Rows are read through typed pointers: f32 needs 4-byte alignment, the 16-bit and block types 2.
  const size_t align = w.type == gguf::TensorType::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(w.data) % align != 0) {
    throw Error("matrix data of type " + std::string(gguf::tensor_type_name(w.type)) + " is not " +
                std::to_string(align) + "-byte aligned");
  }
}

}  // namespace

void matmul(ThreadPool& pool, const Matrix& w, const float* x, int64_t n_tokens, float* y,
            std::vector<uint8_t>& scratch) {
  matmul_multi(pool, {&w}, x, n_tokens, {y}, scratch);
}

void matmul_multi(ThreadPool& pool, std::initializer_list<const Matrix*> ws, const float* x, int64_t n_tokens,
                  std::initializer_list<float*> ys, std::vector<uint8_t>& scratch) {
  if (ws.size() != ys.size() || ws.size() == 0 || ws.size() > kMaxFused) {
    throw Error("matmul_multi: " + std::to_string(ws.size()) + " matrices and " + std::to_string(ys.size()) +
                " outputs (1.." + std::to_string(kMaxFused) + " of each expected)");
  }
  if (n_tokens < 0) throw Error("matmul: negative token count " + std::to_string(n_tokens));
  const KernelTable& k = kernel_table();
  MultiGemm job{};
  const size_t n_cols = static_cast<size_t>((*ws.begin())->n_cols);
  bool any_q8_0 = false, any_q8_k = false;
  for (const Matrix* w : ws) {
    check_matrix(*w);
    if (static_cast<size_t>(w->n_cols) != n_cols) throw Error("matmul_multi: matrices differ in column count");
    gguf::row_bytes(w->type, n_cols);  // throws unless n_cols fills whole blocks
    any_q8_0 = any_q8_0 || act_format(w->type) == ActFormat::Q8_0;
    any_q8_k = any_q8_k || act_format(w->type) == ActFormat::Q8_K;
  }
  if (n_tokens == 0) return;
  const float* x_scales = nullptr;
  const int32_t* x_sums = nullptr;
  const int8_t* x_pairs = nullptr;
  const BlockQ8_0* xq = any_q8_0 && n_cols > 0
                            ? quantize_activations(pool, k, x, n_tokens, n_cols, scratch, &x_scales, &x_sums,
                                                   &x_pairs)
                            : nullptr;
  // The Q8_K rows live in a buffer of the calling thread (scratch already holds the Q8_0 layout above).
  thread_local std::vector<uint8_t> q8_k_scratch;
  if (any_q8_k && n_cols > 0) quantize_activations_q8_k(pool, x, n_tokens, n_cols, q8_k_scratch);
  auto y_it = ys.begin();
  for (const Matrix* w : ws) {
    GemmArgs& a = job.args[job.n_jobs];
    const bool quantized = w->type == gguf::TensorType::Q8_0 || w->type == gguf::TensorType::Q4_0;
    const QuantTraits* traits = quant_traits(w->type);
    a.type = w->type;
    a.w = w->data;
    a.w_row_bytes = gguf::row_bytes(w->type, n_cols);
    a.row_groups = w->row_groups;
    a.x = quantized ? static_cast<const void*>(xq) : static_cast<const void*>(x);
    if (traits != nullptr && traits->act == ActFormat::Q8_0) {
      a.x = xq;
      a.x_row_bytes = n_cols / gguf::kQuantBlock * sizeof(BlockQ8_0);
    } else if (traits != nullptr) {
      a.x = q8_k_scratch.data();
      a.x_row_bytes = n_cols / kQK * sizeof(BlockQ8_K);
    }
    a.x_scales = quantized ? x_scales : nullptr;
    a.x_sums = quantized ? x_sums : nullptr;
    a.x_pairs = quantized ? x_pairs : nullptr;
    a.n_cols = n_cols;
    a.n_rows = w->n_rows;
    a.n_tokens = n_tokens;
    a.y = *y_it++;
    a.y_stride = static_cast<size_t>(w->n_rows);
    job.gemm[job.n_jobs] = traits != nullptr ? k.gemm_traits : quantized ? k.gemm_quant : k.gemm_float;
    job.row_offset[job.n_jobs + 1] = job.row_offset[job.n_jobs] + (w->n_rows + kRowGrain - 1) / kRowGrain * kRowGrain;
    ++job.n_jobs;
  }
  const MultiGemm* jp = &job;  // one pointer keeps the std::function in its small-object buffer
  pool.parallel_for(job.row_offset[job.n_jobs], [jp](int64_t begin, int64_t end) { jp->run(begin, end); },
                    kRowGrain);
}

void get_row(const Matrix& w, int64_t row, float* out) {
  check_matrix(w);
  if (row < 0 || row >= w.n_rows) {
    throw Error("row " + std::to_string(row) + " is out of range for a matrix of " + std::to_string(w.n_rows) +
                " rows");
  }
  const size_t n_cols = static_cast<size_t>(w.n_cols);
  const uint8_t* src = w.data + static_cast<size_t>(row) * gguf::row_bytes(w.type, n_cols);
  std::vector<uint8_t> unpacked;  // the row's GGUF bytes, for a packed matrix
  if (w.row_groups) {
    unpacked.resize(gguf::row_bytes(w.type, n_cols));
    unpack_row(w, row, unpacked.data());
    src = unpacked.data();
  }
  switch (w.type) {
    case gguf::TensorType::F32:
      std::memcpy(out, src, n_cols * sizeof(float));
      return;
    case gguf::TensorType::F16:
    case gguf::TensorType::BF16: {
      const bool is_f16 = w.type == gguf::TensorType::F16;
      for (size_t i = 0; i < n_cols; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, sizeof(h));
        out[i] = is_f16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    }
    case gguf::TensorType::Q8_0:
      dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(src), out, n_cols);
      return;
    case gguf::TensorType::Q4_0:
      dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(src), out, n_cols);
      return;
    default:  // check_matrix refused any type without a traits row above
      quant_traits(w.type)->dequantize(src, out, n_cols);
      return;
  }
}

}  // namespace preface::kernels
