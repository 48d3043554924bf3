// SPDX-License-Identifier: Apache-2.0
#include "runtime/checkpoint/store.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fcntl.h>
#include <map>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "runtime/ids.hpp"

namespace monkey::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr const char* manifest_name = "MANIFEST";
constexpr size_t io_chunk = 1 << 20;

std::string errno_text() {
  return std::strerror(errno);
}

std::string to_hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

/// A job id's text (or a shipped bundle's "ship-<sha256>") is letters, digits and '-':
/// safe as a directory name.
bool valid_job(const std::string& job) {
  if (job.empty() || job.size() > 80)
    return false;
  return std::all_of(job.begin(), job.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || c == '-';
  });
}

status fsync_path(const std::string& path, bool dir) {
  int fd = ::open(path.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0)
    return failure{"cannot open " + path + ": " + errno_text()};
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    return failure{"cannot sync " + path + ": " + errno_text()};
  return {};
}


std::optional<manifest> read_manifest(const std::string& dir) {
  auto path = dir + "/" + manifest_name;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    return std::nullopt;
  std::string data;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && data.size() < max_body_bytes)
    data.append(buf, n);
  std::fclose(f);
  auto m = decode<manifest>(data, "checkpoint manifest");
  if (!m)
    return std::nullopt;
  return *m;
}

/// Whether the files of `m` are in `dir` with their sizes.
bool files_match(const manifest& m, const std::string& dir) {
  for (auto& f : m.files) {
    struct stat sb {};
    if (!valid_file_name(f.name) || ::stat((dir + "/" + f.name).c_str(), &sb) != 0
        || static_cast<uint64_t>(sb.st_size) != f.size)
      return false;
  }
  return true;
}

} // namespace

uint64_t manifest::bytes() const {
  uint64_t n = 0;
  for (auto& f : files)
    n += f.size;
  return n;
}

std::string manifest::dir_name() const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%016lld-%016llx", static_cast<long long>(step),
                static_cast<unsigned long long>(serial));
  return buf;
}

sha256_stream::sha256_stream() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

sha256_stream::~sha256_stream() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

void sha256_stream::add(const void* p, size_t n) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), p, n);
}

std::string sha256_stream::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  return to_hex(md, len);
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    auto w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (w == 0)
        errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

expected<std::string> copy_file_sha256(const std::string& from, const std::string& to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return failure{"cannot read " + from + ": " + errno_text()};
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    ::close(in);
    return failure{"cannot write " + to + ": " + errno_text()};
  }
  sha256_stream sha;
  std::unique_ptr<char[]> buf(new char[io_chunk]);
  std::string err;
  for (;;) {
    auto n = ::read(in, buf.get(), io_chunk);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = "cannot read " + from + ": " + errno_text();
      break;
    }
    if (n == 0)
      break;
    sha.add(buf.get(), static_cast<size_t>(n));
    if (!write_all(out, buf.get(), static_cast<size_t>(n))) {
      err = "cannot write " + to + ": " + errno_text();
      break;
    }
  }
  if (err.empty() && ::fsync(out) != 0)
    err = "cannot sync " + to + ": " + errno_text();
  ::close(in);
  ::close(out);
  if (!err.empty())
    return failure{err};
  return sha.hex();
}

bool valid_file_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name[0] != '.' && name != manifest_name
         && name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

expected<std::string> file_sha256(const std::string& path) {
  int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return failure{"cannot read " + path + ": " + errno_text()};
  sha256_stream sha;
  std::unique_ptr<char[]> buf(new char[io_chunk]);
  for (;;) {
    auto n = ::read(in, buf.get(), io_chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      ::close(in);
      return failure{"cannot read " + path + ": " + errno_text()};
    }
    if (n == 0)
      break;
    sha.add(buf.get(), static_cast<size_t>(n));
  }
  ::close(in);
  return sha.hex();
}

restore_plan plan_restore(const std::vector<manifest>& pieces) {
  // Newest step first; within a step, the newest piece first.
  std::vector<const manifest*> order;
  for (auto& p : pieces)
    order.push_back(&p);
  std::sort(order.begin(), order.end(), [](const manifest* a, const manifest* b) {
    return a->step != b->step ? a->step > b->step : a->serial > b->serial;
  });
  size_t i = 0;
  while (i < order.size()) {
    auto step = order[i]->step;
    size_t j = i;
    while (j < order.size() && order[j]->step == step)
      ++j;
    restore_plan plan;
    plan.step = step;
    if (order[i]->world <= 0) { // a command job's directory: the newest piece is whole
      plan.pieces.push_back(*order[i]);
      return plan;
    }
    auto world = order[i]->world;
    std::set<int32_t> missing;
    for (int32_t r = 0; r < world; ++r)
      missing.insert(r);
    for (size_t k = i; k < j && !missing.empty(); ++k) {
      if (order[k]->world != world)
        continue;
      bool useful = false;
      for (auto& f : order[k]->files)
        if (f.name.rfind("rank-", 0) == 0) {
          auto r = std::strtol(f.name.c_str() + 5, nullptr, 10);
          if (missing.erase(static_cast<int32_t>(r)) > 0)
            useful = true;
        }
      if (useful && std::find(plan.pieces.begin(), plan.pieces.end(), *order[k])
                      == plan.pieces.end())
        plan.pieces.push_back(*order[k]);
    }
    if (missing.empty())
      return plan;
    i = j;
  }
  return {};
}

store::store(std::string root, uint64_t max_bytes, int keep_steps)
  : root_(std::move(root)), max_bytes_(max_bytes), keep_steps_(std::max(1, keep_steps)) {
  std::error_code ec;
  fs::create_directories(root_, ec);
}

std::string store::job_dir(const std::string& job) const {
  return root_ + "/" + job;
}

std::string store::dir_of(const manifest& m) const {
  return job_dir(m.job) + "/" + m.dir_name();
}

bool store::has(const manifest& m) const {
  auto have = read_manifest(dir_of(m));
  return have && *have == m && files_match(*have, dir_of(m));
}

expected<manifest> store::seal(manifest m, const std::string& tmp) {
  if (!files_match(m, tmp))
    return failure{"checkpoint of job " + m.job + " step " + std::to_string(m.step)
                   + ": its files do not match their manifest"};
  auto body = encode(m);
  auto mpath = tmp + "/" + manifest_name;
  {
    std::FILE* f = std::fopen(mpath.c_str(), "wb");
    if (!f)
      return failure{"cannot write " + mpath + ": " + errno_text()};
    bool ok = std::fwrite(body.data(), 1, body.size(), f) == body.size();
    ok = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0 && ok;
    std::fclose(f);
    if (!ok)
      return failure{"cannot write " + mpath + ": " + errno_text()};
  }
  if (auto ok = fsync_path(tmp, true); !ok)
    return failure{ok.error()};
  auto final_dir = dir_of(m);
  std::error_code ec;
  // The same piece again: whole already (two fetches of one checkpoint for two jobs that
  // continue from it, or a push beside a fetch), it stays as it is — a restore may be
  // reading it — and this copy goes; a partial one is replaced whole.
  auto keep_existing = [&] {
    if (!has(m))
      return false;
    fs::remove_all(tmp, ec);
    return true;
  };
  if (keep_existing())
    return m;
  fs::remove_all(final_dir, ec);
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    auto why = errno_text();
    if (keep_existing()) // sealed by another writer between the two calls
      return m;
    return failure{"cannot move the checkpoint into " + final_dir + ": " + why};
  }
  if (auto ok = fsync_path(job_dir(m.job), true); !ok)
    return failure{ok.error()};
  return m;
}

expected<manifest> store::commit_dir(manifest m, const std::string& src, bool move) {
  if (!valid_job(m.job))
    return failure{"checkpoint: '" + m.job + "' is not a job id"};
  std::error_code ec;
  std::vector<fs::path> files;
  uint64_t total = 0;
  for (auto it = fs::directory_iterator(src, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec))
      continue;
    auto name = it->path().filename().string();
    if (!valid_file_name(name))
      continue;
    files.push_back(it->path());
    total += it->file_size(ec);
  }
  if (ec)
    return failure{"checkpoint: cannot read the directory " + src + ": " + ec.message()};
  if (total > max_bytes_)
    return failure{"checkpoint of job " + m.job + " step " + std::to_string(m.step) + " is "
                   + std::to_string(total) + " bytes, over this node's limit of "
                   + std::to_string(max_bytes_) + " bytes (--checkpoint-max-mb)"};
  std::sort(files.begin(), files.end());
  fs::create_directories(job_dir(m.job), ec);
  // Unique per call: two commits of one piece at once (offloaded on two threads) must not
  // share a staging directory, or one's remove_all takes the other's files.
  static std::atomic<uint64_t> commits{0};
  auto tmp = job_dir(m.job) + "/.tmp-" + m.dir_name() + "-" + std::to_string(::getpid()) + "-"
             + std::to_string(commits.fetch_add(1));
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec))
    return failure{"cannot make " + tmp + ": " + ec.message()};
  m.files.clear();
  for (auto& p : files) {
    file_entry f;
    f.name = p.filename().string();
    auto to = tmp + "/" + f.name;
    if (move && ::rename(p.c_str(), to.c_str()) == 0) {
      auto h = file_sha256(to);
      if (!h || !fsync_path(to, false)) {
        abandon(tmp);
        return failure{h ? "cannot sync " + to : h.error()};
      }
      f.sha256 = *h;
    } else {
      auto h = copy_file_sha256(p.string(), to);
      if (!h) {
        abandon(tmp);
        return failure{h.error()};
      }
      f.sha256 = *h;
    }
    struct stat sb {};
    ::stat(to.c_str(), &sb);
    f.size = static_cast<uint64_t>(sb.st_size);
    m.files.push_back(std::move(f));
  }
  if (m.created_ms == 0)
    m.created_ms = now_ms();
  auto sealed = seal(std::move(m), tmp);
  if (!sealed)
    abandon(tmp);
  return sealed;
}

expected<std::string> store::begin_receive(const manifest& m) {
  if (!valid_job(m.job))
    return failure{"checkpoint: '" + m.job + "' is not a job id"};
  if (m.bytes() > max_bytes_)
    return failure{"checkpoint of job " + m.job + " step " + std::to_string(m.step) + " is "
                   + std::to_string(m.bytes()) + " bytes, over this node's limit of "
                   + std::to_string(max_bytes_) + " bytes (--checkpoint-max-mb)"};
  for (auto& f : m.files)
    if (!valid_file_name(f.name))
      return failure{"checkpoint: '" + f.name + "' is not a valid file name"};
  std::error_code ec;
  fs::create_directories(job_dir(m.job), ec);
  static std::atomic<uint64_t> seq{0};
  auto tmp = job_dir(m.job) + "/.tmp-" + m.dir_name() + "-r" + std::to_string(++seq);
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec))
    return failure{"cannot make " + tmp + ": " + ec.message()};
  return tmp;
}

expected<manifest> store::finish_receive(const manifest& m, const std::string& dir) {
  for (auto& f : m.files)
    if (auto ok = fsync_path(dir + "/" + f.name, false); !ok) {
      abandon(dir);
      return failure{ok.error()};
    }
  auto sealed = seal(m, dir);
  if (!sealed)
    abandon(dir);
  return sealed;
}

void store::abandon(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

std::vector<manifest> store::list(const std::string& job) const {
  std::vector<manifest> out;
  if (!valid_job(job))
    return out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(job_dir(job), ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.empty() || name[0] == '.')
      continue;
    auto m = read_manifest(it->path().string());
    if (m && m->job == job && m->dir_name() == name && files_match(*m, it->path().string()))
      out.push_back(std::move(*m));
  }
  std::sort(out.begin(), out.end(), [](const manifest& a, const manifest& b) {
    return a.step != b.step ? a.step < b.step : a.serial < b.serial;
  });
  return out;
}

size_t store::prune(const std::string& job) {
  if (!valid_job(job))
    return 0;
  auto pieces = list(job);
  // The newest keep_steps complete steps stay, and the newest keep_steps + 1 steps whatever
  // they hold (a checkpoint being completed by its other hosts; a node that runs one host
  // of a gang without holding the job has only its own pieces, none complete).
  std::set<int64_t> keep;
  auto rest = pieces;
  for (int k = 0; k < keep_steps_; ++k) {
    auto plan = plan_restore(rest);
    if (plan.step < 0)
      break;
    keep.insert(plan.step);
    rest.erase(std::remove_if(rest.begin(), rest.end(),
                              [&](const manifest& m) { return m.step >= plan.step; }),
               rest.end());
  }
  std::set<int64_t, std::greater<int64_t>> steps;
  for (auto& m : pieces)
    steps.insert(m.step);
  int n = 0;
  for (auto step : steps)
    if (n++ <= keep_steps_)
      keep.insert(step);
  std::set<std::string> wanted;
  for (auto& m : pieces)
    if (keep.count(m.step))
      wanted.insert(m.dir_name());
  size_t removed = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(job_dir(job), ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    auto name = it->path().filename().string();
    bool leftover = name.rfind(".tmp-", 0) == 0;
    if (leftover) {
      // An interrupted write: removed once it is an hour old (a transfer may still run).
      std::error_code e2;
      auto age = fs::last_write_time(it->path(), e2);
      if (e2 || fs::file_time_type::clock::now() - age < std::chrono::hours(1))
        continue;
    } else if (wanted.count(name)) {
      continue;
    }
    std::error_code e3;
    fs::remove_all(it->path(), e3);
    ++removed;
  }
  return removed;
}

void store::forget(const std::string& job) {
  if (!valid_job(job))
    return;
  std::error_code ec;
  fs::remove_all(job_dir(job), ec);
}

std::vector<std::string> store::idle_jobs(std::chrono::milliseconds age) const {
  std::vector<std::string> out;
  auto cutoff = fs::file_time_type::clock::now() - age;
  auto recent = [&](const fs::path& p) {
    std::error_code e;
    auto t = fs::last_write_time(p, e);
    return e || t > cutoff; // unreadable: kept
  };
  std::error_code ec;
  for (auto it = fs::directory_iterator(root_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    auto job = it->path().filename().string();
    if (!valid_job(job) || !it->is_directory(ec) || recent(it->path()))
      continue;
    bool idle = true;
    std::error_code e2;
    for (auto p = fs::recursive_directory_iterator(it->path(), e2);
         idle && !e2 && p != fs::recursive_directory_iterator(); p.increment(e2))
      idle = !recent(p->path());
    if (idle && !e2)
      out.push_back(job);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void store::touch(const std::string& job) {
  if (!valid_job(job))
    return;
  std::error_code ec;
  fs::last_write_time(job_dir(job), fs::file_time_type::clock::now(), ec);
}

std::pair<uint64_t, size_t> store::usage() const {
  uint64_t bytes = 0;
  size_t count = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    for (auto& m : list(it->path().filename().string())) {
      bytes += m.bytes();
      ++count;
    }
  return {bytes, count};
}

} // namespace monkey::ckpt
