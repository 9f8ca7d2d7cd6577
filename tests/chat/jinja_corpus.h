// The template corpus of ../shared/templates (see its README): templates, fixtures and expected renderings,
// loaded for the Jinja corpus and prefix-stability tests.
#pragma once
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_jinja.h"
#include "support/shared_data.h"

namespace preface::chat::test {

struct CorpusTemplate {
  std::string file;  // e.g. "Qwen__Qwen3-1.7B.json"
  nlohmann::ordered_json doc;
  std::optional<std::string> bos, eos;
};

inline nlohmann::ordered_json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::ordered_json::parse(in);
}

// Every <name>.json of ../shared/templates, and with_2026 those of its 2026/ folder too (named "2026/<name>.json";
// same fixtures), sorted by that name; empty (and the test failed) when absent.
inline std::vector<CorpusTemplate> load_corpus_templates(bool with_2026 = false) {
  std::vector<CorpusTemplate> out;
  const std::filesystem::path dir = preface::test::shared_dir();
  if (dir.empty()) return out;
  for (const std::string sub : {"", "2026/"}) {
    if (!sub.empty() && !with_2026) continue;
    if (!std::filesystem::is_directory(dir / "templates" / sub)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir / "templates" / sub)) {
      const std::string name = sub + e.path().filename().string();
      if (!e.is_regular_file() || e.path().extension() != ".json" || name == "fixtures.json") continue;
      CorpusTemplate t{name, read_json(e.path()), std::nullopt, std::nullopt};
      if (t.doc["bos_token"].is_string()) t.bos = t.doc["bos_token"].get<std::string>();
      if (t.doc["eos_token"].is_string()) t.eos = t.doc["eos_token"].get<std::string>();
      out.push_back(std::move(t));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
  return out;
}

// fixtures.json's fixtures by name.
inline std::map<std::string, nlohmann::ordered_json> load_corpus_fixtures() {
  std::map<std::string, nlohmann::ordered_json> out;
  const std::filesystem::path dir = preface::test::shared_dir();
  if (dir.empty()) return out;
  const nlohmann::ordered_json doc = read_json(dir / "templates" / "fixtures.json");
  for (const auto& f : doc["fixtures"]) out[f["name"].get<std::string>()] = f;
  return out;
}

// The corpus's fixed moment, 2024-07-26 00:00:00 (README: strftime_now).
inline std::tm corpus_clock() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_wday = 5;  // a Friday
  tm.tm_yday = 207;
  return tm;
}

inline jinja::RenderConfig corpus_config() {
  jinja::RenderConfig c;
  c.clock = corpus_clock;
  return c;
}

}  // namespace preface::chat::test
