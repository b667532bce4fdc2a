// nccl_comm_test: the nccl communicator (comm/nccl_communicator.h) under `mpirun -np N`, one GPU
// per rank, bootstrapped through the mpi backend.
//
// Every rank runs one scenario (every dtype and reduce op, even, uneven and zero counts, aliased
// gathers, broadcast from every root, buffered sends in a ring and in an exchange with a message
// far beyond NCCL's buffers, splits with negative colors and repeated splits) on the nccl backend
// and, in-process, on a local world of N threads, and requires bitwise equal outputs and group
// names. Inputs are small integers, so every partial sum is exact and NCCL's reduction order
// cannot show. Then the failure paths: collective and point-to-point mismatches name both
// fingerprints, bad arguments throw before any communication.
// Exits 77 on every rank ("SKIP: ...") when the machine has fewer CUDA devices than ranks (NCCL
// refuses two ranks on one GPU). Prints one PASS / FAIL line per rank.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/mpi/mpirun_test_util.h"

namespace paradiff {
namespace {

using mpirun_test::Checker;
using mpirun_test::Outputs;

constexpr int64_t kBigMessage = int64_t{1} << 23;  // 32 MiB of floats: beyond NCCL's p2p buffers

// Integers in [-8, 8]: sums over 4 ranks are exact even in bf16 / fp16.
at::Tensor Input(int rank, int64_t n, at::ScalarType st, int salt) {
  const at::Tensor i = at::arange(n, at::kLong);
  return (at::remainder(i * 7 + rank * 3 + salt, 17) - 8).to(st);
}

Outputs Scenario(Communicator& c) {
  Outputs out;
  const int n = c.size(), r = c.rank();
  int salt = 0;
  std::vector<int64_t> uneven(n), even(n, 6);
  for (int k = 0; k < n; ++k) uneven[k] = k == 1 ? 0 : 2 * k + 3;
  for (at::ScalarType st : mpirun_test::kTypes) {
    const std::string ty = c10::toString(st);
    for (ReduceOp op : mpirun_test::kOps) {
      if (op == ReduceOp::kAvg && st == at::kLong) continue;
      for (int64_t numel : {0, 1, 33}) {
        at::Tensor t = Input(r, numel, st, ++salt);
        c.AllReduce(t, op);
        out.Add("all_reduce " + ty + " " + Name(op) + " numel=" + std::to_string(numel), t);
      }
      for (const auto* counts : {&even, &uneven}) {
        int64_t total = 0;
        for (int64_t k : *counts) total += k;
        at::Tensor piece = at::empty({(*counts)[r]}, at::TensorOptions().dtype(st));
        c.ReduceScatter(Input(r, total, st, ++salt), piece, *counts, op);
        out.Add("reduce_scatter " + ty + " " + Name(op) + (counts == &even ? " even" : " uneven"),
                piece);
      }
    }
    for (const auto* counts : {&even, &uneven}) {
      int64_t total = 0, offset = 0;
      for (int64_t k : *counts) total += k;
      for (int k = 0; k < r; ++k) offset += (*counts)[k];
      at::Tensor gathered = at::empty({total}, at::TensorOptions().dtype(st));
      c.AllGather(Input(r, (*counts)[r], st, ++salt), gathered, *counts);
      out.Add("all_gather " + ty, gathered);
      at::Tensor full = Input(r, total, st, ++salt);  // in place, as in ZeRO's gathers
      c.AllGather(full.narrow(0, offset, (*counts)[r]), full, *counts);
      out.Add("all_gather in place " + ty, full);
    }
    for (int root = 0; root < n; ++root) {
      at::Tensor b = Input(r, 9, st, ++salt);
      c.Broadcast(b, root);
      out.Add("broadcast " + ty + " root " + std::to_string(root), b);
    }
  }
  mpirun_test::RingScenario(c, &Input, kBigMessage, salt, out);
  if (n % 2 == 0) {  // pairs exchange a big message both ways
    const int peer = r ^ 1;
    c.Send(Input(r, kBigMessage, at::kFloat, ++salt), peer);
    at::Tensor got = at::empty({kBigMessage}, at::kFloat);
    c.Recv(got, peer);
    out.Add("exchange big", got);
  }
  mpirun_test::SplitScenario(c, &Input, salt, out);
  return out;
}

void CheckFailures(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  auto g = world.Split(0, r);
  if (n > 1) {
    mpirun_test::CollectiveMismatchScenario(*g, check);
    if (r < 2) {  // equal byte counts, different dtype: the header tells
      if (r == 0) g->Send(at::ones({4}, at::kInt), 1);
      at::Tensor recv = at::empty({4}, at::kFloat);
      if (r == 1)
        mpirun_test::ExpectMismatch(
            check, "send/recv mismatch", [&] { g->Recv(recv, 0); }, "dtype=int");
    }
  }
  bool invalid = false;
  try {
    g->Send(at::ones({2}), r);  // to itself
  } catch (const std::invalid_argument&) {
    invalid = true;
  }
  check.Expect(invalid, "Send to oneself must throw std::invalid_argument");
  invalid = false;
  try {
    at::Tensor s = at::ones({2}, at::kShort);
    g->AllReduce(s, ReduceOp::kSum);  // int16: NCCL has no such reduction
  } catch (const std::invalid_argument&) {
    invalid = true;
  }
  check.Expect(invalid, "an int16 reduction must throw std::invalid_argument");
  g->Barrier();  // still in step after all of the above
}

}  // namespace
}  // namespace paradiff

int main(int argc, char** argv) {
  using namespace paradiff;
  at::set_num_threads(1);
  MpiRuntime runtime(&argc, &argv);
  const int rank = runtime.world_rank(), size = runtime.world_size();
  std::string why;
  const int devices = cuda::DeviceCount(&why);
  if (devices < size) {  // every rank sees the same machine, so every rank skips
    if (rank == 0)
      std::cout << "SKIP: "
                << (devices == 0
                        ? "no CUDA device (" + why + ")"
                        : std::to_string(devices) + " CUDA device(s) for " + std::to_string(size) +
                              " ranks (NCCL needs one GPU per rank)")
                << std::endl;
    return 77;
  }
  Checker check(rank);
  {
    auto mpi_world = runtime.World(MpiOptions{});
    NcclOptions options;
    options.timeout = std::chrono::seconds(120);
    auto world = NcclWorld(*mpi_world, options);
    check.Expect(world->name() == "world" && world->rank() == rank && world->size() == size,
                 "world name / rank / size");
    try {
      mpirun_test::CompareWithLocal(*world, "nccl", std::chrono::seconds(120), &Scenario, check);
      CheckFailures(*world, check);
    } catch (const std::exception& e) {
      check.Expect(false, std::string("unexpected exception: ") + e.what());
    }
  }
  std::cout << (check.failures() == 0 ? "PASS" : "FAIL") << ": rank " << rank << ": "
            << check.checks() << " checks, " << check.failures() << " failures" << std::endl;
  return check.failures() == 0 ? 0 : 1;
}
