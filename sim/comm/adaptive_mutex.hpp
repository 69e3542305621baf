// A mutex that polls a little before it sleeps: the lock of the threads backend's mailboxes (threads_world.hpp).
//
// Why: a mailbox is locked for a few hundred nanoseconds at a time (a match; no copy is made under it),
// by its own rank and by the ranks sending to it, which on a 2-core machine are often running on the other core
// at that moment. A std::mutex that finds the lock held sleeps at once (futex wait), and its release then costs
// the holder a wake-up system call and the waiter a context switch back: microseconds, where waiting out the holder
// takes nanoseconds. glibc's adaptive mutex (PTHREAD_MUTEX_ADAPTIVE_NP) spins up to its tunable
// glibc.pthread.mutex_spin_count (100 by default) before it sleeps, so a holder that was preempted still costs only
// that spin. Measured: docs/performance/comm.md, "The mailbox lock".
//
// Satisfies Lockable, so std::lock_guard and std::unique_lock take it.
#pragma once
#include <pthread.h>

namespace cpsim {

class AdaptiveMutex {
 public:
  AdaptiveMutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&m_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~AdaptiveMutex() { pthread_mutex_destroy(&m_); }
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;

  void lock() { pthread_mutex_lock(&m_); }
  void unlock() { pthread_mutex_unlock(&m_); }
  bool try_lock() { return pthread_mutex_trylock(&m_) == 0; }

 private:
  pthread_mutex_t m_;
};

}  // namespace cpsim
