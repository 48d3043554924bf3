// SPDX-License-Identifier: Apache-2.0
#pragma once
// Waiting across processes on a word of shared memory (transport.cpp's rings, the call
// slots of comm_direct.cpp): a futex, woken only when a waiter said it sleeps, and the
// pause instruction that polling loops spin on. Plain C++ (Linux).

#include <atomic>
#include <chrono>
#include <cstdint>

namespace monkey::dp {

/// Sleeps while `*word` is `seen`, at most `wait` (a shared futex: any process mapping it).
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::microseconds wait);
/// Wakes every sleeper on `word`.
void futex_wake(std::atomic<uint32_t>* word);
/// Bumps `seq` and wakes its sleepers when `waiters` counts any (no system call otherwise).
void notify(std::atomic<uint32_t>& seq, std::atomic<uint32_t>& waiters);

/// How many rounds of cpu_pause a waiter polls before it sleeps, when `ranks` processes of
/// one machine take part (MONKEY_DP_SPIN overrides). While each has a core of its own, 50000
/// (0.8 ms here): longer than the peer takes to answer, since a waiter woken from the futex
/// pays tens of microseconds on these VMs and is often placed on its waker's core. When they
/// outnumber the cores, `crowded`: a poller holds a core that the rank it waits for needs.
int poll_rounds(int ranks, int crowded);

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

} // namespace monkey::dp
