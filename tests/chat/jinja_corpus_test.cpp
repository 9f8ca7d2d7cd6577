// Every template of ../shared/templates and its 2026/ folder x every fixture case: the Jinja render equals the
// `rendered` string of the corpus (jinja2 3.1 under Hugging Face's settings) byte for byte, or fails as the corpus
// says: the same raise_exception message, or an error of the same kind (UndefinedError, TypeError,
// TemplateRuntimeError) for template bugs.
#include <gtest/gtest.h>

#include "chat/jinja_corpus.h"

namespace preface::chat {
namespace {

using test::CorpusTemplate;

const char* expected_kind(const std::string& error_type) {
  if (error_type == "raise_exception") return "TemplateError";
  return error_type.c_str();
}

// Where two renders part, with some context, for a readable failure.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n got: " + got.substr(from, 120) +
         "\nwant: " + want.substr(from, 120);
}

TEST(JinjaCorpus, EveryCaseRendersAsJinja2) {
  const std::vector<CorpusTemplate> templates = test::load_corpus_templates(/*with_2026=*/true);
  const auto fixtures = test::load_corpus_fixtures();
  ASSERT_GE(templates.size(), 40u);
  size_t cases = 0, rendered = 0, raised = 0;
  for (const CorpusTemplate& t : templates) {
    SCOPED_TRACE(t.file);
    std::unique_ptr<JinjaChatTemplate> tmpl;
    try {
      tmpl = std::make_unique<JinjaChatTemplate>(t.doc["template"].get<std::string>(), t.bos, t.eos);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "parse: " << e.what();
      continue;
    }
    for (const auto& c : t.doc["cases"]) {
      ++cases;
      const nlohmann::ordered_json& fx = fixtures.at(c["fixture"].get<std::string>());
      SCOPED_TRACE(c["fixture"].get<std::string>() + " agp=" + (c["add_generation_prompt"].get<bool>() ? "1" : "0"));
      const nlohmann::ordered_json tools = fx.contains("tools") ? fx["tools"] : nlohmann::ordered_json();
      const nlohmann::ordered_json kwargs = fx.contains("template_kwargs") ? fx["template_kwargs"] : nlohmann::ordered_json();
      try {
        const RenderedChat r =
            tmpl->render(fx["messages"], tools, c["add_generation_prompt"].get<bool>(), kwargs, test::corpus_config());
        if (c["rendered"].is_string()) {
          const std::string want = c["rendered"].get<std::string>();
          EXPECT_EQ(r.text, want) << first_difference(r.text, want);
          ++rendered;
        } else {
          ADD_FAILURE() << "rendered, but jinja2 raised " << c["error_type"] << ": " << c["error"];
        }
      } catch (const jinja::JinjaError& e) {
        if (c["error"].is_null()) {
          ADD_FAILURE() << "raised " << jinja::error_kind_name(e.kind()) << ": " << e.what();
          continue;
        }
        const std::string type = c["error_type"].get<std::string>();
        EXPECT_STREQ(jinja::error_kind_name(e.kind()), expected_kind(type)) << e.what();
        if (type == "raise_exception") {
          EXPECT_EQ(e.what(), c["error"].get<std::string>());
        }
        ++raised;
      }
    }
  }
  EXPECT_EQ(cases, 695u);  // 500 of the first corpus, 13 x 15 of templates/2026
  std::printf("corpus: %zu cases, %zu rendered, %zu raised as expected\n", cases, rendered, raised);
}

}  // namespace
}  // namespace preface::chat
