// The gauges cache- and load-aware routers read from vLLM's /metrics that Metrics::render_vllm does not already
// give, for the Gateway API Inference Extension's endpoint picker (its model-server protocol: queued and running
// requests, KV utilisation, the block size for its prefix-aware scorer, LoRA adapters) and similar routers:
//
//   vllm:gpu_cache_usage_perc{model_name}  the older name of vllm:kv_cache_usage_perc (0..1), which older
//                                          pickers read
//   vllm:cache_config_info{model_name, block_size, num_gpu_blocks, cache_dtype (the KV format's name: "q8_0",
//     "q8_0/q4_0+r"), cache_dtype_k, cache_dtype_v, kv_rotate_k, kv_rotate_v, enable_prefix_caching} 1
//   vllm:lora_requests_info{model_name, max_lora="0", running_lora_adapters="", waiting_lora_adapters=""}
//                                          the scrape time in Unix seconds, as vLLM's (preface serves no adapter)
//
// vllm:num_requests_waiting / _running and vllm:kv_cache_usage_perc come from render_vllm.
#pragma once
#include <string>

#include "engine/engine.h"

namespace preface::server {

// Appends the series above. `description` and `prefix_cache` describe the engine (Engine::describe(),
// EngineConfig::prefix_cache); `unix_s` is the scrape time.
void render_gateway_gauges(std::string& out, const engine::EngineCounters& counters,
                           const engine::EngineDescription& description, bool prefix_cache,
                           const std::string& model_name, double unix_s);

}  // namespace preface::server
