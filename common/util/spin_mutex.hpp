// A mutex for short critical sections taken by many threads at a high rate: it spins for tens of
// microseconds before it sleeps. A contended std::mutex puts the waiter to sleep at once, and on a
// virtual machine waking a sleeping thread on an idle core costs tens of microseconds: the leaf's
// scheduler, whose lock is held for microseconds at a time, had its CPU threads waiting for it
// 47-117 µs a query on the H100 host at 36-52k queries/s. The sleeping path is Drepper's futex
// mutex ("Futexes Are Tricky", mutex 2) over C++20 atomic wait/notify. Meets Lockable:
// std::unique_lock works with it.
#pragma once
#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace warp {

class SpinMutex {
 public:
  void lock() {
    for (int i = 0; i < kSpins; ++i) {
      if (state_.load(std::memory_order_relaxed) == kFree && try_lock()) return;
      pause();
    }
    // Sleep until free; whoever takes the lock this way marks it contended, so that its unlock
    // wakes the next sleeper.
    while (state_.exchange(kContended, std::memory_order_acquire) != kFree)
      state_.wait(kContended, std::memory_order_relaxed);
  }
  // lock(), but while spinning it leaves the mutex to the threads counted in `ahead` (takers of
  // a higher priority waiting for it); once it sleeps it competes like any other.
  void lock_behind(const std::atomic<int>& ahead) {
    for (int i = 0; i < kSpins; ++i) {
      if (ahead.load(std::memory_order_relaxed) == 0 && state_.load(std::memory_order_relaxed) == kFree && try_lock())
        return;
      pause();
    }
    while (state_.exchange(kContended, std::memory_order_acquire) != kFree)
      state_.wait(kContended, std::memory_order_relaxed);
  }
  bool try_lock() {
    int expected = kFree;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kContended) state_.notify_one();
  }

 private:
  static constexpr int kFree = 0, kLocked = 1, kContended = 2;  // kContended: locked, maybe sleepers
  // Pause instructions before sleeping: tens of µs on current x86 cores (a pause is ~40-140
  // cycles). Waking a sleeper on the H100 host's virtual machine costs more than the scheduler's
  // lock is ever held; with 256 (~10 µs) its CPU threads waited 16-20 µs a query for it at
  // 74-85k mixed queries/s, with 4,096 3-10 µs, and the p99 at 85k fell from 24-90 ms to 3-7 ms
  // (tests/bench/results/scheduler.md).
  static constexpr int kSpins = 4096;
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  std::atomic<int> state_{kFree};
};

}  // namespace warp
