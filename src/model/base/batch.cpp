#include "model/base/batch.h"

namespace preface::model {

void ForwardBatch::clear() {
  tokens.clear();
  pos.clear();
  seq.clear();
  want_logits.clear();
}

void ForwardBatch::add(int32_t token, int32_t position, int32_t seq_index, bool logits) {
  tokens.push_back(token);
  pos.push_back(position);
  seq.push_back(seq_index);
  want_logits.push_back(logits ? 1 : 0);
}

}  // namespace preface::model
