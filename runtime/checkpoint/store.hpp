// SPDX-License-Identifier: Apache-2.0
#pragma once
// A node's checkpoint store (docs/checkpoints.md): the checkpoints of jobs that ran here or
// that this node holds for others, one directory per piece under `<data-dir>/checkpoints`:
//
//   <root>/<job>/<step, 16 digits>-<serial, 16 hex>/   the files, then MANIFEST (written last)
//
// A piece is what one node saved at one step: a command job's whole checkpoint directory
// (world 0), or the files `rank-R` of the ranks an app host runs (world N: the step is
// complete when the pieces of that step cover ranks 0..N-1). A piece counts only once its
// MANIFEST is in place (files fsynced before it, then the directory renamed into place);
// a directory without one, or whose files do not match it, is ignored and removed.
// Plain C++: no CAF (store.test.cpp).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/wire/codec.hpp"

namespace monkey::ckpt {

/// One file of a piece.
struct file_entry {
  std::string name;   ///< a plain file name (no '/')
  uint64_t size = 0;
  std::string sha256; ///< hex
  MSGPACK_DEFINE_MAP(name, size, sha256);
};

/// What a piece holds; the MANIFEST file of its directory (msgpack).
struct manifest {
  std::string job;      ///< the job id's text
  int64_t step = 0;     ///< the step the job said it reached
  uint64_t serial = 0;  ///< orders pieces of the same step (the saving node's clock, ns)
  int32_t world = 0;    ///< an app's rank count; 0 for a command job's directory
  std::string label;    ///< "ranks 0-1" / "directory": for logs and `show`
  int64_t created_ms = 0;
  std::vector<file_entry> files;
  MSGPACK_DEFINE_MAP(job, step, serial, world, label, created_ms, files);

  uint64_t bytes() const;
  /// The piece's directory name under the job's: step and serial, sortable.
  std::string dir_name() const;
  bool operator==(const manifest& o) const {
    return job == o.job && step == o.step && serial == o.serial;
  }
};

/// The pieces to restore: the newest complete step (step -1: none).
struct restore_plan {
  int64_t step = -1;
  std::vector<manifest> pieces;
};

/// The newest step whose pieces make a whole checkpoint: for apps (world > 0) pieces of
/// that step that together hold `rank-0` .. `rank-(world-1)` (the newest piece of each
/// rank); for command jobs the newest piece. Pieces may come from several nodes and repeat.
restore_plan plan_restore(const std::vector<manifest>& pieces);

/// Whether `name` may be a file of a piece (no path, no dot files, at most 255 bytes).
bool valid_file_name(const std::string& name);

/// SHA-256 of bytes as they go by (OpenSSL), as hex at the end.
class sha256_stream {
public:
  sha256_stream();
  ~sha256_stream();
  sha256_stream(const sha256_stream&) = delete;
  sha256_stream& operator=(const sha256_stream&) = delete;
  void add(const void* p, size_t n);
  std::string hex();

private:
  void* ctx_;
};

/// Writes all `n` bytes to `fd`, again after short writes and EINTR; false (errno set) when
/// it cannot.
bool write_all(int fd, const char* p, size_t n);

/// Copies `from` to `to` (fsynced), returning the SHA-256 of what it copied (hex).
expected<std::string> copy_file_sha256(const std::string& from, const std::string& to);

/// SHA-256 of a file as hex, or the failure that names the file.
expected<std::string> file_sha256(const std::string& path);

class store {
public:
  /// `root`: the store's directory (made if missing). `max_bytes`: the largest piece.
  /// `keep_steps`: complete steps kept per job (older ones are removed by `prune`).
  store(std::string root, uint64_t max_bytes, int keep_steps = 2);

  const std::string& root() const { return root_; }
  uint64_t max_bytes() const { return max_bytes_; }

  /// Makes a piece of the plain files in `src` (not its subdirectories): copies them (or
  /// moves them, with `move`, when `src` is on the same file system), hashes and fsyncs
  /// them, writes the MANIFEST and renames the directory into place. A piece over the size
  /// limit, an unreadable file or a full disk is a failure that says so; nothing is kept.
  expected<manifest> commit_dir(manifest m, const std::string& src, bool move);

  /// A new empty directory to receive `m`'s files into (then `finish_receive`).
  expected<std::string> begin_receive(const manifest& m);
  /// Checks the received files against `m` (sizes; hashes were checked while they came),
  /// fsyncs, writes the MANIFEST and renames the directory into place.
  expected<manifest> finish_receive(const manifest& m, const std::string& dir);
  /// Removes a directory that `begin_receive` made (a transfer that failed).
  void abandon(const std::string& dir);

  /// The valid pieces of `job` here, oldest first.
  std::vector<manifest> list(const std::string& job) const;
  /// Whether this piece is here (same job, step and serial).
  bool has(const manifest& m) const;
  /// The directory of a piece that is here.
  std::string dir_of(const manifest& m) const;
  /// Removes the pieces of steps older than the newest `keep_steps` complete steps, and
  /// leftovers of interrupted writes. Returns how many directories it removed.
  size_t prune(const std::string& job);
  /// Removes every piece of `job` (the job was deleted).
  void forget(const std::string& job);
  /// The jobs here (each a directory of pieces: a job id, or a shipped bundle's
  /// `ship-<sha>`) of which nothing was written (or touched) for at least `age`: the
  /// candidates for removal once no job refers to them (docs/checkpoints.md, "Collection").
  std::vector<std::string> idle_jobs(std::chrono::milliseconds age) const;
  /// Marks `job` as used now (its directory's time): not idle for another `age`.
  void touch(const std::string& job);
  /// Bytes and pieces held, over every job.
  std::pair<uint64_t, size_t> usage() const;

private:
  std::string job_dir(const std::string& job) const;
  expected<manifest> seal(manifest m, const std::string& tmp);
  std::string root_;
  uint64_t max_bytes_;
  int keep_steps_;
};

} // namespace monkey::ckpt
