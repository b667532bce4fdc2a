// mpi_comm_test: the mpi communicator (comm/mpi_communicator.h) under `mpirun -np N`.
//
// Every rank runs one scenario of collectives (every dtype and reduce op, uneven and zero counts,
// aliased in-place gathers, buffered send/recv in a ring with a large message, splits with
// negative colors and repeated splits) on the mpi backend and, in-process, on a local world of N
// threads (comm/local_communicator.h), and requires its own outputs and group names to be
// bitwise equal: the local backend is the serial reference (see Note [MPI reduction order]). Then
// it checks the failure paths (collective and point-to-point mismatches name both fingerprints, bad
// arguments throw before any communication) and the native reduction mode (within a tolerance of
// the exact result, identical on every rank). Prints one "PASS"/"FAIL" line per rank; exits 0 only
// when every rank passed.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "tests/mpi/mpirun_test_util.h"

namespace paradiff {
namespace {

using mpirun_test::Checker;
using mpirun_test::Outputs;

constexpr int64_t kBigMessage = int64_t{1} << 18;  // floats: beyond Open MPI's eager limit

// Values of mixed magnitude, so that the reduction order shows in the low bits.
at::Tensor Input(int rank, int64_t n, at::ScalarType st, int salt) {
  const at::Tensor i = at::arange(n, at::kDouble);
  at::Tensor v = at::sin(i * 1.3 + rank * 0.7 + salt) * at::pow(10.0, at::fmod(i + rank, 4) - 1);
  if (!at::isFloatingType(st)) v = at::round(v * 100);
  return v.to(st);
}

std::vector<int64_t> UnevenCounts(int n) {
  std::vector<int64_t> counts(n);
  for (int k = 0; k < n; ++k) counts[k] = k == 1 ? 0 : 2 * k + 3;
  return counts;
}

Outputs Scenario(Communicator& c) {
  Outputs out;
  const int n = c.size(), r = c.rank();
  int salt = 0;
  const std::vector<int64_t> counts = UnevenCounts(n);
  int64_t total = 0;
  for (int64_t k : counts) total += k;
  for (at::ScalarType st : mpirun_test::kTypes) {
    const std::string ty = c10::toString(st);
    for (ReduceOp op : mpirun_test::kOps) {
      if (op == ReduceOp::kAvg && st == at::kLong) continue;
      for (int64_t numel : {0, 1, 7, 33}) {
        at::Tensor t = Input(r, numel, st, ++salt);
        c.AllReduce(t, op);
        out.Add("all_reduce " + ty + " " + Name(op) + " numel=" + std::to_string(numel), t);
      }
      at::Tensor m = Input(r, 12, st, ++salt).view({3, 4});
      c.AllReduce(m, op);
      out.Add("all_reduce 3x4 " + ty + " " + Name(op), m);
      at::Tensor piece = at::empty({counts[r]}, at::TensorOptions().dtype(st));
      c.ReduceScatter(Input(r, total, st, ++salt), piece, counts, op);
      out.Add("reduce_scatter " + ty + " " + Name(op), piece);
    }
    at::Tensor gathered = at::empty({total}, at::TensorOptions().dtype(st));
    c.AllGather(Input(r, counts[r], st, ++salt), gathered, counts);
    out.Add("all_gather " + ty, gathered);
    // In place: the shard lives inside the output, as in ZeRO's gathers.
    at::Tensor full = Input(r, total, st, ++salt);
    int64_t offset = 0;
    for (int k = 0; k < r; ++k) offset += counts[k];
    c.AllGather(full.narrow(0, offset, counts[r]), full, counts);
    out.Add("all_gather in place " + ty, full);
    at::Tensor b = Input(r, 9, st, ++salt);
    c.Broadcast(b, n - 1);
    out.Add("broadcast " + ty, b);
  }
  mpirun_test::RingScenario(c, &Input, kBigMessage, salt, out);
  mpirun_test::SplitScenario(c, &Input, salt, out);
  return out;
}

void CheckFailures(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  auto g = world.Split(0, r);
  mpirun_test::CollectiveMismatchScenario(*g, check);
  if (n >= 2 && r < 2) {
    if (r == 0) g->Send(at::ones({3}), 1);
    at::Tensor recv = at::empty({4});
    if (r == 1)
      mpirun_test::ExpectMismatch(
          check, "send/recv mismatch", [&] { g->Recv(recv, 0); }, "numel=3");
  }
  bool invalid = false;
  try {
    at::Tensor out = at::empty({2});
    g->AllGather(at::ones({1}), out, {1});  // counts.size() != group size (unless n == 1)
  } catch (const std::invalid_argument&) {
    invalid = true;
  }
  check.Expect(invalid == (n != 1),
               "bad counts must throw std::invalid_argument before communicating");
  g->Barrier();  // still in step after all of the above
}

void CheckNative(MpiRuntime& rt, Communicator& exact, Checker& check) {
  MpiOptions opts;
  opts.reduction = MpiReduction::kNative;
  auto native = rt.World(opts);
  const int n = native->size(), r = native->rank();
  int salt = 1000;
  for (at::ScalarType st : mpirun_test::kTypes) {
    for (ReduceOp op : mpirun_test::kOps) {
      if (op == ReduceOp::kAvg && st == at::kLong) continue;
      ++salt;
      at::Tensor t = Input(r, 33, st, salt);
      native->AllReduce(t, op);
      at::Tensor want = Input(0, 33, st, salt).to(at::kDouble), mag = want.abs();
      for (int k = 1; k < n; ++k) {
        const at::Tensor x = Input(k, 33, st, salt).to(at::kDouble);
        want = op == ReduceOp::kMax ? at::maximum(want, x) : want + x;
        mag = mag + x.abs();
      }
      if (op == ReduceOp::kAvg) want = want / n, mag = mag / n;
      const double eps = st == at::kBFloat16 ? 1.0 / 128
                         : st == at::kHalf   ? 1.0 / 1024
                         : st == at::kFloat  ? 1e-6
                         : st == at::kDouble ? 1e-15
                                             : 0.0;
      const bool close =
          ((t.to(at::kDouble) - want).abs() <= mag * (n * eps) + 1e-30).all().item<bool>();
      check.Expect(close, std::string("native all_reduce ") + c10::toString(st) + " " + Name(op) +
                              " is not within n*eps of the exact result");
      at::Tensor all = at::empty({n * t.numel()}, t.options());
      exact.AllGather(t, all, std::vector<int64_t>(n, t.numel()));
      check.Expect(mpirun_test::SameBits(all.view({n, -1})[0], t),
                   "native all_reduce results differ between ranks");
    }
  }
  at::Tensor piece = at::empty({UnevenCounts(n)[r]});
  int64_t total = 0;
  for (int64_t k : UnevenCounts(n)) total += k;
  native->ReduceScatter(at::full({total}, 0.5), piece, UnevenCounts(n), ReduceOp::kSum);
  check.Expect(piece.eq(0.5 * n).all().item<bool>(), "native reduce_scatter of 0.5s");
}

}  // namespace
}  // namespace paradiff

int main(int argc, char** argv) {
  using namespace paradiff;
  at::set_num_threads(1);
  MpiRuntime rt(&argc, &argv);
  Checker check(rt.world_rank());
  int64_t failures = 0;
  {
    auto world = rt.World(MpiOptions{});
    try {
      mpirun_test::CompareWithLocal(*world, "mpi", std::chrono::seconds(60), &Scenario, check);
      CheckFailures(*world, check);
      CheckNative(rt, *world, check);
    } catch (const std::exception& e) {
      std::cout << "FAIL: rank " << rt.world_rank() << ": unexpected exception: " << e.what()
                << std::endl;
      rt.Abort(1);
    }
    at::Tensor f = at::full({1}, static_cast<int64_t>(check.failures()), at::kLong);
    world->AllReduce(f, ReduceOp::kSum);
    failures = f.item<int64_t>();
  }
  std::cout << (failures == 0 ? "PASS" : "FAIL") << ": mpi_comm_test rank " << rt.world_rank()
            << " of " << rt.world_size() << ": " << check.checks() << " checks, "
            << check.failures() << " failed here, " << failures << " failed in the job"
            << std::endl;
  return failures == 0 ? 0 : 1;
}
