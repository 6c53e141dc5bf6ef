// A count known only at run time turned into a template argument, so a kernel's register tile
// (tokens, read streams) is sized at compile time: one branch per supported count.
#pragma once

#include <utility>

namespace peregrine {

/// Calls f.template operator()<k>() for the one k in [kFirst, kLast] equal to n and returns
/// true; no call and false when n is outside the range. kFirst ≤ kLast; n's type may differ in
/// signedness from the bounds' (compared after conversion to N).
template <auto kFirst, decltype(kFirst) kLast, class N, class F>
inline bool dispatch_count(N n, F&& f) {
  using K = decltype(kFirst);
  static_assert(kFirst <= kLast);
  return [&]<K... kOffset>(std::integer_sequence<K, kOffset...>) {
    return ((n == static_cast<N>(kFirst + kOffset) && (f.template operator()<kFirst + kOffset>(), true)) || ...);
  }(std::make_integer_sequence<K, kLast - kFirst + 1>());
}

}  // namespace peregrine
