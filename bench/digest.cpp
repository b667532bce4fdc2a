// Tool for performance work (not a figure): prints, per generated config (bench/bench_common.h
// GeneratedConfigs, the small list's seed), FNV-1a digests of the engine's assembled tensors, of
// both reference runs and of every numeric comparison (error, bound, reference error, index), and
// the verdict. An optimization of the engine, the reference or the oracles must leave this output
// unchanged: run it before and after and diff. Under valgrind the digests differ from a native
// run (torch picks other CPU kernels there), so compare like with like.
// Usage: bench_digest [n=24]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>

#include "bench/bench_common.h"
#include "core/watchdog.h"
#include "kernels/engine.h"
#include "oracles/assemble.h"
#include "oracles/check.h"
#include "oracles/reference.h"

namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ULL;

uint64_t Fnv(uint64_t h, const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

uint64_t Fnv(uint64_t h, const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return Fnv(h, c.data_ptr(), c.numel() * c.element_size());
}

uint64_t Fnv(uint64_t h, double v) { return Fnv(h, &v, sizeof v); }

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const int n = argc > 1 ? std::atoi(argv[1]) : paradiff::bench::kSmallListSize;
  const auto list = paradiff::bench::GeneratedConfigs(paradiff::bench::kSmallListSeed, n);
  for (size_t i = 0; i < list.size(); ++i) {
    const paradiff::Config& cfg = list[i];
    const auto eng = paradiff::RunEngine(cfg, paradiff::kDefaultCollectiveTimeout);
    uint64_t assembly = kFnvOffset, reference = kFnvOffset, compare = kFnvOffset;
    if (eng.ok)
      for (const auto& s : paradiff::AssembleTensors(cfg, eng.obs).steps) {
        assembly = Fnv(Fnv(assembly, s.loss), s.grad_norm);
        for (const auto& [key, t] : s.tensors)
          assembly = Fnv(Fnv(assembly, key.data(), key.size()), t);
      }
    const paradiff::RefPair ref = paradiff::RunReferencePair(cfg, paradiff::BuiltInReduction());
    for (const auto* run : {&ref.truth, &ref.same})
      for (const auto& s : run->steps) {
        reference = Fnv(Fnv(reference, s.loss), s.grad_norm);
        for (const auto& [key, t] : s.tensors)
          reference = Fnv(Fnv(reference, key.data(), key.size()), t);
      }
    const auto res = paradiff::CheckRun(cfg, paradiff::CheckOptions{});
    for (const auto& c : res.comparisons)
      compare =
          Fnv(Fnv(Fnv(Fnv(compare, c.error), c.bound), c.ref_error), static_cast<double>(c.index));
    std::printf("%zu engine_ok=%d assembly=%016llx reference=%016llx compare=%016llx verdict=%s\n",
                i, eng.ok, static_cast<unsigned long long>(assembly),
                static_cast<unsigned long long>(reference),
                static_cast<unsigned long long>(compare), res.verdict.Signature().c_str());
  }
  return 0;
}
