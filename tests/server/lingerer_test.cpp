#include "server/http/lingerer.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace preface::server {
namespace {

using Clock = std::chrono::steady_clock;

// A connected pair: [0] the server's end (adopted), [1] the client's.
struct Pair {
  int fd[2] = {-1, -1};
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~Pair() {
    if (fd[1] >= 0) ::close(fd[1]);
  }
};

// Reads until end of stream (or `limit`); the bytes, and whether end of stream came.
std::pair<std::string, bool> read_to_eof(int fd, std::chrono::milliseconds limit) {
  std::string got;
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {got, n == 0};
    got.append(buf, static_cast<size_t>(n));
  }
  return {got, false};
}

bool wait_until_empty(const Lingerer& l, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (l.n_lingering() > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return l.n_lingering() == 0;
}

TEST(Lingerer, ClosesOnceTheClientClosesItsSide) {
  Lingerer lingerer(std::chrono::seconds(30));
  Pair p;
  ASSERT_EQ(::send(p.fd[0], "answer", 6, 0), 6);
  ::shutdown(p.fd[0], SHUT_WR);
  lingerer.adopt(p.fd[0]);
  EXPECT_EQ(lingerer.n_lingering(), 1u);
  const auto [got, eof] = read_to_eof(p.fd[1], std::chrono::seconds(5));
  EXPECT_EQ(got, "answer");
  EXPECT_TRUE(eof);
  ::close(p.fd[1]);
  p.fd[1] = -1;
  EXPECT_TRUE(wait_until_empty(lingerer, std::chrono::seconds(5))) << "a closed peer ends the linger, not the 30 s";
}

TEST(Lingerer, DiscardsWhatTheClientStillSendsAndClosesAfterTheLinger) {
  Lingerer lingerer(std::chrono::milliseconds(150));
  Pair p;
  ASSERT_EQ(::send(p.fd[0], "answer", 6, 0), 6);
  ::shutdown(p.fd[0], SHUT_WR);
  const auto t0 = Clock::now();
  lingerer.adopt(p.fd[0]);
  for (int i = 0; i < 5; ++i) {  // a slow client keeps sending; its bytes are read and dropped
    EXPECT_EQ(::send(p.fd[1], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL), 11);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(wait_until_empty(lingerer, std::chrono::seconds(5)));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(150)) << "held for the linger while the client was open";
  // The server's end is closed: the client reads the answer, then end of stream.
  const auto [got, eof] = read_to_eof(p.fd[1], std::chrono::seconds(1));
  EXPECT_EQ(got, "answer");
  EXPECT_TRUE(eof);
}

TEST(Lingerer, AdoptReturnsAtOnceForManySockets) {
  Lingerer lingerer(std::chrono::milliseconds(200));
  std::vector<Pair> pairs(200);
  const auto t0 = Clock::now();
  for (Pair& p : pairs) {
    ::shutdown(p.fd[0], SHUT_WR);
    lingerer.adopt(p.fd[0]);
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(150)) << "adopt never waits for the linger";
  EXPECT_TRUE(wait_until_empty(lingerer, std::chrono::seconds(10)));
  for (Pair& p : pairs) EXPECT_TRUE(read_to_eof(p.fd[1], std::chrono::seconds(1)).second);
}

TEST(Lingerer, DestructionClosesWhatStillLingers) {
  Pair p;
  {
    Lingerer lingerer(std::chrono::seconds(60));
    ::shutdown(p.fd[0], SHUT_WR);
    lingerer.adopt(p.fd[0]);
  }
  EXPECT_TRUE(read_to_eof(p.fd[1], std::chrono::seconds(1)).second);
}

}  // namespace
}  // namespace preface::server
