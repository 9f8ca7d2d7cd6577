// One forward pass's tokens: any number of sequences, each token with its position and its sequence's block
// table (the paged KV rows it reads and writes).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace preface::model {

struct ForwardBatch {
  std::vector<int32_t> tokens;        // [n] token ids
  std::vector<int32_t> pos;           // [n] position of each token in its sequence
  std::vector<int32_t> seq;           // [n] index into block_tables
  std::vector<uint8_t> want_logits;   // [n] 1 = produce logits for this token
  std::vector<const std::vector<int32_t>*> block_tables;  // [n_seqs] physical block ids, cover pos of each token
  // [n_seqs] each sequence's recurrent-state slot (kernels::KvView::state), for models with State layers (empty
  // otherwise). A sequence's tokens in a batch are consecutive positions; the slot holds its state after the
  // position before the first of them, and a sequence whose first token is at position 0 starts from zeros.
  std::vector<int32_t> state_slots;
  // [n_seqs] each sequence's window table, for storage whose windowed layers have their own pool
  // (kernels::KvView::n_window_blocks > 0; empty otherwise): like block_tables, in that pool's block ids, where
  // blocks wholly below kernels::attention_first_read of a token's query may be -1 (given back).
  std::vector<const std::vector<int32_t>*> window_tables;
  // [n_seqs] each sequence's open keys, for storage whose keys are quantized per channel (kernels::KvView::
  // open_key_floats() > 0; empty otherwise): [n_layers][kKvChannelGroup][KvView::open_key_stride()] f32, row
  // p % kKvChannelGroup holding the K row of position p for the positions of the sequence's last unsealed group
  // before its first token here (what earlier passes wrote there). A pass keeps them current: it seals each group
  // whose last position it computes, and leaves the rows of the group it ends inside.
  std::vector<float*> open_keys;
  // The table a layer's rows are addressed by: window_tables[seq] for a window_pool layer, else block_tables[seq].
  const std::vector<int32_t>& table(int32_t seq_index, bool window_pool) const {
    return *(window_pool ? window_tables : block_tables)[static_cast<size_t>(seq_index)];
  }

  size_t size() const { return tokens.size(); }
  void clear();
  void add(int32_t token, int32_t position, int32_t seq_index, bool logits);
};

}  // namespace preface::model
