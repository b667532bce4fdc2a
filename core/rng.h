// Counter-based randomness. Every random value in paradiff is a pure function of an explicit seed,
// a stream name and an index, so any rank can generate exactly its own slice of a logical tensor
// (see Note [Sharded generation]) and every run is reproducible from the seed its report prints.
//
// Note [Sharded generation]: parameters and data are functions of (seed, tensor name, global
// element index). A shard of any layout is produced by evaluating the same function on its global
// indices, so all layouts see the same logical model and the reference needs no knowledge of any
// layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace paradiff {

// splitmix64 finalizer: a bijective 64-bit mixer with full avalanche.
constexpr uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// FNV-1a, stable across platforms and runs (std::hash is not).
constexpr uint64_t HashName(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ULL;
  }
  return h;
}

// A stream of values addressed by index: Bits(i) is the same on every rank and every run.
class CounterStream {
 public:
  CounterStream(uint64_t seed, std::string_view name) : key_(Mix64(seed ^ Mix64(HashName(name)))) {}
  CounterStream(uint64_t seed, std::string_view name, uint64_t sub)
      : key_(Mix64(Mix64(seed ^ Mix64(HashName(name))) ^ Mix64(sub + 0x51ED27ULL))) {}

  uint64_t Bits(uint64_t index) const { return Mix64(key_ ^ Mix64(index)); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform(uint64_t index) const {
    return static_cast<double>(Bits(index) >> 11) * (1.0 / 9007199254740992.0);
  }
  // Uniform integer in [0, n).
  uint64_t Below(uint64_t index, uint64_t n) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Bits(index)) * n) >> 64);
  }
  // Standard normal by Box-Muller over two independent sub-indices.
  double Normal(uint64_t index) const {
    double u1 = static_cast<double>((Bits(2 * index) >> 11) + 1) * (1.0 / 9007199254740993.0);
    double u2 = Uniform(2 * index + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t key_;
};

// Sequential generator for search decisions (fuzzer, minimizer). Same seed, same sequence.
class SeqRng {
 public:
  explicit SeqRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_++ * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL); }
  uint64_t Below(uint64_t n) {
    return n == 0 ? 0 : static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  int64_t Range(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo + 1)));
  }
  bool Chance(double p) {
    return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0) < p;
  }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace paradiff
