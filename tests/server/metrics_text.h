// Reading a Prometheus text exposition (version 0.0.4) in tests: one sample's value, the metadata lines that a
// family repeats, the samples of families that never declared a TYPE, and `promtool check metrics` (Debian's
// prometheus package) when it is installed.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/shared_data.h"

namespace preface::test {

// The lines of `text`, without their '\n'.
inline std::vector<std::string> exposition_lines(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// The value of the first sample line that starts with `series` ("name" or "name{labels}", labels exactly as
// printed) followed by a space, or -1 when there is none.
inline double sample_value(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    pos += series.size();
  }
  return -1;
}

// "# HELP name" / "# TYPE name" lines that occur more than once, as "HELP name" / "TYPE name" (each once). The
// format allows one of each per family; a second one makes Prometheus reject the whole scrape.
inline std::vector<std::string> repeated_metadata(const std::string& text) {
  std::map<std::string, int> seen;
  std::vector<std::string> out;
  for (const std::string& line : exposition_lines(text)) {
    for (const char* kind : {"HELP", "TYPE"}) {
      const std::string prefix = std::string("# ") + kind + " ";
      if (line.rfind(prefix, 0) != 0) continue;
      const std::string name = line.substr(prefix.size(), line.find(' ', prefix.size()) - prefix.size());
      if (++seen[std::string(kind) + " " + name] == 2) out.push_back(std::string(kind) + " " + name);
    }
  }
  return out;
}

// Sample names whose family (the name, or the name less _bucket/_sum/_count for a histogram) has no TYPE line
// before the sample, and families whose samples are not all consecutive (each listed once).
inline std::vector<std::string> untyped_or_split_families(const std::string& text) {
  std::set<std::string> typed, reported, closed;
  std::string current;
  std::vector<std::string> out;
  const auto family_of = [&](const std::string& name) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        const std::string base = name.substr(0, name.size() - s.size());
        if (typed.contains(base)) return base;
      }
    }
    return name;
  };
  for (const std::string& line : exposition_lines(text)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      typed.insert(name);
      if (!current.empty()) closed.insert(current);
      current = name;
      continue;
    }
    if (line[0] == '#') continue;
    const std::string family = family_of(line.substr(0, line.find_first_of("{ ")));
    const bool ok = typed.contains(family) && family == current && !closed.contains(family);
    if (!ok && reported.insert(family).second) out.push_back(family);
  }
  return out;
}

// `promtool check metrics` over `text`: its output, or nullopt when promtool is not installed. `status` gets the
// exit status (0: accepted).
inline std::optional<std::string> promtool_check(const std::string& text, const std::string& name, int& status) {
  const char* promtool = "/usr/bin/promtool";
  if (!std::filesystem::exists(promtool)) return std::nullopt;
  const auto path = temp_dir(name) / "metrics.txt";
  std::ofstream(path) << text;
  const std::string cmd = std::string(promtool) + " check metrics < '" + path.string() + "' 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string output;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int raw = ::pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return output;
}

// promtool's complaints less the one the vLLM aliases earn by design: their ':' (vLLM's own names), which the
// linter reserves for recording rules and says of vLLM's /metrics too. `n_colon` gets how many were dropped.
inline std::string promtool_complaints_besides_vllm_names(const std::string& output, int& n_colon) {
  std::string other;
  n_colon = 0;
  for (const std::string& line : exposition_lines(output)) {
    if (line.rfind("vllm:", 0) == 0 && line.find(" metric names should not contain ':'") != std::string::npos) {
      ++n_colon;
    } else if (!line.empty()) {
      other += line + "\n";
    }
  }
  return other;
}

}  // namespace preface::test
