// SPDX-License-Identifier: Apache-2.0
#include "runtime/ship/bundle.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/checkpoint/store.hpp"
#include "runtime/shell.hpp"

namespace monkey::ship {

namespace fs = std::filesystem;

namespace {

constexpr char magic[8] = {'M', 'K', 'Y', 'S', 'H', 'I', 'P', '1'};
constexpr size_t max_path = 4096;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  return s;
}

/// Adds the plain file `abs` as `rel` (links followed); notes what it skips.
void add_file(listing& l, const std::string& rel, const std::string& abs) {
  struct stat sb {};
  if (::stat(abs.c_str(), &sb) != 0) {
    l.skipped.push_back(rel + ": " + std::strerror(errno));
    return;
  }
  if (S_ISDIR(sb.st_mode)) {
    l.skipped.push_back(rel + ": a link to a directory (not followed)");
    return;
  }
  if (!S_ISREG(sb.st_mode)) {
    l.skipped.push_back(rel + ": not a plain file");
    return;
  }
  if (!safe_path(rel) || rel.size() > max_path) {
    l.skipped.push_back(rel + ": a path a bundle cannot hold");
    return;
  }
  l.files.push_back(file_item{rel, abs, (sb.st_mode & S_IXUSR) != 0,
                              static_cast<uint64_t>(sb.st_size)});
  l.bytes += static_cast<uint64_t>(sb.st_size);
}

expected<listing> finish(listing l, uint64_t max_bytes) {
  std::sort(l.files.begin(), l.files.end(),
            [](const file_item& a, const file_item& b) { return a.rel < b.rel; });
  l.files.erase(std::unique(l.files.begin(), l.files.end(),
                            [](const file_item& a, const file_item& b) { return a.rel == b.rel; }),
                l.files.end());
  if (l.bytes <= max_bytes)
    return l;
  auto by_size = l.files;
  std::sort(by_size.begin(), by_size.end(),
            [](const file_item& a, const file_item& b) { return a.size > b.size; });
  std::string largest;
  for (size_t i = 0; i < by_size.size() && i < 3; ++i)
    largest += (i ? ", " : "") + by_size[i].rel + " " + human_bytes(by_size[i].size);
  return failure{l.root + " (" + l.how + ") holds " + human_bytes(l.bytes) + " in "
                 + std::to_string(l.files.size()) + " files, more than the "
                 + human_bytes(max_bytes) + " allowed (largest: " + largest + ")"};
}

void walk(listing& l, const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    auto rel = it->path().lexically_relative(dir).generic_string();
    if (!prefix.empty())
      rel = prefix + "/" + rel;
    std::error_code sec;
    if (it->is_directory(sec) && !it->is_symlink(sec))
      continue;
    add_file(l, rel, it->path().string());
  }
  if (ec)
    l.skipped.push_back(dir.string() + ": " + ec.message());
}

bool write_all(int fd, const void* p, size_t n, ckpt::sha256_stream& sha) {
  sha.add(p, n);
  return ckpt::write_all(fd, static_cast<const char*>(p), n);
}

template <class T>
void put_le(char* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
}

template <class T>
T get_le(const unsigned char* in) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return static_cast<T>(v);
}

/// Reads exactly n bytes (false at the end of the file or on an error).
bool read_exact(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    auto r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

} // namespace

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n < 1024)
    std::snprintf(buf, sizeof(buf), "%llu bytes", static_cast<unsigned long long>(n));
  else if (n < (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.1f KB", static_cast<double>(n) / 1024);
  else if (n < (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(n) / (1 << 20));
  else
    std::snprintf(buf, sizeof(buf), "%.2f GB", static_cast<double>(n) / (1ull << 30));
  return buf;
}

expected<listing> list_dir(const std::string& dir, uint64_t max_bytes) {
  std::error_code ec;
  auto abs = fs::absolute(dir, ec).lexically_normal();
  if (ec || !fs::exists(abs, ec))
    return failure{dir + ": no such file or directory"};
  listing l;
  l.how = "directory";
  if (!fs::is_directory(abs, ec)) {
    l.root = abs.parent_path().string();
    l.how = "file";
    add_file(l, abs.filename().string(), abs.string());
    if (l.files.empty())
      return failure{dir + ": " + (l.skipped.empty() ? "nothing to ship" : l.skipped.front())};
    return finish(std::move(l), max_bytes);
  }
  l.root = abs.string();
  if (::access(l.root.c_str(), R_OK | X_OK) != 0)
    return failure{dir + ": " + std::strerror(errno)};
  walk(l, abs, "");
  return finish(std::move(l), max_bytes);
}

expected<listing> list_workdir(const std::string& dir, uint64_t max_bytes) {
  std::error_code ec;
  auto abs = fs::absolute(dir, ec).lexically_normal();
  if (ec || !fs::is_directory(abs, ec))
    return failure{dir + ": not a directory"};
  std::string top;
  if (!capture_output("git -C " + shell_quoted(abs.string()) + " rev-parse --show-toplevel", top))
    return list_dir(abs.string(), max_bytes);
  top = trimmed(top);
  std::string names;
  if (!capture_output("git -C " + shell_quoted(top) + " ls-files -z --cached --others --exclude-standard",
               names))
    return failure{"git ls-files failed in " + top};
  listing l;
  l.root = top;
  l.how = "git tree";
  auto canon_top = fs::weakly_canonical(top, ec);
  auto canon_dir = fs::weakly_canonical(abs, ec);
  auto rel = canon_dir.lexically_relative(canon_top).generic_string();
  l.cwd_rel = rel == "." ? "" : rel;
  size_t start = 0;
  while (start < names.size()) {
    auto end = names.find('\0', start);
    if (end == std::string::npos)
      end = names.size();
    auto name = names.substr(start, end - start);
    start = end + 1;
    if (name.empty())
      continue;
    auto path = top + "/" + name;
    struct stat sb {};
    if (::lstat(path.c_str(), &sb) != 0)
      continue; // tracked but deleted in the working tree: not shipped, as on disk
    if (S_ISDIR(sb.st_mode)) {
      l.skipped.push_back(name + ": a submodule (not shipped)");
      continue;
    }
    add_file(l, name, path);
  }
  return finish(std::move(l), max_bytes);
}

expected<packed> pack(const listing& l, const std::string& out) {
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return failure{"cannot write " + out + ": " + std::strerror(errno)};
  ckpt::sha256_stream sha;
  packed p;
  auto fail = [&](std::string why) -> expected<packed> {
    ::close(fd);
    ::unlink(out.c_str());
    return failure{std::move(why)};
  };
  if (!write_all(fd, magic, sizeof(magic), sha))
    return fail("cannot write " + out + ": " + std::strerror(errno));
  p.bytes = sizeof(magic);
  std::vector<char> buf(1 << 20);
  for (auto& f : l.files) {
    int in = ::open(f.abs.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0)
      return fail("cannot read " + f.abs + ": " + std::strerror(errno));
    char head[1 + 1 + 4];
    head[0] = 'F';
    head[1] = f.exec ? 1 : 0;
    put_le<uint32_t>(head + 2, static_cast<uint32_t>(f.rel.size()));
    char size[8];
    put_le<uint64_t>(size, f.size);
    bool ok = write_all(fd, head, sizeof(head), sha) && write_all(fd, f.rel.data(), f.rel.size(), sha)
              && write_all(fd, size, sizeof(size), sha);
    uint64_t left = f.size;
    while (ok && left > 0) {
      auto n = ::read(in, buf.data(), std::min<uint64_t>(buf.size(), left));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        ::close(in);
        return fail(f.abs + " shrank while it was packed");
      }
      ok = write_all(fd, buf.data(), static_cast<size_t>(n), sha);
      left -= static_cast<uint64_t>(n);
    }
    ::close(in);
    if (!ok)
      return fail("cannot write " + out + ": " + std::strerror(errno));
    p.bytes += sizeof(head) + f.rel.size() + sizeof(size) + f.size;
    ++p.files;
  }
  char end = 'E';
  if (!write_all(fd, &end, 1, sha) || ::fsync(fd) != 0)
    return fail("cannot write " + out + ": " + std::strerror(errno));
  ::close(fd);
  p.bytes += 1;
  p.sha256 = sha.hex();
  return p;
}

expected<size_t> unpack(const std::string& path, const std::string& dest) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return failure{"cannot read bundle " + path + ": " + std::strerror(errno)};
  auto fail = [&](std::string why) -> expected<size_t> {
    ::close(fd);
    return failure{"bundle " + path + ": " + std::move(why)};
  };
  char m[sizeof(magic)];
  if (!read_exact(fd, m, sizeof(m)) || std::memcmp(m, magic, sizeof(m)) != 0)
    return fail("not a Monkey bundle (bad magic)");
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec)
    return fail("cannot make " + dest + ": " + ec.message());
  std::vector<char> buf(1 << 20);
  size_t files = 0;
  for (;;) {
    unsigned char kind;
    if (!read_exact(fd, &kind, 1))
      return fail("truncated after " + std::to_string(files) + " files (no end record)");
    if (kind == 'E') {
      char extra;
      if (read_exact(fd, &extra, 1))
        return fail("bytes after the end record");
      break;
    }
    if (kind != 'F')
      return fail("unknown record kind " + std::to_string(kind) + " after "
                  + std::to_string(files) + " files");
    unsigned char head[1 + 4];
    if (!read_exact(fd, head, sizeof(head)))
      return fail("truncated record header");
    bool exec = head[0] != 0;
    auto len = get_le<uint32_t>(head + 1);
    if (len == 0 || len > max_path)
      return fail("a path of " + std::to_string(len) + " bytes");
    std::string rel(len, '\0');
    unsigned char size_le[8];
    if (!read_exact(fd, rel.data(), len) || !read_exact(fd, size_le, sizeof(size_le)))
      return fail("truncated record header");
    if (!safe_path(rel))
      return fail("unsafe path '" + rel + "'");
    auto size = get_le<uint64_t>(size_le);
    auto target = fs::path(dest) / rel;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return fail("cannot make " + target.parent_path().string() + ": " + ec.message());
    int out = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                     exec ? 0755 : 0644);
    if (out < 0)
      return fail("cannot write " + target.string() + ": " + std::strerror(errno));
    uint64_t left = size;
    while (left > 0) {
      auto want = static_cast<size_t>(std::min<uint64_t>(buf.size(), left));
      if (!read_exact(fd, buf.data(), want)) {
        ::close(out);
        return fail("truncated in " + rel);
      }
      if (!ckpt::write_all(out, buf.data(), want)) {
        auto why = std::string(std::strerror(errno));
        ::close(out);
        return fail("cannot write " + target.string() + ": " + why);
      }
      left -= want;
    }
    ::close(out);
    ++files;
  }
  ::close(fd);
  return files;
}

} // namespace monkey::ship
