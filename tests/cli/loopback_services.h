// Loopback services for end-to-end tests of `preface serve`: a free port, polling, one /metrics sample, and a
// redis-server without persistence.
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

extern char** environ;

namespace preface::test {

// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Polls pred every 20 ms for up to ms milliseconds; its last answer.
inline bool wait_until(const std::function<bool()>& pred, int ms = 20000) {
  for (int i = 0; i < ms / 20; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// The value of one /metrics sample ("name{labels}"), -1 when absent or the server does not answer.
inline double metric(const std::string& url, const std::string& sample) {
  httplib::Client c(url);
  auto res = c.Get("/metrics");
  if (!res) return -1;
  const size_t at = res->body.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::stod(res->body.substr(at + sample.size() + 2));
}

inline bool have_program(const char* name) {
  return std::system(("command -v " + std::string(name) + " >/dev/null 2>&1").c_str()) == 0;
}

// redis-server on a loopback port, no persistence; killed (SIGKILL) and reaped by stop() or the destructor.
class RedisProcess {
 public:
  // extra: more redis-server arguments (e.g. {"--requirepass", "pw"}).
  explicit RedisProcess(int port, const std::vector<std::string>& extra = {}) : port_(port) {
    const std::string p = std::to_string(port);
    std::vector<std::string> args = {"redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                     "no", "--protected-mode", "no"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawnp(&pid_, "redis-server", &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ready_ = pid_ > 0 && wait_until([&] {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port_));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      ::close(fd);
      return ok;
    }, 5000);
  }
  ~RedisProcess() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  bool ready() const { return ready_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }

 private:
  int port_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace preface::test
