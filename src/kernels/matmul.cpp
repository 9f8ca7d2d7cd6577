#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/dot.h"
#include "util/error.h"
#include "util/fp16.h"

namespace preface::kernels {

namespace {

// Weight rows per parallel_for grain unit: a thread's chunk is a multiple of this.
constexpr int64_t kRowGrain = 16;
// Cache blocking inside a chunk: a tile of weight rows is applied to a tile of activation rows at a time, each
// tile about kTileBytes (at most kMaxTile rows) so that both stay in L1 while every (row, token) pair of the
// tile is formed. Blocking changes only the order in which independent outputs are produced, never how any
// one is computed.
constexpr size_t kTileBytes = 16 * 1024;
constexpr int64_t kMaxTile = 16;

int64_t tile_rows(size_t row_bytes) {
  return std::clamp<int64_t>(static_cast<int64_t>(kTileBytes / std::max<size_t>(row_bytes, 1)), 1, kMaxTile);
}

// Everything a matmul chunk needs, passed by one pointer so the std::function wrapping the chunk lambda stays
// in its small-object buffer (no allocation per call).
template <typename WRow, typename XRow>
struct GemmJob {
  float (*dot)(const WRow*, const XRow*, size_t);
  const uint8_t* w_data;  // [n_rows][w_row_bytes]
  size_t w_row_bytes;
  const XRow* x;  // [n_tokens][x_row_elems]
  size_t x_row_elems;
  size_t n_cols;
  int64_t n_rows;
  int64_t n_tokens;
  float* y;  // [n_tokens][n_rows]

  void run(int64_t row_begin, int64_t row_end) const {
    const int64_t row_tile = tile_rows(w_row_bytes);
    const int64_t token_tile = tile_rows(x_row_elems * sizeof(XRow));
    for (int64_t r0 = row_begin; r0 < row_end; r0 += row_tile) {
      const int64_t r1 = std::min(row_end, r0 + row_tile);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += token_tile) {
        const int64_t t1 = std::min(n_tokens, t0 + token_tile);
        for (int64_t t = t0; t < t1; ++t) {
          const XRow* xt = x + static_cast<size_t>(t) * x_row_elems;
          float* yt = y + t * n_rows;
          for (int64_t r = r0; r < r1; ++r) {
            const auto* wr = reinterpret_cast<const WRow*>(w_data + static_cast<size_t>(r) * w_row_bytes);
            yt[r] = dot(wr, xt, n_cols);
          }
        }
      }
    }
  }
};

template <typename WRow, typename XRow>
void run_gemm(ThreadPool& pool, const GemmJob<WRow, XRow>& job) {
  const GemmJob<WRow, XRow>* p = &job;
  pool.parallel_for(job.n_rows, [p](int64_t begin, int64_t end) { p->run(begin, end); }, kRowGrain);
}

void check_matrix(const Matrix& w) {
  if (w.n_rows < 0 || w.n_cols < 0) {
    throw Error("matrix has a negative shape: " + std::to_string(w.n_rows) + " x " + std::to_string(w.n_cols));
  }
  if (!gguf::tensor_type_from_raw(static_cast<uint32_t>(w.type))) {
    throw Error("matrix has unsupported tensor type " + std::to_string(static_cast<uint32_t>(w.type)));
  }
  if (w.data == nullptr && w.n_rows > 0 && w.n_cols > 0) throw Error("matrix has no data");
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
  check_matrix(w);
  if (n_tokens < 0) throw Error("matmul: negative token count " + std::to_string(n_tokens));
  const size_t n_cols = static_cast<size_t>(w.n_cols);
  const size_t w_row_bytes = gguf::row_bytes(w.type, n_cols);  // throws unless n_cols fills whole blocks
  if (n_tokens == 0 || w.n_rows == 0) return;
  const KernelTable& k = kernel_table();

  switch (w.type) {
    case gguf::TensorType::F32:
      run_gemm<float, float>(pool, {k.dot_f32, w.data, w_row_bytes, x, n_cols, n_cols, w.n_rows, n_tokens, y});
      return;
    case gguf::TensorType::F16:
      run_gemm<uint16_t, float>(pool, {k.dot_f16, w.data, w_row_bytes, x, n_cols, n_cols, w.n_rows, n_tokens, y});
      return;
    case gguf::TensorType::BF16:
      run_gemm<uint16_t, float>(pool, {k.dot_bf16, w.data, w_row_bytes, x, n_cols, n_cols, w.n_rows, n_tokens, y});
      return;
    case gguf::TensorType::Q8_0:
    case gguf::TensorType::Q4_0:
      break;
  }

  // Quantized weights: activations to Q8_0 first. xq: [n_tokens][n_blocks] blocks in scratch.
  const size_t n_blocks = n_cols / gguf::kQuantBlock;
  const size_t xq_bytes = static_cast<size_t>(n_tokens) * n_blocks * sizeof(BlockQ8_0);
  if (scratch.size() < xq_bytes) scratch.resize(xq_bytes);
  auto* xq = reinterpret_cast<BlockQ8_0*>(scratch.data());  // operator new alignment >= alignof(BlockQ8_0)
  const struct {
    void (*quantize)(const float*, BlockQ8_0*, size_t);
    const float* x;  // [n_tokens][n_cols]
    BlockQ8_0* xq;   // [n_tokens][n_blocks]
    size_t n_cols, n_blocks;
  } qjob{k.quantize_row_q8_0, x, xq, n_cols, n_blocks};
  const auto* qp = &qjob;
  pool.parallel_for(n_tokens, [qp](int64_t t0, int64_t t1) {
    for (size_t t = static_cast<size_t>(t0); t < static_cast<size_t>(t1); ++t) {
      qp->quantize(qp->x + t * qp->n_cols, qp->xq + t * qp->n_blocks, qp->n_cols);
    }
  });

  const int64_t n_rows = w.n_rows;
  if (w.type == gguf::TensorType::Q8_0) {
    run_gemm<BlockQ8_0, BlockQ8_0>(pool, {k.dot_q8_0, w.data, w_row_bytes, xq, n_blocks, n_cols, n_rows, n_tokens, y});
  } else {
    run_gemm<BlockQ4_0, BlockQ8_0>(pool, {k.dot_q4_0, w.data, w_row_bytes, xq, n_blocks, n_cols, n_rows, n_tokens, y});
  }
}

void get_row(const Matrix& w, int64_t row, float* out) {
  check_matrix(w);
  if (row < 0 || row >= w.n_rows) {
    throw Error("row " + std::to_string(row) + " is out of range for a matrix of " + std::to_string(w.n_rows) +
                " rows");
  }
  const size_t n_cols = static_cast<size_t>(w.n_cols);
  const uint8_t* src = w.data + static_cast<size_t>(row) * gguf::row_bytes(w.type, n_cols);
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
  }
}

}  // namespace preface::kernels
