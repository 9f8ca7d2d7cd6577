// `preface soak --url URL --clients N --seconds S --seed X`: a soak client for a running `preface serve`. N threads
// loop for S seconds over a seeded mix of well-formed requests (all three APIs, streamed or not, shared prefixes
// and long prompts), clients that vanish mid-stream, malformed requests and requests over the server's limits
// (soak_workload.h). Every well-formed answer must equal the reference answer of its prompt (temperature 0: the
// server is bit-exact with or without the prefix cache); every bad request must get its 400/413. Meanwhile
// /metrics is scraped for preface_kv_invariants_ok, and at the end the server's blocks in use must drain to 0.
// Prints one summary line (key=value) on stdout, the first failures on stderr; exits 1 on any failure.
#include <cstdio>
#include <memory>
#include <string>

#include "clients/commands.h"
#include "clients/loadgen_client.h"
#include "clients/soak_runner.h"
#include "util/error.h"

namespace preface::cli {
namespace {

struct SoakCliOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string api_key;
  soak::Options run;
  bool no_server_checks = false;
};

void soak_main(SoakCliOptions& o) {
  o.run.target = loadgen::parse_url(o.url, o.api_key);
  o.run.server_checks = !o.no_server_checks;
  std::fprintf(stderr, "soak: %d clients for %.0f s against %s (seed %llu)\n", o.run.n_clients, o.run.seconds,
               o.url.c_str(), static_cast<unsigned long long>(o.run.spec.seed));
  const soak::Report r = soak::run(o.run);
  std::fprintf(stderr, "soak: %.2f tokens/word; long prompts ~%d tokens, over-limit prompt ~%d tokens\n",
               r.tokens_per_word, r.long_prompt_tokens, r.over_prompt_tokens);
  for (const std::string& e : r.examples) std::fprintf(stderr, "soak: %s\n", e.c_str());
  const bool pass = r.passed(o.run.server_checks);
  std::printf("soak: %s %s\n", pass ? "PASS" : "FAIL", r.summary().c_str());
  std::fflush(stdout);
  if (!pass) throw Error("the soak failed (see the summary line)");
}

}  // namespace

void register_soak(CLI::App& app) {
  auto o = std::make_shared<SoakCliOptions>();
  CLI::App* cmd = app.add_subcommand("soak", "Soak a running preface server: mixed good, bad and vanishing clients");
  cmd->add_option("--url", o->url, "Base URL of the server")->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "Sent as 'Authorization: Bearer KEY'");
  cmd->add_option("--clients", o->run.n_clients, "Concurrent client threads")->capture_default_str();
  cmd->add_option("--seconds", o->run.seconds, "Length of the concurrent phase")->capture_default_str();
  cmd->add_option("--seed", o->run.spec.seed, "Seed of the prompts and of the request mix")->capture_default_str();
  cmd->add_option("--timeout", o->run.timeout_s, "Seconds one request may take")->capture_default_str();
  cmd->add_option("--max-body-bytes", o->run.spec.limits.max_body_bytes,
                  "The server's --max-body-bytes (bodies 1 byte over it must get 413)")
      ->capture_default_str();
  cmd->add_option("--max-tokens-limit", o->run.spec.limits.max_output_tokens,
                  "The server's --max-tokens-limit (max_tokens 1 over it must get 400)")
      ->capture_default_str();
  o->run.spec.limits.max_prompt_tokens = 0;
  cmd->add_option("--max-prompt-tokens", o->run.spec.limits.max_prompt_tokens,
                  "The server's --max-prompt-tokens (0: the model's context from /v1/models); longer prompts must "
                  "get 400");
  cmd->add_flag("--no-server-checks", o->no_server_checks,
                "Skip the /metrics checks (KV invariants, blocks in use), for servers other than preface");
  cmd->callback([o] { soak_main(*o); });
}

}  // namespace preface::cli
