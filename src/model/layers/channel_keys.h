// Per-channel keys (kernels/kv_type.h: q8_pc, q4_pc) in a forward pass (internal to the model module).
//
// Defined by position, never by arrival: a query at position p reads the keys of every group before p's own group
// (kernels::kKvChannelGroup positions each) in their sealed form, widened from the pool (kernels/kv_channels.h),
// and the keys of its own group up to p as the f32 rows the layer computed. So a prompt in one pass, in chunks of
// any size, token by token or after a cache hit gives every query the same keys, and the same bits; a sealed
// group's bytes depend on its 32 rows only, so the pool's blocks stay a function of their tokens. What this costs:
// - A pass seals each group whose last position it computes (seal_keys, before attention: later queries of the
//   pass read it sealed), and keeps the rows of the group it ends inside in the sequence's open keys
//   (keep_open_keys, after attention: the pass's own queries of that group still read the rows it had before).
// - Attention reads the pool's pages, sealed groups widened chunk by chunk in the kernels (kernels::KvPages: a
//   chunk of kAttnChunk positions is one group), and the open group from f32 rows gathered per run of queries
//   (ChannelPages). Runs never straddle a group, so all of a run's queries agree on which groups are sealed.
// - A cache hit must end where a group does (engine/scheduler.cpp): a partial block's copied rows are whole sealed
//   groups, never the open rows, which are not in the pool.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_view.h"
#include "model/base/batch.h"
#include "util/thread_pool.h"

namespace preface::model::detail {

// A sequence's tokens in a batch: batch tokens [t_first, t_end) at positions first_pos, first_pos + 1, ...
struct SeqSpan {
  size_t t_first = 0;
  size_t t_end = 0;
  int32_t first_pos = 0;
};

// [n_seqs] spans (t_end == t_first for a sequence with no token). Throws preface::Error when a sequence's tokens
// are not consecutive in the batch with consecutive positions, or a sequence lacks open keys.
std::vector<SeqSpan> channel_key_spans(const ForwardBatch& batch);

// Seals, into layer `layer`'s K region, every group whose last position the batch computes. k: [n][K row values]
// f32, the batch's K rows (rotated when the format says so).
void seal_keys(ThreadPool& pool, const ForwardBatch& batch, const std::vector<SeqSpan>& spans,
               const kernels::KvView& kv, int layer, const float* k);

// Copies the batch's K rows of each sequence's last, unsealed group to its open keys (after attention).
void keep_open_keys(const ForwardBatch& batch, const std::vector<SeqSpan>& spans, const kernels::KvView& kv,
                    int layer, const float* k);

// The open group's K rows of one run of queries (see the header), reused from run to run.
class ChannelPages {
 public:
  // Sets pages' per-channel fields (kernels::KvPages::open_k ...) for the queries of batch tokens [t0, t1) of one
  // sequence (span), all in one group, of layer `layer`: the group's rows up to the last query's position, from
  // the sequence's open keys and the batch's K rows k. Valid until the next build.
  void build(const ForwardBatch& batch, const SeqSpan& span, const kernels::KvView& kv, int layer, const float* k,
             size_t t0, size_t t1, kernels::KvPages& pages);

 private:
  std::vector<float> open_;  // [kKvChannelGroup][K row values]
};

}  // namespace preface::model::detail
