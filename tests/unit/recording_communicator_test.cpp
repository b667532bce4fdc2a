// RecordingCommunicator logs every call with the backend's numbering, and Fingerprint's comparison
// and printing rules.
#include "comm/recording_communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "tests/unit/comm_test_util.h"

namespace paradiff {
namespace {

using testing_util::AllOk;
using testing_util::kTimeout;

Fingerprint Fp(CollOp op, int64_t numel, int64_t root, int rank) {
  Fingerprint fp;
  fp.group = "world/dp0";
  fp.seq = 12;
  fp.op = op;
  fp.numel = numel;
  fp.dtype = "float";
  fp.root = root;
  fp.rank = rank;
  return fp;
}

TEST(Fingerprint, SameCallComparesEverythingButRankAndGatherNumel) {
  const Fingerprint a = Fp(CollOp::kAllReduce, 40, 0, 3);
  EXPECT_TRUE(a.SameCall(Fp(CollOp::kAllReduce, 40, 0, 1)));
  EXPECT_FALSE(a.SameCall(Fp(CollOp::kAllReduce, 41, 0, 3)));
  EXPECT_FALSE(a.SameCall(Fp(CollOp::kAllReduce, 40, 2, 3)));
  EXPECT_FALSE(a.SameCall(Fp(CollOp::kBroadcast, 40, 0, 3)));
  Fingerprint other = a;
  other.seq = 13;
  EXPECT_FALSE(a.SameCall(other));
  other = a;
  other.group = "world/dp1";
  EXPECT_FALSE(a.SameCall(other));
  other = a;
  other.dtype = "c10::BFloat16";
  EXPECT_FALSE(a.SameCall(other));

  for (CollOp op : {CollOp::kAllGather, CollOp::kReduceScatter}) {
    Fingerprint g = Fp(op, 3, 0, 0), h = Fp(op, 5, 0, 1);
    g.shape_hash = h.shape_hash = CountsHash({3, 5});
    EXPECT_TRUE(g.SameCall(h)) << Name(op);
    h.shape_hash = CountsHash({5, 3});
    EXPECT_FALSE(g.SameCall(h)) << Name(op);
  }
  EXPECT_NE(CountsHash({}), CountsHash({0}));
  EXPECT_EQ(CountsHash({1, 2, 3}), CountsHash({1, 2, 3}));
}

TEST(Fingerprint, ToStringAndNames) {
  EXPECT_EQ(Fp(CollOp::kAllReduce, 40, 0, 3).ToString(),
            "world/dp0#12 all_reduce numel=40 dtype=float op=sum rank=3");
  EXPECT_EQ(Fp(CollOp::kBroadcast, 8, 2, 0).ToString(),
            "world/dp0#12 broadcast numel=8 dtype=float root=2 rank=0");
  EXPECT_EQ(Fp(CollOp::kSend, 8, 1, 0).ToString(),
            "world/dp0#12 send numel=8 dtype=float dst=1 rank=0");
  EXPECT_EQ(Fp(CollOp::kRecv, 8, 0, 1).ToString(),
            "world/dp0#12 recv numel=8 dtype=float src=0 rank=1");
  EXPECT_EQ(Fp(CollOp::kAllGather, 8, -1, 1).ToString(),
            "world/dp0#12 all_gather numel=8 dtype=float root=-1 counts#0000000000000000 rank=1");
  EXPECT_STREQ(Name(ReduceOp::kAvg), "avg");
  EXPECT_STREQ(Name(CollOp::kReduceScatter), "reduce_scatter");
  EXPECT_STREQ(Name(CollOp::kSplit), "split");
}

// Three ranks run every kind of call; the logs follow see Note [Fingerprint numbering] and agree
// across ranks, and results still arrive (the decorator forwards).
TEST(RecordingCommunicator, LogsEveryCallInOrderWithBackendNumbering) {
  constexpr int kWorld = 3;
  std::vector<std::vector<Fingerprint>> logs(kWorld);
  std::vector<double> sums(kWorld);
  auto results = RunLocalRanks(kWorld, kTimeout, [&](Communicator& backend) {
    const int r = backend.rank();
    RecordingCommunicator c(backend, &logs[r]);
    at::Tensor t = at::full({4}, double(r));
    c.AllReduce(t, ReduceOp::kSum);
    sums[r] = t[0].item<double>();
    const std::vector<int64_t> counts = {1, 2, 3};
    at::Tensor gathered = at::empty({6});
    c.AllGather(at::ones({counts[r]}), gathered, counts);
    at::Tensor piece = at::empty({counts[r]});
    c.ReduceScatter(gathered, piece, counts, ReduceOp::kAvg);
    c.Broadcast(t, 1);
    c.Send(t, (r + 1) % kWorld);
    c.Recv(t, (r + kWorld - 1) % kWorld);
    c.Barrier();
    auto sub = c.Split(r == 0 ? 0 : 1, 0);
    at::Tensor s = at::ones({2}, at::kBFloat16);
    sub->AllReduce(s, ReduceOp::kMax);
    c.Barrier();
  });
  ASSERT_TRUE(AllOk(results));
  const std::vector<CollOp> ops = {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kReduceScatter,
                                   CollOp::kBroadcast, CollOp::kSend,      CollOp::kRecv,
                                   CollOp::kBarrier,   CollOp::kSplit,     CollOp::kAllReduce,
                                   CollOp::kBarrier};
  const std::vector<int64_t> seqs = {0, 1, 2, 3, 0, 0, 4, 5, 0, 6};
  for (int r = 0; r < kWorld; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(sums[r], 3.0);
    ASSERT_EQ(logs[r].size(), ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Fingerprint& fp = logs[r][i];
      EXPECT_EQ(fp.op, ops[i]) << i;
      EXPECT_EQ(fp.seq, seqs[i]) << i;
      EXPECT_EQ(fp.rank, i == 8 ? (r == 0 ? 0 : r - 1) : r) << i;
      EXPECT_EQ(fp.group, i == 8 ? (r == 0 ? "world/c0" : "world/c1") : "world") << i;
      if (fp.op != CollOp::kSend && fp.op != CollOp::kRecv && i != 8) {
        EXPECT_TRUE(fp.SameCall(logs[0][i])) << fp.ToString() << " vs " << logs[0][i].ToString();
      }
    }
    EXPECT_EQ(logs[r][1].numel, r + 1);  // gather-v: own count
    EXPECT_EQ(logs[r][4].root, (r + 1) % kWorld);
    EXPECT_EQ(logs[r][8].dtype, "c10::BFloat16");
    EXPECT_EQ(logs[r][8].root, static_cast<int64_t>(ReduceOp::kMax));
  }
}

// The fingerprints a mismatch names are the ones the log recorded.
TEST(RecordingCommunicator, MismatchNamesTheLoggedFingerprints) {
  std::vector<std::vector<Fingerprint>> logs(2);
  std::vector<std::string> named(2);
  auto results = RunLocalRanks(2, kTimeout, [&](Communicator& backend) {
    RecordingCommunicator c(backend, &logs[backend.rank()]);
    at::Tensor t = at::ones({backend.rank() == 0 ? 2 : 3});
    try {
      c.AllReduce(t, ReduceOp::kSum);
    } catch (const CollectiveMismatch& e) {
      named[backend.rank()] = e.a().ToString() + " | " + e.b().ToString();
      throw;
    }
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(results[r].error_kind, "mismatch");
    ASSERT_EQ(logs[r].size(), 1u);
    EXPECT_NE(named[r].find(logs[0][0].ToString()), std::string::npos) << named[r];
    EXPECT_NE(named[r].find(logs[1][0].ToString()), std::string::npos) << named[r];
  }
}

TEST(RecordingCommunicator, OwningFormAndNullArguments) {
  std::vector<Fingerprint> log;
  LocalWorld world(1, kTimeout);
  RecordingCommunicator c(world.Rank(0), &log);
  at::Tensor t = at::ones({3});
  c.AllReduce(t, ReduceOp::kAvg);
  EXPECT_THROW(c.Broadcast(t, 5), std::invalid_argument);  // rejected: not logged, not numbered
  c.Barrier();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].ToString(), "world#1 barrier numel=0 dtype= root=-1 rank=0");
  EXPECT_THROW(RecordingCommunicator(nullptr, &log), std::invalid_argument);
  LocalWorld spare(1, kTimeout);
  EXPECT_THROW(RecordingCommunicator(spare.Rank(0), nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace paradiff
