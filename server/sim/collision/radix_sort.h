// A stable sort of items by an unsigned integer key, for the collision stage's per-step sorts.
#ifndef PITLANE_SERVER_SIM_COLLISION_RADIX_SORT_H_
#define PITLANE_SERVER_SIM_COLLISION_RADIX_SORT_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pitlane::sim {

// Sorts `items` by key(item), which must be below 2^key_bits, keeping the order of items with
// equal keys. An LSD radix sort with 11-bit digits (the counters, 8 KiB, stay in L1) that
// skips digits equal in every key; below 256 items a comparison sort (a radix pass costs its
// 2048 counters whatever the count). `scratch` is reused memory.
template <typename T, typename KeyOf>
void StableSortByKey(std::vector<T>& items, int key_bits, KeyOf key, std::vector<T>& scratch) {
  constexpr int kDigitBits = 11;
  constexpr std::uint64_t kDigitMask = (std::uint64_t{1} << kDigitBits) - 1;
  constexpr std::size_t kComparisonSortBelow = 256;
  constexpr std::size_t kInsertionSortBelow = 32;
  const std::size_t count = items.size();
  if (count < kInsertionSortBelow) {
    // A few items (a small world's every tick): insertion sort, stable, and unlike
    // std::stable_sort without a temporary buffer to allocate.
    for (std::size_t i = 1; i < count; ++i) {
      T item = items[i];
      const auto item_key = key(item);
      std::size_t j = i;
      for (; j > 0 && item_key < key(items[j - 1]); --j) items[j] = items[j - 1];
      items[j] = item;
    }
    return;
  }
  if (count < kComparisonSortBelow) {
    std::stable_sort(items.begin(), items.end(),
                     [&key](const T& a, const T& b) { return key(a) < key(b); });
    return;
  }
  scratch.resize(count);
  for (int shift = 0; shift < key_bits; shift += kDigitBits) {
    std::array<std::uint32_t, kDigitMask + 1> offsets{};
    for (const T& item : items) ++offsets[(key(item) >> shift) & kDigitMask];
    if (offsets[(key(items[0]) >> shift) & kDigitMask] == count) continue;
    std::uint32_t running = 0;
    for (std::uint32_t& offset : offsets) running += std::exchange(offset, running);
    for (const T& item : items) scratch[offsets[(key(item) >> shift) & kDigitMask]++] = item;
    items.swap(scratch);
  }
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_COLLISION_RADIX_SORT_H_
