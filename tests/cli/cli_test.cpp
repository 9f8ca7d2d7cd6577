// The preface binary end to end: run, tokenize and eval on stories260K against the oracle, --help for every
// subcommand, and a clear error for a missing model.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "gguf/reader.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace preface::test {
namespace {

std::string stories() {
  const auto path = shared_file("models/stories260K.gguf");
  return path.empty() ? "" : path.string();
}

nlohmann::json first_oracle_case() {
  std::ifstream in(shared_file("oracle/stories260K.jsonl"));
  std::string line;
  std::getline(in, line);
  return nlohmann::json::parse(line);
}

TEST(Cli, VersionPrintsTheProjectVersion) {
  const CliResult r = run_preface({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(r.out.rfind("preface ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find('.'), std::string::npos) << r.out;
}

TEST(Cli, RunGreedyFromBosTellsTheOracleStory) {
  const std::string model = stories();
  if (model.empty()) return;
  const CliResult r = run_preface({"run", "-m", model, "-n", "40", "--temp", "0", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Exactly the decoded text of the first 40 oracle tokens, nothing else on stdout.
  std::ifstream ids_in(shared_file("oracle/stories260K.greedy-from-bos-256.ids"));
  std::vector<int32_t> ids{std::istream_iterator<int32_t>(ids_in), std::istream_iterator<int32_t>()};
  ASSERT_GE(ids.size(), 40u);
  ids.resize(40);
  const auto tok = Tokenizer::from_gguf(gguf::File::open(model));
  EXPECT_EQ(r.out, tok->decode(ids));
  EXPECT_EQ(slurp(shared_file("oracle/stories260K.greedy-from-bos-256.txt")).rfind(r.out, 0), 0u)
      << "stdout is not a prefix of the oracle text: " << r.out;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST(Cli, RunContinuesAPromptLikeTheOracle) {
  const std::string model = stories();
  if (model.empty()) return;
  const nlohmann::json oc = first_oracle_case();
  const CliResult r = run_preface({"run", "-m", model, "-p", oc["prompt"], "-n", "20", "--temp", "0", "--kv-type",
                                "f16", "--block-size", "4", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto tok = Tokenizer::from_gguf(gguf::File::open(model));
  std::vector<int32_t> all = oc["tokens"].get<std::vector<int32_t>>();
  const std::string prompt_text = tok->decode(all);
  const auto greedy = oc["greedy"].get<std::vector<int32_t>>();
  all.insert(all.end(), greedy.begin(), greedy.begin() + 20);
  EXPECT_EQ(prompt_text + r.out, tok->decode(all));
}

TEST(Cli, RunSamplingIsSeeded) {
  const std::string model = stories();
  if (model.empty()) return;
  const std::vector<std::string> args = {"run", "-m", model, "-n", "30", "--temp", "1", "--seed", "5"};
  const CliResult a = run_preface(args), b = run_preface(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
}

TEST(Cli, TokenizePrintsOracleIds) {
  const std::string model = stories();
  if (model.empty()) return;
  const nlohmann::json oc = first_oracle_case();
  const auto ids = oc["tokens"].get<std::vector<int32_t>>();
  std::string expected, expected_no_bos;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) expected += ' ';
    expected += std::to_string(ids[i]);
    if (i > 1) expected_no_bos += ' ';
    if (i > 0) expected_no_bos += std::to_string(ids[i]);
  }
  const CliResult r = run_preface({"tokenize", "-m", model, oc["prompt"]});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected + "\n");
  const CliResult nb = run_preface({"tokenize", "-m", model, "--no-bos", oc["prompt"]});
  EXPECT_EQ(nb.out, expected_no_bos + "\n");
  const CliResult env = run_preface({"tokenize", oc["prompt"]}, "PREFACE_MODEL=" + quote(model));
  EXPECT_EQ(env.out, expected + "\n") << env.err;
}

TEST(Cli, EvalPrintsOneOracleStyleJsonObject) {
  const std::string model = stories();
  if (model.empty()) return;
  const nlohmann::json oc = first_oracle_case();
  const CliResult r = run_preface({"eval", "-m", model, "-p", oc["prompt"], "-n", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.find('\n'), r.out.size() - 1) << "expected one line";
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt"], oc["prompt"]);
  EXPECT_EQ(j["tokens"], oc["tokens"]);
  EXPECT_EQ(j["argmax"], oc["argmax"]);
  ASSERT_EQ(j["last_logits"].size(), oc["last_logits"].size());
  for (size_t i = 0; i < j["last_logits"].size(); ++i) {
    EXPECT_NEAR(j["last_logits"][i].get<double>(), oc["last_logits"][i].get<double>(), 0.05) << i;
  }
  const auto greedy = oc["greedy"].get<std::vector<int32_t>>();
  EXPECT_EQ(j["greedy"].get<std::vector<int32_t>>(), std::vector<int32_t>(greedy.begin(), greedy.begin() + 8));
}

TEST(Cli, HelpWorksForEverySubcommand) {
  const CliResult top = run_preface({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* sub : {"run", "eval", "tokenize", "synth"}) {
    EXPECT_NE(top.out.find(sub), std::string::npos) << sub;
    const CliResult r = run_preface({sub, "--help"});
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub << ": " << r.out;
  }
}

TEST(Cli, MissingModelIsAClearError) {
  const std::string missing = "/nonexistent/dir/model.gguf";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "-m", missing, "-n", "4"}, {"eval", "-m", missing, "-p", "x"},
        {"tokenize", "-m", missing, "x"}}) {
    const CliResult r = run_preface(args);
    EXPECT_NE(r.exit_code, 0) << args[0];
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(Cli, BadOptionsAreErrors) {
  const std::string model = stories();
  if (model.empty()) return;
  EXPECT_NE(run_preface({"run", "-m", model, "--kv-type", "q4"}).exit_code, 0);
  EXPECT_NE(run_preface({"run", "-m", model, "--block-size", "0"}).exit_code, 0);
  EXPECT_NE(run_preface({"bogus"}).exit_code, 0);
}

}  // namespace
}  // namespace preface::test
