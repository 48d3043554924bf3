// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/arena.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace monkey::dp {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

constexpr uint64_t align = 4096; // buffers start on their own pages

uint64_t round_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

} // namespace

uint64_t arena::configured_bytes() {
  static const uint64_t bytes = [] {
    auto* v = std::getenv("MONKEY_DP_ARENA_MB");
    return (v ? std::strtoull(v, nullptr, 10) : 1024) << 20;
  }();
  return bytes;
}

expected<std::shared_ptr<arena>> arena::create(uint64_t bytes) {
  bytes = round_up(bytes, align);
  if (bytes <= arena_slot_bytes)
    return failure{"data plane: an arena needs more than " + std::to_string(arena_slot_bytes)
                   + " bytes"};
  std::shared_ptr<arena> a(new arena());
  a->fd_ = static_cast<int>(
    ::syscall(SYS_memfd_create, "monkey-dp-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (a->fd_ < 0 || ::ftruncate(a->fd_, static_cast<off_t>(bytes)) != 0
      || ::fcntl(a->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return failure{"data plane: creating the shared arena: " + errno_text()};
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd_, 0);
  if (p == MAP_FAILED)
    return failure{"data plane: mapping the shared arena: " + errno_text()};
  a->base_ = static_cast<uint8_t*>(p);
  a->bytes_ = bytes;
  for (int32_t r = 0; r < max_slot_ranks; ++r)
    new (a->base_ + r * sizeof(call_slot)) call_slot{};
  auto first = round_up(arena_slot_bytes, align);
  a->free_[first] = bytes - first;
  return a;
}

arena::~arena() {
  if (base_)
    ::munmap(base_, bytes_);
  if (fd_ >= 0)
    ::close(fd_);
}

call_slot* arena::slot(int32_t rank) const {
  if (rank < 0 || rank >= max_slot_ranks)
    return nullptr;
  return reinterpret_cast<call_slot*>(base_) + rank;
}

expected<buffer> arena::alloc(dtype t, uint64_t count) {
  auto want = round_up(std::max<uint64_t>(count * dtype_size(t), 1), align);
  uint64_t at = 0;
  {
    std::lock_guard<std::mutex> g(m_);
    auto it = free_.begin();
    while (it != free_.end() && it->second < want)
      ++it;
    if (it == free_.end())
      return failure{"data plane: the shared arena has no " + std::to_string(want)
                     + " contiguous bytes left (MONKEY_DP_ARENA_MB sets its size, "
                     + std::to_string(bytes_ >> 20) + " MB now)"};
    at = it->first;
    auto left = it->second - want;
    free_.erase(it);
    if (left > 0)
      free_[at + want] = left;
  }
  auto* p = base_ + at;
  std::memset(p, 0, count * dtype_size(t));
  // The buffer keeps the arena alive; its last copy gives the range back.
  auto self = shared_from_this();
  std::shared_ptr<uint8_t> mem(p, [self, at, want](uint8_t*) { self->release(at, want); });
  return buffer(t, count, std::move(mem));
}

void arena::release(uint64_t offset, uint64_t bytes) {
  // Give the pages back to the system: a released buffer costs no memory.
  ::madvise(base_ + offset, bytes, MADV_REMOVE);
  std::lock_guard<std::mutex> g(m_);
  auto it = free_.emplace(offset, bytes).first;
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
      it = prev;
    }
  }
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
}

uint64_t arena::offset_of(const void* p, uint64_t bytes) const {
  auto* q = static_cast<const uint8_t*>(p);
  if (!q || q < base_ + arena_slot_bytes || q + bytes > base_ + bytes_)
    return not_registered;
  return static_cast<uint64_t>(q - base_);
}

expected<std::shared_ptr<uint8_t>> map_peer_arena(int fd, uint64_t& bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return failure{"data plane: the peer's arena: " + errno_text()};
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK))
    return failure{"data plane: the peer's arena is not sealed against shrinking"};
  bytes = static_cast<uint64_t>(st.st_size);
  if (bytes <= arena_slot_bytes)
    return failure{"data plane: the peer's arena is too small"};
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return failure{"data plane: mapping the peer's arena: " + errno_text()};
  auto n = bytes;
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [n](uint8_t* q) { ::munmap(q, n); });
}

} // namespace monkey::dp
