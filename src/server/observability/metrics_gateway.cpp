#include "server/observability/metrics_gateway.h"

#include "server/observability/metrics.h"

namespace preface::server {
namespace {

void gauge(std::string& out, const char* name, const char* help, const std::string& labels, double value) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" gauge\n");
  out.append(name).append("{").append(labels).append("} ").append(prometheus_number(value)).append("\n");
}

std::string label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + prometheus_label_value(value) + "\"";
}

}  // namespace

void render_gateway_gauges(std::string& out, const engine::EngineCounters& c, const engine::EngineDescription& d,
                           bool prefix_cache, const std::string& model_name, double unix_s) {
  const std::string model = label("model_name", model_name);
  gauge(out, "vllm:gpu_cache_usage_perc", "Fraction of KV blocks held by requests, 0..1 (vllm:kv_cache_usage_perc).",
        model, c.n_blocks_total > 0 ? static_cast<double>(c.n_blocks_in_use) / c.n_blocks_total : 0.0);
  gauge(out, "vllm:cache_config_info", "The KV cache's configuration, in labels (value 1).",
        model + "," + label("block_size", std::to_string(d.block_size)) + "," +
            label("num_gpu_blocks", std::to_string(d.n_kv_blocks)) + "," +
            label("cache_dtype", d.kv_format.name()) + "," +
            label("cache_dtype_k", kernels::kv_type_name(d.kv_format.k)) + "," +
            label("cache_dtype_v", kernels::kv_type_name(d.kv_format.v)) + "," +
            label("kv_rotate_k", d.kv_format.rotate_k ? "True" : "False") + "," +
            label("kv_rotate_v", d.kv_format.rotate_v ? "True" : "False") + "," +
            label("enable_prefix_caching", prefix_cache ? "True" : "False"),
        1);
  gauge(out, "vllm:lora_requests_info", "LoRA adapters loaded and waiting (none: preface serves no adapter); "
        "the value is the time of this report in Unix seconds.",
        model + "," + label("max_lora", "0") + "," + label("running_lora_adapters", "") + "," +
            label("waiting_lora_adapters", ""),
        unix_s);
}

}  // namespace preface::server
