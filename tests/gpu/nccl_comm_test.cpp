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
#include <cstring>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "comm/local_communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "kernels/cuda/cuda_kernels.h"

namespace paradiff {
namespace {

constexpr int64_t kBigMessage = int64_t{1} << 23;  // 32 MiB of floats: beyond NCCL's p2p buffers

struct Outputs {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::vector<std::string> notes;
};

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

// Integers in [-8, 8]: sums over 4 ranks are exact even in bf16 / fp16.
at::Tensor Input(int rank, int64_t n, at::ScalarType st, int salt) {
  const at::Tensor i = at::arange(n, at::kLong);
  return (at::remainder(i * 7 + rank * 3 + salt, 17) - 8).to(st);
}

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

const at::ScalarType kTypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kLong};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

Outputs Scenario(Communicator& c) {
  Outputs out;
  const int n = c.size(), r = c.rank();
  int salt = 0;
  auto add = [&](std::string what, at::Tensor t) {
    out.tensors.emplace_back(std::move(what), std::move(t));
  };
  std::vector<int64_t> uneven(n), even(n, 6);
  for (int k = 0; k < n; ++k) uneven[k] = k == 1 ? 0 : 2 * k + 3;
  for (at::ScalarType st : kTypes) {
    const std::string ty = c10::toString(st);
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::kAvg && st == at::kLong) continue;
      for (int64_t numel : {0, 1, 33}) {
        at::Tensor t = Input(r, numel, st, ++salt);
        c.AllReduce(t, op);
        add("all_reduce " + ty + " " + Name(op) + " numel=" + std::to_string(numel), t);
      }
      for (const auto* counts : {&even, &uneven}) {
        int64_t total = 0;
        for (int64_t k : *counts) total += k;
        at::Tensor piece = at::empty({(*counts)[r]}, at::TensorOptions().dtype(st));
        c.ReduceScatter(Input(r, total, st, ++salt), piece, *counts, op);
        add("reduce_scatter " + ty + " " + Name(op) + (counts == &even ? " even" : " uneven"),
            piece);
      }
    }
    for (const auto* counts : {&even, &uneven}) {
      int64_t total = 0, offset = 0;
      for (int64_t k : *counts) total += k;
      for (int k = 0; k < r; ++k) offset += (*counts)[k];
      at::Tensor gathered = at::empty({total}, at::TensorOptions().dtype(st));
      c.AllGather(Input(r, (*counts)[r], st, ++salt), gathered, *counts);
      add("all_gather " + ty, gathered);
      at::Tensor full = Input(r, total, st, ++salt);  // in place, as in ZeRO's gathers
      c.AllGather(full.narrow(0, offset, (*counts)[r]), full, *counts);
      add("all_gather in place " + ty, full);
    }
    for (int root = 0; root < n; ++root) {
      at::Tensor b = Input(r, 9, st, ++salt);
      c.Broadcast(b, root);
      add("broadcast " + ty + " root " + std::to_string(root), b);
    }
  }
  if (n > 1) {  // a ring: every rank sends before it receives (Send must be buffered)
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    c.Send(Input(r, 5, at::kBFloat16, ++salt), next);
    c.Send(Input(r, kBigMessage, at::kFloat, ++salt), next);
    at::Tensor small = at::empty({5}, at::kBFloat16), big = at::empty({kBigMessage}, at::kFloat);
    c.Recv(small, prev);
    c.Recv(big, prev);
    add("ring small", small);
    add("ring big", big);
    if (n % 2 == 0) {  // pairs exchange a big message both ways
      const int peer = r ^ 1;
      c.Send(Input(r, kBigMessage, at::kFloat, ++salt), peer);
      at::Tensor got = at::empty({kBigMessage}, at::kFloat);
      c.Recv(got, peer);
      add("exchange big", got);
    }
  }
  c.Barrier();
  auto parity = c.Split(r % 2, n - r);
  auto halves = c.Split(r < n / 2 ? -5 : 7, 0);
  auto again = c.Split(0, r);
  for (auto* g : {parity.get(), halves.get(), again.get()}) {
    out.notes.push_back(g->name() + " rank=" + std::to_string(g->rank()) +
                        " size=" + std::to_string(g->size()));
    at::Tensor t = Input(r, 10, at::kBFloat16, ++salt);
    g->AllReduce(t, ReduceOp::kSum);
    add("split all_reduce in " + g->name(), t);
  }
  auto nested = parity->Split(0, 0);
  out.notes.push_back(nested->name() + " rank=" + std::to_string(nested->rank()));
  return out;
}

void CompareWithLocal(Communicator& nccl_world, Checker& check) {
  const int n = nccl_world.size(), r = nccl_world.rank();
  const Outputs got = Scenario(nccl_world);
  std::vector<Outputs> local(n);
  const auto results = RunLocalRanks(n, std::chrono::seconds(120),
                                     [&](Communicator& c) { local[c.rank()] = Scenario(c); });
  check.Expect(PrimaryErrorRank(results) < 0, "the local reference run failed");
  const Outputs& want = local[r];
  check.Expect(got.tensors.size() == want.tensors.size(), "number of outputs differs");
  for (size_t i = 0; i < got.tensors.size() && i < want.tensors.size(); ++i)
    check.Expect(SameBits(got.tensors[i].second, want.tensors[i].second),
                 got.tensors[i].first + " differs from the local backend");
  check.Expect(got.notes == want.notes, "split group names / ranks differ from the local backend");
}

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

void CheckFailures(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  auto g = world.Split(0, r);
  if (n > 1) {
    at::Tensor t = at::ones({r == n - 1 ? 5 : 4});
    ExpectMismatch(
        check, "numel mismatch", [&] { g->AllReduce(t, ReduceOp::kSum); }, "numel=5");
    at::Tensor u = at::ones({4});
    ExpectMismatch(
        check, "op mismatch",
        [&] { r == 0 ? g->AllReduce(u, ReduceOp::kMax) : g->Broadcast(u, 0); }, "broadcast");
    if (r < 2) {  // equal byte counts, different dtype: the header tells
      if (r == 0) g->Send(at::ones({4}, at::kInt), 1);
      at::Tensor recv = at::empty({4}, at::kFloat);
      if (r == 1)
        ExpectMismatch(
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
      CompareWithLocal(*world, check);
      CheckFailures(*world, check);
    } catch (const std::exception& e) {
      check.Expect(false, std::string("unexpected exception: ") + e.what());
    }
  }
  std::cout << (check.failures() == 0 ? "PASS" : "FAIL") << ": rank " << rank << ": "
            << check.checks() << " checks, " << check.failures() << " failures" << std::endl;
  return check.failures() == 0 ? 0 : 1;
}
