// The local backend's collectives against serial computations, at world sizes 1..8 and 37.
// Failure paths (mismatch, hang, abort, bad arguments) are in local_communicator_failure_test.cpp.
#include "comm/local_communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/comm_test_util.h"

namespace paradiff {
namespace {

using testing_util::AllOk;
using testing_util::BitEqual;
using testing_util::CountPatterns;
using testing_util::kTimeout;
using testing_util::RankInputs;
using testing_util::SerialReduce;
using testing_util::Sum;
using testing_util::WorldSizes;

TEST(LocalCommunicator, AllReduceMatchesSerialRankOrderForEveryDtypeAndOp) {
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf,
                                              at::kLong};
  for (int world : WorldSizes()) {
    for (at::ScalarType dtype : dtypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        if (op == ReduceOp::kAvg && !at::isFloatingType(dtype)) continue;
        SCOPED_TRACE(std::to_string(world) + " ranks, " + std::string(at::toString(dtype)) + ", " +
                     Name(op));
        const auto in = RankInputs(world, {3, 5}, dtype, /*seed=*/world);
        std::vector<at::Tensor> out(world);
        auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
          at::Tensor t = in[c.rank()].clone();
          c.AllReduce(t, op);
          c.Barrier();
          out[c.rank()] = t;
        });
        ASSERT_TRUE(AllOk(results));
        const at::Tensor want = SerialReduce(in, op);
        for (int r = 0; r < world; ++r) ASSERT_TRUE(BitEqual(out[r], want)) << "rank " << r;
      }
    }
  }
}

// In fp32, (1e8 - 1e8) + 1 is 1 while the reverse order, (1 - 1e8) + 1e8, is 0.
TEST(LocalCommunicator, AllReduceSumsLeftToRightInRankOrder) {
  const std::vector<float> values = {1e8f, -1e8f, 1.0f};
  std::vector<float> got(3, -1.0f);
  auto results = RunLocalRanks(3, kTimeout, [&](Communicator& c) {
    at::Tensor t = at::full({4}, values[c.rank()]);
    c.AllReduce(t, ReduceOp::kSum);
    got[c.rank()] = t[2].item<float>();
  });
  ASSERT_TRUE(AllOk(results));
  for (float g : got) EXPECT_EQ(g, 1.0f);
}

TEST(LocalCommunicator, AllGatherConcatenatesUnevenCountsInRankOrder) {
  for (int world : WorldSizes()) {
    for (const auto& counts : CountPatterns(world)) {
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
        SCOPED_TRACE(std::to_string(world) + " ranks, " + std::string(at::toString(dtype)));
        std::vector<at::Tensor> in;
        for (int r = 0; r < world; ++r) in.push_back(RankInputs(1, {counts[r]}, dtype, r + 7)[0]);
        std::vector<at::Tensor> out(world);
        auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
          at::Tensor o = at::full({Sum(counts)}, 42, in[0].options());
          c.AllGather(in[c.rank()], o, counts);
          out[c.rank()] = o;
        });
        ASSERT_TRUE(AllOk(results));
        const at::Tensor want = at::cat(in);
        for (int r = 0; r < world; ++r) ASSERT_TRUE(BitEqual(out[r], want)) << "rank " << r;
      }
    }
  }
}

TEST(LocalCommunicator, ReduceScatterKeepsPieceOfSerialReduction) {
  for (int world : WorldSizes()) {
    for (const auto& counts : CountPatterns(world)) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        SCOPED_TRACE(std::to_string(world) + " ranks, " + Name(op));
        const auto in = RankInputs(world, {Sum(counts)}, at::kFloat, world + 11);
        std::vector<at::Tensor> out(world);
        auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
          at::Tensor o = at::full({counts[c.rank()]}, 42.0f);
          c.ReduceScatter(in[c.rank()], o, counts, op);
          out[c.rank()] = o;
        });
        ASSERT_TRUE(AllOk(results));
        const at::Tensor full = SerialReduce(in, op);
        int64_t offset = 0;
        for (int r = 0; r < world; ++r) {
          ASSERT_TRUE(BitEqual(out[r], full.narrow(0, offset, counts[r]))) << "rank " << r;
          offset += counts[r];
        }
      }
    }
  }
}

// See Note [Reduction order] in local_execute.cpp: ZeRO's reduce-scatter + all-gather path must
// equal stage 0's all-reduce bitwise, in place (the gathered buffer is the input's own storage).
TEST(LocalCommunicator, ReduceScatterThenInPlaceAllGatherEqualsAllReduce) {
  for (int world : {3, 8, testing_util::kLargeWorld}) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const auto counts = CountPatterns(world)[1];
      const auto in = RankInputs(world, {Sum(counts)}, dtype, 99);
      std::vector<at::Tensor> via_rs(world), via_ar(world);
      auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
        const int r = c.rank();
        int64_t offset = 0;
        for (int i = 0; i < r; ++i) offset += counts[i];
        at::Tensor buf = in[r].clone();
        at::Tensor piece = at::empty({counts[r]}, buf.options());
        c.ReduceScatter(buf, piece, counts, ReduceOp::kAvg);
        buf.narrow(0, offset, counts[r]).copy_(piece);
        c.AllGather(buf.narrow(0, offset, counts[r]), buf, counts);
        via_rs[r] = buf;
        at::Tensor t = in[r].clone();
        c.AllReduce(t, ReduceOp::kAvg);
        via_ar[r] = t;
      });
      ASSERT_TRUE(AllOk(results));
      for (int r = 0; r < world; ++r) ASSERT_TRUE(BitEqual(via_rs[r], via_ar[r])) << "rank " << r;
    }
  }
}

TEST(LocalCommunicator, BroadcastFromEveryRoot) {
  for (int world : WorldSizes()) {
    const auto in = RankInputs(world, {2, 3}, at::kDouble, 5);
    for (int root = 0; root < world; ++root) {
      std::vector<at::Tensor> out(world);
      auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
        at::Tensor t = in[c.rank()].clone();
        c.Broadcast(t, root);
        out[c.rank()] = t;
      });
      ASSERT_TRUE(AllOk(results));
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(BitEqual(out[r], in[root]))
            << world << " ranks, root " << root << ", rank " << r;
      }
    }
  }
}

// Every rank sends three messages to its right neighbour before receiving from its left one
// (buffered sends cannot deadlock), in FIFO order; then a reverse ring with bf16.
TEST(LocalCommunicator, SendRecvRingsDeliverInOrder) {
  constexpr int kMessages = 3;
  for (int world : WorldSizes()) {
    if (world == 1) continue;
    std::vector<std::vector<float>> got(world);
    std::vector<at::Tensor> reverse(world);
    auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
      const int r = c.rank(), n = c.size();
      for (int m = 0; m < kMessages; ++m) c.Send(at::full({2, 2}, float(100 * r + m)), (r + 1) % n);
      for (int m = 0; m < kMessages; ++m) {
        at::Tensor t = at::zeros({4});  // same numel, different shape: allowed
        c.Recv(t, (r + n - 1) % n);
        got[r].push_back(t[3].item<float>());
      }
      c.Send(at::full({3}, float(r)).to(at::kBFloat16), (r + n - 1) % n);
      reverse[r] = at::zeros({3}, at::kBFloat16);
      c.Recv(reverse[r], (r + 1) % n);
    });
    ASSERT_TRUE(AllOk(results));
    for (int r = 0; r < world; ++r) {
      const int left = (r + world - 1) % world, right = (r + 1) % world;
      for (int m = 0; m < kMessages; ++m) EXPECT_EQ(got[r][m], float(100 * left + m));
      EXPECT_TRUE(BitEqual(reverse[r], at::full({3}, float(right)).to(at::kBFloat16)));
    }
  }
}

// Split world into groups by color r % k, ordered by key = -r (reverse rank order); every group
// runs collectives; a second split of the same parent and a nested split get distinct names.
TEST(LocalCommunicator, SplitFormsOrderedSubgroupsThatRunCollectives) {
  for (int world : {1, 5, 7, 8, testing_util::kLargeWorld}) {
    const int k = world >= 7 ? 3 : 2;
    std::vector<std::string> names(world), second(world), nested(world);
    std::vector<int> sub_rank(world), sub_size(world);
    std::vector<double> sums(world), bcast(world);
    auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
      const int r = c.rank();
      auto sub = c.Split(r % k, -r);
      names[r] = sub->name();
      sub_rank[r] = sub->rank();
      sub_size[r] = sub->size();
      at::Tensor t = at::full({3}, double(r));
      sub->AllReduce(t, ReduceOp::kSum);
      sums[r] = t[0].item<double>();
      at::Tensor b = at::full({1}, double(r));
      sub->Broadcast(b, sub->size() - 1);
      bcast[r] = b.item<double>();
      second[r] = c.Split(0, r)->name();
      auto inner = sub->Split(sub->rank() % 2, 0);
      inner->Barrier();
      nested[r] = inner->name();
      c.Barrier();
    });
    ASSERT_TRUE(AllOk(results));
    for (int r = 0; r < world; ++r) {
      const int color = r % k;
      std::vector<int> members;  // parent ranks of the group, ordered by key = -rank
      for (int q = world - 1; q >= 0; --q) {
        if (q % k == color) members.push_back(q);
      }
      double sum = 0;
      for (int q : members) sum += q;
      EXPECT_EQ(names[r], "world/c" + std::to_string(color));
      EXPECT_EQ(sub_size[r], static_cast<int>(members.size()));
      EXPECT_EQ(members[sub_rank[r]], r);
      EXPECT_EQ(sums[r], sum);
      EXPECT_EQ(bcast[r], double(members.back()));
      EXPECT_EQ(second[r], "world/c0.1");
      EXPECT_EQ(nested[r], names[r] + "/c" + std::to_string(sub_rank[r] % 2));
    }
  }
}

// Random fp32 and bf16 data through every reduction twice: identical bits across runs and ranks.
TEST(LocalCommunicator, ResultsAreBitwiseReproducibleAcrossRuns) {
  for (int world : {8, 13}) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const auto in = RankInputs(world, {1000}, dtype, 2024);
      std::vector<int64_t> counts_v(world, 1000 / world);
      counts_v.back() += 1000 % world;
      auto run = [&] {
        std::vector<at::Tensor> out(world);
        auto results = RunLocalRanks(world, kTimeout, [&](Communicator& c) {
          at::Tensor t = in[c.rank()].clone();
          c.AllReduce(t, ReduceOp::kSum);
          at::Tensor piece = at::empty({counts_v[c.rank()]}, t.options());
          c.ReduceScatter(in[c.rank()], piece, counts_v, ReduceOp::kAvg);
          out[c.rank()] = at::cat({t, piece});
        });
        EXPECT_TRUE(AllOk(results));
        return out;
      };
      const auto first = run(), again = run();
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(BitEqual(again[r], first[r])) << "rank " << r << " differs between runs";
        ASSERT_TRUE(BitEqual(first[r].narrow(0, 0, 1000), first[0].narrow(0, 0, 1000)))
            << "rank " << r << " differs from rank 0";
      }
    }
  }
}

TEST(LocalCommunicator, SixtyFourRanksRunEveryCollective) {
  constexpr int kWorld = 64;
  const auto in = RankInputs(kWorld, {kWorld}, at::kFloat, 64);
  std::vector<at::Tensor> reduced(kWorld), gathered(kWorld);
  auto results = RunLocalRanks(kWorld, kTimeout, [&](Communicator& c) {
    at::Tensor t = in[c.rank()].clone();
    c.AllReduce(t, ReduceOp::kSum);
    reduced[c.rank()] = t;
    const std::vector<int64_t> ones(kWorld, 1);
    at::Tensor g = at::empty({kWorld});
    c.AllGather(t.narrow(0, c.rank(), 1), g, ones);
    gathered[c.rank()] = g;
    auto half = c.Split(c.rank() < 32 ? 0 : 1, 0);
    half->Barrier();
  });
  ASSERT_TRUE(AllOk(results));
  const at::Tensor want = SerialReduce(in, ReduceOp::kSum);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(BitEqual(reduced[r], want));
    ASSERT_TRUE(BitEqual(gathered[r], want));
  }
}

}  // namespace
}  // namespace paradiff
