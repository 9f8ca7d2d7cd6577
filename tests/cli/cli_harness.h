// Test harness for driving the preface binary (PREFACE_BINARY, defined by tests/CMakeLists.txt for every
// tests/cli/*_test.cpp) as a child process. Header-only; this file is not a *_test.cpp, so the CMake glob does not
// make it an executable. It offers:
//   - CliResult run_preface(args, env): run the binary once, stdout and stderr captured separately;
//   - quote(s): single-quote a string for /bin/sh;
//   - slurp(path): a whole file as bytes ("" when it cannot be read);
//   - ServeProcess: `preface serve --port 0 <extra args>` on a free loopback port, its stdout+stderr in a log file,
//     ready once it printed "preface: listening on http://127.0.0.1:PORT" and /health answers 200 (model loaded),
//     SIGTERMed and reaped on destruction.
// Child processes never outlive the object or call that started them.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/shared_data.h"

#ifndef PREFACE_BINARY
#error "PREFACE_BINARY (path of the preface executable) must be defined; tests/CMakeLists.txt does it for tests/cli"
#endif

namespace preface::test {

// exit_code: the child's exit status, -1 when it could not be started or did not exit normally (a signal).
struct CliResult {
  int exit_code = -1;
  std::string out;  // everything written to stdout
  std::string err;  // everything written to stderr
  // stdout followed by stderr, for checks that do not care which stream a message went to.
  std::string all() const { return out + err; }
};

// `s` in single quotes for /bin/sh, embedded single quotes escaped as '\''.
inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The whole file as bytes; "" when it is missing or unreadable.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `PREFACE_BINARY args...` through /bin/sh with every argument quoted, prefixed by `env` verbatim (e.g.
// "env PREFACE_KERNELS=avx2" or "PREFACE_MODEL=" + quote(path); the caller quotes what needs it). Blocks until the
// child exits. stderr goes through a file in a per-process temp dir, so calls must not overlap in one process.
inline CliResult run_binary(const std::string& binary, const std::vector<std::string>& args,
                            const std::string& env = "") {
  const auto err_path = temp_dir("cli-run") / "stderr.txt";
  std::string cmd = env + ' ' + quote(binary);
  for (const std::string& a : args) cmd += ' ' + quote(a);
  cmd += " 2>" + quote(err_path.string());
  CliResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err_path.string());
  return r;
}

inline CliResult run_preface(const std::vector<std::string>& args, const std::string& env = "") {
  return run_binary(PREFACE_BINARY, args, env);
}

#ifdef PREFACE_BENCH_BINARY
// `preface-bench args...` (tests/clients).
inline CliResult run_bench(const std::vector<std::string>& args, const std::string& env = "") {
  return run_binary(PREFACE_BENCH_BINARY, args, env);
}
#endif

// `preface serve --port 0 <extra_args>` (extra_args: -m, --threads, limits...). The constructor waits up to ~10 s
// for the listening line; url() stays "" if it never came (print log() to see why). The log lives in
// temp_dir("serve-" + log_name); use distinct names for servers alive at the same time in one process.
class ServeProcess {
 public:
  ServeProcess(std::vector<std::string> extra_args, const std::string& log_name)
      : log_((temp_dir("serve-" + log_name) / "server.log").string()) {
    std::vector<std::string> args = {PREFACE_BINARY, "serve", "--port", "0"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, PREFACE_BINARY, &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    const std::regex re(R"(preface: listening on (http://127\.0\.0\.1:[0-9]+))");
    for (int i = 0; i < 400 && pid_ > 0 && url_.empty(); ++i) {
      std::smatch m;
      const std::string text = slurp(log_);
      if (std::regex_search(text, m, re)) url_ = m[1].str();
      else std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    // The server listens before its model is loaded (/health answers 503 until then; slow under sanitizers).
    if (url_.empty()) return;
    httplib::Client client(url_);
    client.set_connection_timeout(std::chrono::seconds(2));
    for (int i = 0; i < 1200; ++i) {
      const auto res = client.Get("/health");
      if (res && res->status == 200) return;
      if (!alive()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    url_.clear();  // never became ready
  }
  ~ServeProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Sends `sig` and reaps the child; its wait status (-1 when it was not running).
  int signal_and_wait(int sig) {
    if (!alive()) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // "http://127.0.0.1:PORT", or "" when the server did not become ready in time (60 s after listening).
  const std::string& url() const { return url_; }
  // Everything the server wrote so far (stdout and stderr interleaved).
  std::string log() const { return slurp(log_); }
  // True while the child runs. A child found exited is reaped here and forgotten, so the destructor never
  // signals a pid that may have been reused.
  bool alive() const {
    if (pid_ <= 0) return false;
    if (::waitpid(pid_, nullptr, WNOHANG) == 0) return true;
    pid_ = -1;
    return false;
  }

 private:
  std::string log_;  // path of the server's stdout+stderr
  mutable pid_t pid_ = -1;  // -1: not started or already reaped
  std::string url_;  // empty until the server said where it listens
};

}  // namespace preface::test
