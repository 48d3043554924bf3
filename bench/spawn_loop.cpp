// SPDX-License-Identifier: Apache-2.0
// The bare baseline for command-job throughput: posix_spawn + waitpid of a program in a
// loop, one at a time. Prints "spawn_loop N jobs in S s: R jobs/s".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 500;
  const char* prog = argc > 2 ? argv[2] : "/bin/true";
  char* args[] = {const_cast<char*>(prog), nullptr};
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    pid_t pid;
    if (posix_spawn(&pid, prog, nullptr, nullptr, args, environ) != 0)
      return 1;
    int st;
    waitpid(pid, &st, 0);
  }
  std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  std::printf("spawn_loop %d jobs in %.3f s: %.1f jobs/s\n", n, dt.count(), n / dt.count());
  return 0;
}
