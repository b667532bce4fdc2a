// The shared argument checks (comm/arg_checks.h): what differs between backends (ArgRules) shows
// in the messages; the common rules are covered through the local backend in
// local_communicator_failure_test.cpp.
#include "comm/arg_checks.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace paradiff {
namespace {

using comm_args::ArgRules;

template <typename Fn>
void ExpectInvalid(Fn fn, const std::string& must_contain) {
  try {
    fn();
    ADD_FAILURE() << "no std::invalid_argument; expected: " << must_contain;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos)
        << "message: " << e.what() << "\nexpected: " << must_contain;
  }
}

bool FloatOnly(at::ScalarType st) { return st == at::kFloat; }

TEST(ArgChecks, NamesTheBackendOfACpuOnlyRule) {
  const ArgRules mpi{"mpi"};
  const at::Tensor meta = at::empty({2}, at::TensorOptions().device(at::kMeta));
  ExpectInvalid([&] { comm_args::CheckAllReduce(mpi, meta, ReduceOp::kSum); },
                "all_reduce: t must be a CPU tensor (mpi backend)");
  ArgRules gpu{"nccl", /*cuda_device=*/0};
  ExpectInvalid([&] { comm_args::CheckBroadcast(gpu, meta, 0, 1); },
                "broadcast: t must be a CPU or CUDA tensor (nccl backend)");
}

TEST(ArgChecks, NarrowerReducibleDtypesComeFirstThenAvgNeedsFloating) {
  ArgRules rules{"narrow"};
  rules.reduces = &FloatOnly;
  rules.reduces_what = "float";
  const at::Tensor ints = at::zeros({3}, at::kInt), floats = at::zeros({3});
  ExpectInvalid([&] { comm_args::CheckAllReduce(rules, ints, ReduceOp::kSum); },
                "all_reduce: the narrow backend reduces float, got int");
  EXPECT_NO_THROW(comm_args::CheckAllReduce(rules, floats, ReduceOp::kAvg));
  const ArgRules any{"local"};
  EXPECT_NO_THROW(comm_args::CheckAllReduce(any, ints, ReduceOp::kMax));
  ExpectInvalid([&] { comm_args::CheckAllReduce(any, ints, ReduceOp::kAvg); },
                "all_reduce: avg needs a floating dtype, got int");
}

TEST(ArgChecks, GatherVReturnsTheSumOfCounts) {
  const ArgRules rules{"local"};
  const at::Tensor in = at::zeros({2}), out = at::zeros({5});
  EXPECT_EQ(comm_args::CheckAllGather(rules, in, out, {2, 3}, 0, 2), 5);
  EXPECT_EQ(comm_args::CheckReduceScatter(rules, out, in, {2, 3}, ReduceOp::kSum, 0, 2), 5);
  ExpectInvalid(
      [&] {
        comm_args::CheckReduceScatter(rules, out, in, {2, 3}, ReduceOp::kSum, 1, 2);
      },
      "reduce_scatter: out.numel()=2 must equal counts[rank]=3");
}

TEST(ArgChecks, PointToPointNamesItsPeer) {
  const ArgRules rules{"local"};
  const at::Tensor t = at::zeros({1});
  ExpectInvalid([&] { comm_args::CheckPointToPoint(rules, CollOp::kSend, t, 1, 1, 2); },
                "send: dst=1 is this rank");
  ExpectInvalid([&] { comm_args::CheckPointToPoint(rules, CollOp::kRecv, t, -1, 0, 2); },
                "recv: src=-1 out of range [0, 2)");
  EXPECT_THROW(comm_args::CheckPointToPoint(rules, CollOp::kBroadcast, t, 1, 0, 2),
               std::logic_error);
}

}  // namespace
}  // namespace paradiff
