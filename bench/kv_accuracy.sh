#!/usr/bin/env bash
# The accuracy table of docs/kv-quant.md: `preface perplexity` of each (K, V) format against f16 KV, on one model
# and text. Usage: bench/kv_accuracy.sh MODEL TEXT [CTX] [THREADS]  (prints a Markdown table)
set -euo pipefail
model=$1 text=$2 ctx=${3:-256} threads=${4:-2}
bin=${PREFACE_BIN:-build/preface}
formats=(
  "--kv-type f16"
  "--kv-type bf16"
  "-ctk f16 -ctv q8_0" "-ctk q8_0 -ctv f16" "-ctk f16 -ctv q4_0" "-ctk q4_0 -ctv f16"
  "--kv-type q8_0 --kv-rotate off" "--kv-type q8_0 --kv-rotate on"
  "-ctk q8_0 -ctv q5_0 --kv-rotate off" "-ctk q8_0 -ctv q5_0 --kv-rotate on"
  "-ctk q8_0 -ctv q4_0 --kv-rotate off" "-ctk q8_0 -ctv q4_0 --kv-rotate on"
  "--kv-type q5_1 --kv-rotate off" "--kv-type q5_1 --kv-rotate on"
  "--kv-type q5_0 --kv-rotate off" "--kv-type q5_0 --kv-rotate on"
  "--kv-type q4_1 --kv-rotate off" "--kv-type q4_1 --kv-rotate on"
  "--kv-type iq4_nl --kv-rotate off" "--kv-type iq4_nl --kv-rotate on"
  "--kv-type q4_0 --kv-rotate off" "--kv-type q4_0 --kv-rotate on"
  "-ctk q8_pc -ctv f16" "-ctk q4_pc -ctv f16" "-ctk q8_pc -ctv q8_0" "-ctk q8_pc -ctv q4_0 --kv-rotate off"
  "-ctk q8_pc -ctv q4_0 --kv-rotate auto" "-ctk q4_pc -ctv q4_0 --kv-rotate off" "-ctk q4_pc -ctv q4_0 --kv-rotate auto"
  "-ctk q4_pc -ctv q4_0 --kv-rotate on"
)
echo "| K / V | bytes per token (f16: 100%) | perplexity (f16 KV) | mean KL vs f16 | p99 KL | top-1 same |"
echo "| --- | --- | --- | --- | --- | --- |"
for f in "${formats[@]}"; do
  # shellcheck disable=SC2086
  if ! j=$("$bin" perplexity -m "$model" -f "$text" --ctx "$ctx" --threads "$threads" --json $f 2>/dev/null); then
    continue  # a format the model's rows or heads cannot hold (rotation of heads below 64 values)
  fi
  python3 - "$j" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
share = 100.0 * j["kv_bytes_per_token"] / j["base_kv_bytes_per_token"]
print(f'| {j["kv_describe"]} | {j["kv_bytes_per_token"]} ({share:.1f}%) | {j["perplexity"]:.4f} ({j["base_perplexity"]:.4f}) '
      f'| {j["kl_divergence"]:.6f} | {j["kl_divergence_p99"]:.5f} | {100 * j["top1_agreement"]:.2f}% |')
PY
done
