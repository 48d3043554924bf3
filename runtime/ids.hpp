// SPDX-License-Identifier: Apache-2.0
#pragma once
// Identifiers shared by every component: 128-bit job ids (ULID), node ids and attempt ids.
// Plain C++: no CAF, no msgpack.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace monkey {

/// A global job id: a ULID (48-bit millisecond time, 80 random bits), printed as 26
/// Crockford base-32 characters; `short_str()` is the last 10 (50 random bits).
struct job_id {
  uint64_t hi = 0;
  uint64_t lo = 0;

  static job_id generate();
  static std::optional<job_id> parse(std::string_view text);
  std::string str() const;
  std::string short_str() const;
  bool empty() const { return hi == 0 && lo == 0; }
  uint64_t millis() const { return hi >> 16; }
  friend bool operator==(const job_id& a, const job_id& b) { return a.hi == b.hi && a.lo == b.lo; }
  friend bool operator!=(const job_id& a, const job_id& b) { return !(a == b); }
  friend bool operator<(const job_id& a, const job_id& b) {
    return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
  }
};

/// A node's identity, random and persisted in its data directory; printed as 16 hex digits.
struct node_id {
  uint64_t value = 0;
  static node_id generate();
  static std::optional<node_id> parse(std::string_view text);
  std::string str() const;
  friend bool operator==(node_id a, node_id b) { return a.value == b.value; }
  friend bool operator!=(node_id a, node_id b) { return a.value != b.value; }
};

/// One attempt at running a job: the node, that node's incarnation (bumped at every start
/// of the runtime) and a per-node sequence number. Printed as `node.incarnation.seq`.
struct attempt_id {
  node_id node;
  uint32_t incarnation = 0;
  uint64_t seq = 0;
  std::string str() const;
  friend bool operator==(const attempt_id& a, const attempt_id& b) {
    return a.node == b.node && a.incarnation == b.incarnation && a.seq == b.seq;
  }
};

/// Finds the one id that a user's text names among the ids offered to it: a full id, or a
/// unique suffix of at least 6 characters (case-insensitive). One resolver for jobs, job
/// replicas and task batches alike:
///   id_matcher m(text, "job"); for (auto& id : ids) m.offer(id); auto id = m.result();
class id_matcher {
public:
  id_matcher(std::string text, std::string what);
  void offer(const job_id& id);
  /// The id, or "no job X", "'X' is too short ...", "'X' is ambiguous: N jobs end with it
  /// (A, B, ...)".
  std::optional<job_id> match() const;
  std::string problem() const;
  /// Several ids matched (the text is ambiguous).
  bool ambiguous() const { return hits_.size() > 1; }
  /// Neither a full id nor a suffix of at least 6 characters.
  bool too_short() const { return !full_ && upper_.size() < 6; }
  /// Every id the text named (for a suffix: all that end with it).
  const std::vector<job_id>& matches() const { return hits_; }
  const std::string& text() const { return text_; }

private:
  std::string text_, upper_, what_;
  std::optional<job_id> full_;
  std::vector<job_id> hits_;
};

/// Fills `n` bytes from the kernel's random source.
void random_bytes(void* out, size_t n);

/// 16 random bytes as 32 lower-case hex digits: a client key for an idempotent submit.
std::string random_key();

/// Lower-case hex of raw bytes (keys, digests).
std::string to_hex(const std::string& raw);
/// The bytes of lower-case hex digits; "" when `hex` is not such (odd length, other
/// characters).
std::string from_hex(const std::string& hex);

/// Milliseconds since the Unix epoch.
int64_t now_ms();

} // namespace monkey

template <>
struct std::hash<monkey::job_id> {
  size_t operator()(const monkey::job_id& x) const noexcept { return x.hi * 31 + x.lo; }
};
