// Waiting for another rank without burning a core: an MPI rank blocked in MPI_Bcast or
// MPI_Probe busy-polls (Open MPI spins on its progress engine), so a serve worker or a prefill
// rank would keep a core at 100% while the server is idle. poll_until spins for kSpin (steps
// of a busy server follow each other within it, so they pay nothing), then sleeps kNap between
// polls (an idle rank then costs ~0% CPU and answers within ~kNap).
#pragma once

#include <chrono>
#include <thread>

namespace peregrine {

/// Calls `done()` until it returns true: back to back for the first 2 ms, then every 100 µs.
template <typename Done>
void poll_until(Done done) {
  constexpr auto kSpin = std::chrono::milliseconds(2);
  constexpr auto kNap = std::chrono::microseconds(100);
  const auto start = std::chrono::steady_clock::now();
  while (!done()) {
    if (std::chrono::steady_clock::now() - start > kSpin) std::this_thread::sleep_for(kNap);
  }
}

}  // namespace peregrine
