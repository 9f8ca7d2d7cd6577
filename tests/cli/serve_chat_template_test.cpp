// `preface serve --chat-template`: a Jinja file replaces the model's template (/apply-template shows it), a
// family name picks a built-in renderer, and a template that does not parse or names nothing stops start-up with
// a non-zero exit and the reason (never a silent ChatML).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_harness.h"

namespace preface::test {
namespace {

std::string write_template(const std::string& name, const std::string& text) {
  const auto path = (temp_dir("chat-template-" + name) / (name + ".jinja")).string();
  std::ofstream(path) << text;
  return path;
}

std::string apply(const std::string& url) {
  httplib::Client c(url);
  const auto res = c.Post("/apply-template", R"({"messages": [{"role": "user", "content": "hi"}]})",
                          "application/json");
  return res && res->status == 200 ? nlohmann::json::parse(res->body)["prompt"].get<std::string>() : "";
}

TEST(ServeChatTemplate, JinjaFileAndFamilyName) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty()) << "needs ../shared/models/stories260K.gguf";
  const std::string file = write_template("ok", "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                                                "{% if add_generation_prompt %}[bot]{% endif %}\n");
  {
    ServeProcess srv({"-m", model.string(), "--quiet", "--chat-template", file}, "chat-template-file");
    ASSERT_FALSE(srv.url().empty()) << srv.log();
    EXPECT_EQ(apply(srv.url()), "[user]hi[bot]");
  }
  {
    ServeProcess srv({"-m", model.string(), "--quiet", "--chat-template-file", file}, "chat-template-file2");
    ASSERT_FALSE(srv.url().empty()) << srv.log();
    EXPECT_EQ(apply(srv.url()), "[user]hi[bot]");
  }
  ServeProcess srv({"-m", model.string(), "--quiet", "--chat-template", "zephyr"}, "chat-template-family");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  EXPECT_EQ(apply(srv.url()).rfind("<|user|>\nhi", 0), 0u);
}

TEST(ServeChatTemplate, BadTemplatesStopStartUp) {
  const auto model = shared_file("models/stories260K.gguf");
  ASSERT_FALSE(model.empty());
  const std::string bad = write_template("bad", "{% for m in messages %}{{ m.content }}");
  CliResult r = run_preface({"serve", "--port", "0", "-m", model.string(), "--chat-template", bad}, "timeout 60");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all().find("does not parse"), std::string::npos) << r.all();
  r = run_preface({"serve", "--port", "0", "-m", model.string(), "--chat-template", "no-such-family"}, "timeout 60");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all().find("unknown chat template"), std::string::npos) << r.all();
}

}  // namespace
}  // namespace preface::test
