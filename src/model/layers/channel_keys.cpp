#include "model/layers/channel_keys.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/kv_channels.h"
#include "util/error.h"

namespace preface::model::detail {
namespace {

constexpr int32_t kGroup = kernels::kKvChannelGroup;

// The open keys of layer `layer` of the sequence whose buffer is `open`: [kGroup][open_key_stride()].
float* open_rows(float* open, const kernels::KvView& kv, int layer) {
  return open + static_cast<size_t>(layer) * static_cast<size_t>(kGroup) * kv.open_key_stride();
}

// The K row of position pos of a sequence (span): the batch's when the batch computes it, else its open keys'.
const float* key_row(const ForwardBatch& batch, size_t seq, const SeqSpan& span, const kernels::KvView& kv, int layer,
                     const float* k, int32_t pos) {
  const size_t k_values = static_cast<size_t>(kv.layers[static_cast<size_t>(layer)].k_values);
  if (pos >= span.first_pos) return k + (span.t_first + static_cast<size_t>(pos - span.first_pos)) * k_values;
  return open_rows(batch.open_keys[seq], kv, layer) + static_cast<size_t>(pos % kGroup) * kv.open_key_stride();
}

}  // namespace

std::vector<SeqSpan> channel_key_spans(const ForwardBatch& batch) {
  const size_t n_seqs = batch.block_tables.size();
  if (batch.open_keys.size() != n_seqs) {
    throw Error("forward: per-channel keys need every sequence's open keys (ForwardBatch::open_keys)");
  }
  std::vector<SeqSpan> spans(n_seqs);
  std::vector<bool> seen(n_seqs, false);
  for (size_t t = 0; t < batch.size();) {
    const auto s = static_cast<size_t>(batch.seq[t]);
    size_t end = t + 1;
    while (end < batch.size() && batch.seq[end] == batch.seq[t]) {
      if (batch.pos[end] != batch.pos[end - 1] + 1) {
        throw Error("forward: with per-channel keys a sequence's tokens must have consecutive positions");
      }
      ++end;
    }
    if (seen[s]) throw Error("forward: with per-channel keys a sequence's tokens must be consecutive in the batch");
    if (batch.open_keys[s] == nullptr) throw Error("forward: sequence " + std::to_string(s) + " has no open keys");
    seen[s] = true;
    spans[s] = {t, end, batch.pos[t]};
    t = end;
  }
  return spans;
}

void seal_keys(ThreadPool& pool, const ForwardBatch& batch, const std::vector<SeqSpan>& spans,
               const kernels::KvView& kv, int layer, const float* k) {
  const kernels::KvLayerView& lv = kv.layers[static_cast<size_t>(layer)];
  const auto n = static_cast<size_t>(lv.k_values);
  // (sequence, group) of every group a span completes.
  std::vector<std::pair<size_t, int32_t>> groups;
  for (size_t s = 0; s < spans.size(); ++s) {
    const SeqSpan& sp = spans[s];
    const auto end_pos = sp.first_pos + static_cast<int32_t>(sp.t_end - sp.t_first);
    for (int32_t g = sp.first_pos / kGroup; (g + 1) * kGroup <= end_pos; ++g) groups.emplace_back(s, g);
  }
  if (groups.empty()) return;
  pool.parallel_for(static_cast<int64_t>(groups.size()), [&](int64_t begin, int64_t end) {
    std::vector<float> rows(static_cast<size_t>(kGroup) * n);
    for (int64_t i = begin; i < end; ++i) {
      const auto [s, g] = groups[static_cast<size_t>(i)];
      for (int32_t r = 0; r < kGroup; ++r) {
        const float* src = key_row(batch, s, spans[s], kv, layer, k, g * kGroup + r);
        std::memcpy(rows.data() + static_cast<size_t>(r) * n, src, n * sizeof(float));
      }
      const std::vector<int32_t>& table = batch.table(static_cast<int32_t>(s), lv.window_pool);
      const int32_t pos = g * kGroup;
      uint8_t* dst = kv.k_row(layer, table[static_cast<size_t>(pos / kv.block_size)], pos % kv.block_size);
      kernels::kv_seal_group(kv.format.k, rows.data(), n, n, dst);
    }
  });
}

void keep_open_keys(const ForwardBatch& batch, const std::vector<SeqSpan>& spans, const kernels::KvView& kv,
                    int layer, const float* k) {
  const auto n = static_cast<size_t>(kv.layers[static_cast<size_t>(layer)].k_values);
  for (size_t s = 0; s < spans.size(); ++s) {
    const SeqSpan& sp = spans[s];
    const auto end_pos = sp.first_pos + static_cast<int32_t>(sp.t_end - sp.t_first);
    if (sp.t_end == sp.t_first || end_pos % kGroup == 0) continue;  // nothing, or its last group sealed
    float* open = open_rows(batch.open_keys[s], kv, layer);
    for (int32_t pos = std::max(sp.first_pos, (end_pos - 1) / kGroup * kGroup); pos < end_pos; ++pos) {
      const float* src = k + (sp.t_first + static_cast<size_t>(pos - sp.first_pos)) * n;
      std::memcpy(open + static_cast<size_t>(pos % kGroup) * kv.open_key_stride(), src, n * sizeof(float));
    }
  }
}

void ChannelPages::build(const ForwardBatch& batch, const SeqSpan& span, const kernels::KvView& kv, int layer,
                         const float* k, size_t t0, size_t t1, kernels::KvPages& pages) {
  const auto seq = static_cast<size_t>(batch.seq[t0]);
  const int32_t open_from = batch.pos[t0] / kGroup * kGroup;
  const auto n = static_cast<size_t>(kv.layers[static_cast<size_t>(layer)].k_values);
  const int32_t n_rows = batch.pos[t1 - 1] - open_from + 1;
  if (open_.size() < static_cast<size_t>(kGroup) * n) open_.resize(static_cast<size_t>(kGroup) * n);
  for (int32_t r = 0; r < n_rows; ++r) {
    std::memcpy(open_.data() + static_cast<size_t>(r) * n, key_row(batch, seq, span, kv, layer, k, open_from + r),
                n * sizeof(float));
  }
  pages.k_row_values = n;
  pages.open_k = open_.data();
  pages.open_k_stride = n;
  pages.open_from = open_from;
}

}  // namespace preface::model::detail
