#include "server/observability/generation_summary.h"

namespace preface::server {

const StopKindNames& stop_kind_names(StopKind kind) {
  static constexpr StopKindNames kNames[] = {
      {"eos", "stop", "end_turn"},                // EndOfGeneration
      {"stop_string", "stop", "stop_sequence"},   // StopString
      {"length", "length", "max_tokens"},         // Length
      {"cancelled", "stop", "end_turn"},          // Cancelled (never sent as a normal ending)
      {"error", "stop", "end_turn"},              // Error (never sent as a normal ending)
  };
  return kNames[static_cast<size_t>(kind)];
}

}  // namespace preface::server
