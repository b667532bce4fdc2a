// Helpers of the communicator tests that run one process per rank under mpirun (no gtest):
// tests/mpi/mpi_comm_test.cpp (mpi backend) and tests/gpu/nccl_comm_test.cpp (nccl backend).
// Each rank runs a scenario on the backend under test and, in-process, on a local world of the
// same size (comm/local_communicator.h, the serial reference), counts its checks in a Checker and
// prints one "FAIL: rank R: ..." line per failed check.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/local_communicator.h"

namespace paradiff {
namespace mpirun_test {

// What one rank's scenario produced, in call order.
struct Outputs {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::vector<std::string> notes;  // group names, ranks and sizes of split results

  void Add(std::string what, at::Tensor t) { tensors.emplace_back(std::move(what), std::move(t)); }
};

// Counts one rank's checks; prints each failure with the rank.
class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}
  void Expect(bool ok, const std::string& what) {
    ++checks_;
    if (ok) return;
    ++failures_;
    std::cout << "FAIL: rank " << rank_ << ": " << what << std::endl;
  }
  int checks() const { return checks_; }
  int failures() const { return failures_; }

 private:
  int rank_, checks_ = 0, failures_ = 0;
};

// Same dtype, shape and bytes.
inline bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

inline const at::ScalarType kTypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf,
                                        at::kLong};
inline const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

// Rank `rank`'s deterministic input of n elements; `salt` tells the calls apart.
using InputFn = at::Tensor (*)(int rank, int64_t n, at::ScalarType st, int salt);

// Point-to-point in a ring: every rank sends a small bf16 and a float message of `big` elements to
// the next rank before it receives from the previous one (Send must be buffered). No-op for one
// rank.
inline void RingScenario(Communicator& c, InputFn input, int64_t big, int& salt, Outputs& out) {
  const int n = c.size(), r = c.rank();
  if (n == 1) return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  c.Send(input(r, 5, at::kBFloat16, ++salt), next);
  c.Send(input(r, big, at::kFloat, ++salt), next);
  at::Tensor small = at::empty({5}, at::kBFloat16), large = at::empty({big}, at::kFloat);
  c.Recv(small, prev);
  c.Recv(large, prev);
  out.Add("ring small", small);
  out.Add("ring big", large);
}

// The scenarios' last part: a barrier, then three splits of `c` (by parity with reversed keys; into
// halves, one color negative; a third split, whose name gets the suffix ".2"), a bf16 all-reduce in
// each, and a split of the parity group. Group names, ranks and sizes go to out.notes.
inline void SplitScenario(Communicator& c, InputFn input, int& salt, Outputs& out) {
  const int n = c.size(), r = c.rank();
  c.Barrier();
  auto parity = c.Split(r % 2, n - r);
  auto halves = c.Split(r < n / 2 ? -5 : 7, 0);
  auto again = c.Split(0, r);
  for (auto* g : {parity.get(), halves.get(), again.get()}) {
    out.notes.push_back(g->name() + " rank=" + std::to_string(g->rank()) +
                        " size=" + std::to_string(g->size()));
    at::Tensor t = input(r, 10, at::kBFloat16, ++salt);
    g->AllReduce(t, ReduceOp::kSum);
    out.Add("split all_reduce in " + g->name(), t);
  }
  auto nested = parity->Split(0, 0);
  out.notes.push_back(nested->name() + " rank=" + std::to_string(nested->rank()));
}

// Runs `scenario` on `world` (the `backend` under test) and on a local world of the same size,
// and requires this rank's outputs and notes to equal the local backend's bit for bit.
inline void CompareWithLocal(Communicator& world, const std::string& backend,
                             std::chrono::milliseconds local_timeout,
                             Outputs (*scenario)(Communicator&), Checker& check) {
  const int n = world.size(), r = world.rank();
  const Outputs got = scenario(world);
  std::vector<Outputs> local(n);
  const auto results =
      RunLocalRanks(n, local_timeout, [&](Communicator& c) { local[c.rank()] = scenario(c); });
  check.Expect(PrimaryErrorRank(results) < 0, "the local reference run failed");
  const Outputs& want = local[r];
  check.Expect(got.tensors.size() == want.tensors.size(), "number of outputs differs");
  for (size_t i = 0; i < got.tensors.size() && i < want.tensors.size(); ++i) {
    std::ostringstream detail;
    if (!SameBits(got.tensors[i].second, want.tensors[i].second))
      detail << "\n  " << backend << ": "
             << got.tensors[i].second.reshape({-1}).slice(0, 0, 6).to(at::kDouble) << "\n  local: "
             << want.tensors[i].second.reshape({-1}).slice(0, 0, 6).to(at::kDouble);
    check.Expect(detail.str().empty(),
                 got.tensors[i].first + " differs from the local backend" + detail.str());
  }
  check.Expect(got.notes == want.notes, "split group names / ranks differ from the local backend");
}

// fn() must throw a CollectiveMismatch whose message names both fingerprints and `must_mention`.
template <typename Fn>
void ExpectMismatch(Checker& check, const std::string& what, Fn fn,
                    const std::string& must_mention) {
  try {
    fn();
    check.Expect(false, what + ": no CollectiveMismatch");
  } catch (const CollectiveMismatch& e) {
    const std::string msg = e.what();
    check.Expect(msg.find(must_mention) != std::string::npos &&
                     msg.find(e.a().ToString()) != std::string::npos &&
                     msg.find(e.b().ToString()) != std::string::npos,
                 what + ": message does not name both fingerprints: " + msg);
  }
}

// Collective mismatches in `g` (no-op for one rank): the last rank all-reduces 5 elements where the
// others all-reduce 4, then rank 0 all-reduces where the others broadcast. Every rank must throw a
// CollectiveMismatch that names both calls.
inline void CollectiveMismatchScenario(Communicator& g, Checker& check) {
  const int n = g.size(), r = g.rank();
  if (n == 1) return;
  at::Tensor t = at::ones({r == n - 1 ? 5 : 4});
  ExpectMismatch(
      check, "numel mismatch", [&] { g.AllReduce(t, ReduceOp::kSum); }, "numel=5");
  at::Tensor u = at::ones({4});
  ExpectMismatch(
      check, "op mismatch", [&] { r == 0 ? g.AllReduce(u, ReduceOp::kMax) : g.Broadcast(u, 0); },
      "broadcast");
}

}  // namespace mpirun_test
}  // namespace paradiff
