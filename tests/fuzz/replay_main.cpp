// SPDX-License-Identifier: Apache-2.0
// A main for the fuzz harnesses where libFuzzer is not used (gcc, CI): replays every file
// of the corpus folders given (a crash fails the ctest), or writes the seeds with --seeds.
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.hpp"

namespace {

int replay(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto bytes = ss.str();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--seeds") {
    ::mkdir(argv[2], 0755);
    int n = 0;
    for (auto& s : monkey_fuzz_seeds()) {
      std::ofstream out(std::string(argv[2]) + "/seed-" + std::to_string(n++), std::ios::binary);
      out << s;
    }
    std::printf("wrote %d seeds to %s\n", n, argv[2]);
    return 0;
  }
  int count = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat sb {};
    if (::stat(argv[i], &sb) != 0) {
      std::fprintf(stderr, "no such file or folder: %s\n", argv[i]);
      return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
      count += replay(argv[i]);
      continue;
    }
    if (auto* d = ::opendir(argv[i])) {
      while (auto* e = ::readdir(d))
        if (e->d_name[0] != '.')
          count += replay(std::string(argv[i]) + "/" + e->d_name);
      ::closedir(d);
    }
  }
  // The line ctest and CI read: every input replayed, none crashed.
  std::printf("%d passed, 0 failed\n", count);
  return count > 0 ? 0 : 1;
}
