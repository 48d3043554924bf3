// SPDX-License-Identifier: Apache-2.0
#include "runtime/ids.hpp"

#include <algorithm>
#include <cctype>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <sys/random.h>

namespace monkey {

namespace {

constexpr char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

int decode_char(char c) {
  if (c >= 'a' && c <= 'z')
    c = static_cast<char>(c - 'a' + 'A');
  if (c == 'O')
    c = '0';
  if (c == 'I' || c == 'L')
    c = '1';
  for (int i = 0; i < 32; ++i)
    if (crockford[i] == c)
      return i;
  return -1;
}

} // namespace

std::string random_key() {
  unsigned char raw[16];
  random_bytes(raw, sizeof(raw));
  return to_hex(std::string(reinterpret_cast<const char*>(raw), sizeof(raw)));
}

std::string to_hex(const std::string& raw) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0)
    return {};
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return {};
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

void random_bytes(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    auto got = getrandom(p, n, 0);
    if (got <= 0)
      continue;
    p += got;
    n -= static_cast<size_t>(got);
  }
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

job_id job_id::generate() {
  // Monotonic within a process: same millisecond → increment the random part, so ids
  // sort in creation order (as the ULID spec recommends).
  static std::mutex mtx;
  static uint64_t last_ms = 0;
  static job_id last;
  std::lock_guard<std::mutex> guard{mtx};
  auto ms = static_cast<uint64_t>(now_ms()) & 0xFFFFFFFFFFFFull;
  job_id id;
  if (ms == last_ms) {
    id = last;
    if (++id.lo == 0)
      ++id.hi;
  } else {
    uint64_t r[2];
    random_bytes(r, sizeof(r));
    id.hi = (ms << 16) | (r[0] & 0xFFFF);
    id.lo = r[1];
    last_ms = ms;
  }
  last = id;
  return id;
}

std::string job_id::str() const {
  // 128 bits as 26 base-32 digits: the first digit holds the top 3 bits.
  std::string out(26, '0');
  uint64_t h = hi, l = lo;
  for (int i = 25; i >= 0; --i) {
    out[static_cast<size_t>(i)] = crockford[l & 31];
    l = (l >> 5) | (h << 59);
    h >>= 5;
  }
  return out;
}

std::string job_id::short_str() const {
  return str().substr(16);
}

std::optional<job_id> job_id::parse(std::string_view text) {
  if (text.size() != 26)
    return std::nullopt;
  uint64_t h = 0, l = 0;
  for (size_t i = 0; i < 26; ++i) {
    int v = decode_char(text[i]);
    if (v < 0 || (i == 0 && v > 7))
      return std::nullopt;
    h = (h << 5) | (l >> 59);
    l = (l << 5) | static_cast<uint64_t>(v);
  }
  return job_id{h, l};
}

node_id node_id::generate() {
  node_id id;
  while (id.value == 0)
    random_bytes(&id.value, sizeof(id.value));
  return id;
}

std::string node_id::str() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

std::optional<node_id> node_id::parse(std::string_view text) {
  if (text.size() != 16)
    return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return std::nullopt;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return node_id{v};
}

std::string attempt_id::str() const {
  return node.str().substr(0, 8) + "." + std::to_string(incarnation) + "." + std::to_string(seq);
}

id_matcher::id_matcher(std::string text, std::string what)
  : text_(std::move(text)), what_(std::move(what)) {
  full_ = job_id::parse(text_);
  for (char c : text_)
    upper_ += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
}

void id_matcher::offer(const job_id& id) {
  if (full_) {
    if (id == *full_ && hits_.empty())
      hits_.push_back(id);
    return;
  }
  if (upper_.size() < 6 || upper_.size() > 26)
    return;
  auto s = id.str();
  if (s.compare(s.size() - upper_.size(), upper_.size(), upper_) == 0
      && std::find(hits_.begin(), hits_.end(), id) == hits_.end())
    hits_.push_back(id);
}

std::optional<job_id> id_matcher::match() const {
  if (hits_.size() == 1)
    return hits_.front();
  return std::nullopt;
}

std::string id_matcher::problem() const {
  if (hits_.size() == 1)
    return {};
  if (!full_ && upper_.size() < 6)
    return "'" + text_ + "' is too short to name a " + what_ + ": give at least 6 characters";
  if (hits_.empty())
    return "no " + what_ + " " + text_;
  std::string list;
  for (size_t i = 0; i < hits_.size() && i < 5; ++i)
    list += (i ? ", " : "") + hits_[i].str();
  if (hits_.size() > 5)
    list += ", ...";
  return "'" + text_ + "' is ambiguous: " + std::to_string(hits_.size()) + " " + what_
         + "s end with it (" + list + "); give more characters";
}

} // namespace monkey
