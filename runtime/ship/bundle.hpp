// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shipped code and data (docs/shipping.md): a job's working directory or a data folder,
// packed into one *bundle* file that is named by its SHA-256, stored and replicated like a
// checkpoint piece, and unpacked in a scratch directory on the node that runs the job.
//
// Bundle format (little-endian), deterministic for the same files (sorted paths, no times,
// no owners, only the executable bit of the mode):
//
//   "MKYSHIP1"                                   magic, 8 bytes
//   { 'F' u8 exec  u32 path_len  path  u64 size  bytes }*   one record per plain file
//   'E'                                          the end
//
// Paths are relative, '/'-separated, without "." or ".." components; unpacking refuses
// anything else (and a truncated or trailing-garbage bundle) with an error naming it.
// Plain C++: no CAF (bundle.test.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/expected.hpp"

namespace monkey::ship {

/// One plain file to pack.
struct file_item {
  std::string rel;  ///< its path in the bundle
  std::string abs;  ///< where it is read from
  bool exec = false;
  uint64_t size = 0;
};

/// What a bundle will hold.
struct listing {
  std::string root;    ///< the directory packed (a git tree's top level, or the directory)
  std::string cwd_rel; ///< the given directory relative to root ("" when it is root)
  std::string how;     ///< "git tree" or "directory"
  std::vector<file_item> files; ///< sorted by rel
  uint64_t bytes = 0;
  std::vector<std::string> skipped; ///< not packed, and why ("link x -> y: a directory")
};

/// The working directory `dir` as it would be shipped: in a git tree, the whole tree's
/// tracked and untracked-but-not-ignored files as they are on disk now (uncommitted changes
/// included; `cwd_rel` says where `dir` is in it); otherwise every file under `dir`. Fails,
/// naming the limit and the largest files, when the files exceed `max_bytes`.
expected<listing> list_workdir(const std::string& dir, uint64_t max_bytes);

/// Every plain file under `dir` (symbolic links to files followed, to directories skipped
/// and noted), or the file `dir` itself; fails over `max_bytes` as above.
expected<listing> list_dir(const std::string& dir, uint64_t max_bytes);

struct packed {
  std::string sha256; ///< of the whole bundle file, hex
  uint64_t bytes = 0; ///< the bundle's size
  size_t files = 0;
};

/// Writes the bundle of `l` to `out` (its SHA-256 computed on the way). A file that changed
/// size while it was read is a failure naming it.
expected<packed> pack(const listing& l, const std::string& out);

/// Unpacks the bundle `path` under `dest` (made if missing); the number of files written.
expected<size_t> unpack(const std::string& path, const std::string& dest);

/// Whether `rel` may name a file in a bundle (relative, no empty, "." or ".." parts, no NUL).
bool safe_path(const std::string& rel);

/// "12.3 MB" for messages.
std::string human_bytes(uint64_t n);

} // namespace monkey::ship
