// Debian's headless Chromium for the browser tests (ctest -L browser): running it on a URL and reading the data-*
// attributes a page writes into <body> once it is done.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <string>

namespace preface::test {

inline std::string chromium_path() {
  if (const char* p = std::getenv("PREFACE_CHROMIUM"); p != nullptr && *p != '\0') return p;
  return "/usr/bin/chromium";
}

// Runs chromium headless on `url` with `mode` ("--dump-dom" or "--screenshot=PATH"), letting the page run for
// `virtual_ms` of virtual time (which stands still while a fetch is pending); returns its stdout.
inline std::string run_chromium(const std::string& url, const std::string& mode, const std::filesystem::path& profile,
                                int virtual_ms = 6000) {
  const std::string cmd = "timeout 120 '" + chromium_path() +
                          "' --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                          "--disable-background-networking --disable-component-update --disable-sync "
                          "--disable-dev-shm-usage --hide-scrollbars --window-size=1280,1400 "
                          "--virtual-time-budget=" + std::to_string(virtual_ms) + " --user-data-dir='" +
                          profile.string() + "' " + mode + " '" + url + "' 2>/dev/null";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// The data-* attributes of <body> in a dumped DOM.
inline std::map<std::string, std::string> body_data(const std::string& dom) {
  std::map<std::string, std::string> out;
  std::smatch body;
  if (!std::regex_search(dom, body, std::regex("<body([^>]*)>"))) return out;
  const std::string attrs = body[1].str();
  const std::regex attr("data-([a-z-]+)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(attrs.begin(), attrs.end(), attr); it != std::sregex_iterator(); ++it) {
    out[(*it)[1].str()] = (*it)[2].str();
  }
  return out;
}

}  // namespace preface::test
