// The local backend's failure paths: mismatches raise on every rank, a missing rank becomes a hang
// report within the timeout, a throwing rank aborts the others, bad arguments are rejected early.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/local_communicator.h"
#include "tests/unit/comm_test_util.h"

namespace paradiff {
namespace {

using testing_util::AllOk;
using testing_util::kTimeout;
using Clock = std::chrono::steady_clock;

constexpr auto kShortTimeout = std::chrono::milliseconds(200);
constexpr auto kPromptly = std::chrono::seconds(5);  // a correctness bound, not a benchmark

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct MismatchCase {
  std::string name;
  std::function<void(Communicator&, bool odd)> call;
  std::string normal_part, odd_part;  // both must appear in every rank's message
};

std::vector<MismatchCase> MismatchCases() {
  auto ar = [](int64_t numel, at::ScalarType dtype, ReduceOp op) {
    return [=](Communicator& c) {
      at::Tensor t = at::ones({numel}, dtype);
      c.AllReduce(t, op);
    };
  };
  return {
      {"op",
       [](Communicator& c, bool odd) {
         at::Tensor t = at::ones({4});
         odd ? c.Broadcast(t, 0) : c.AllReduce(t, ReduceOp::kSum);
       },
       "all_reduce numel=4", "broadcast numel=4"},
      {"numel",
       [ar](Communicator& c, bool odd) { ar(odd ? 11 : 10, at::kFloat, ReduceOp::kSum)(c); },
       "numel=10", "numel=11"},
      {"dtype",
       [ar](Communicator& c, bool odd) {
         ar(4, odd ? at::kDouble : at::kFloat, ReduceOp::kSum)(c);
       },
       "dtype=float", "dtype=double"},
      {"reduce op",
       [ar](Communicator& c, bool odd) {
         ar(4, at::kFloat, odd ? ReduceOp::kMax : ReduceOp::kSum)(c);
       },
       "op=sum", "op=max"},
      {"root",
       [](Communicator& c, bool odd) {
         at::Tensor t = at::ones({4});
         c.Broadcast(t, odd ? 1 : 0);
       },
       "root=0", "root=1"},
      {"counts",
       [](Communicator& c, bool odd) {
         const std::vector<int64_t> counts =
             odd ? std::vector<int64_t>{2, 2, 3, 1} : std::vector<int64_t>{2, 2, 2, 2};
         at::Tensor out = at::empty({8});
         c.AllGather(at::ones({counts[c.rank()]}), out, counts);
       },
       "all_gather numel=2", "all_gather numel=3"},
  };
}

TEST(LocalCommunicatorFailure, MismatchRaisesOnEveryRankNamingBothCalls) {
  constexpr int kWorld = 4, kOdd = 2;
  for (const MismatchCase& mc : MismatchCases()) {
    SCOPED_TRACE("different " + mc.name);
    std::vector<std::string> pair_ranks(kWorld);
    auto results = RunLocalRanks(kWorld, kTimeout, [&](Communicator& c) {
      c.Barrier();
      try {
        mc.call(c, c.rank() == kOdd);
      } catch (const CollectiveMismatch& e) {
        pair_ranks[c.rank()] = std::to_string(e.a().rank) + "," + std::to_string(e.b().rank);
        throw;
      }
    });
    for (int r = 0; r < kWorld; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      ASSERT_EQ(results[r].error_kind, "mismatch") << results[r].error;
      const std::string& msg = results[r].error;
      EXPECT_TRUE(Contains(msg, "collective mismatch in group 'world'")) << msg;
      EXPECT_TRUE(Contains(msg, "world#1 ")) << msg;
      EXPECT_TRUE(Contains(msg, mc.normal_part)) << msg;
      EXPECT_TRUE(Contains(msg, mc.odd_part)) << msg;
      EXPECT_TRUE(Contains(msg, "rank " + std::to_string(kOdd) + " called")) << msg;
      EXPECT_TRUE(Contains(pair_ranks[r], std::to_string(kOdd))) << pair_ranks[r];
    }
  }
}

// A mismatch in one subgroup fails its members; ranks waiting in another group are aborted.
TEST(LocalCommunicatorFailure, MismatchInSubgroupAbortsTheRestPromptly) {
  const auto start = Clock::now();
  auto results = RunLocalRanks(6, kTimeout, [](Communicator& c) {
    auto sub = c.Split(c.rank() % 2, 0);
    at::Tensor t = at::ones({c.rank() == 5 ? 3 : 2});
    sub->AllReduce(t, ReduceOp::kSum);
    c.Barrier();
  });
  EXPECT_LT(Clock::now() - start, kPromptly);
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(results[r].error_kind, r % 2 == 1 ? "mismatch" : "aborted") << results[r].error;
  }
  EXPECT_EQ(results[PrimaryErrorRank(results)].error_kind, "mismatch");
  EXPECT_TRUE(Contains(results[1].error, "group 'world/c1'")) << results[1].error;
}

TEST(LocalCommunicatorFailure, RecvChecksNumelAndDtypeOfTheMessage) {
  for (bool dtype_differs : {false, true}) {
    auto results = RunLocalRanks(2, kTimeout, [&](Communicator& c) {
      if (c.rank() == 0) {
        c.Send(at::ones({4}, dtype_differs ? at::kDouble : at::kFloat), 1);
      } else {
        at::Tensor t = at::empty({dtype_differs ? 4 : 5});
        c.Recv(t, 0);
      }
    });
    EXPECT_TRUE(results[0].ok);
    ASSERT_EQ(results[1].error_kind, "mismatch");
    EXPECT_TRUE(Contains(results[1].error, "rank 0 sent world#0 send")) << results[1].error;
    EXPECT_TRUE(Contains(results[1].error, "rank 1 receives world#0 recv")) << results[1].error;
  }
}

// Ranks 0 and 1 wait in an all-reduce rank 3 never calls; rank 2 is busy, rank 3 has returned.
TEST(LocalCommunicatorFailure, MissingRankBecomesHangReportListingEveryRank) {
  const auto start = Clock::now();
  auto results = RunLocalRanks(4, kShortTimeout, [](Communicator& c) {
    c.Barrier();
    if (c.rank() >= 2) std::this_thread::sleep_for(3 * kShortTimeout);  // still running
    if (c.rank() == 3) return;
    at::Tensor t = at::ones({40});
    c.AllReduce(t, ReduceOp::kSum);
  });
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, kShortTimeout);
  EXPECT_LT(elapsed, kPromptly);
  EXPECT_TRUE(results[3].ok);
  EXPECT_EQ(results[2].error_kind, "aborted") << results[2].error;
  const int hung = PrimaryErrorRank(results);
  ASSERT_TRUE(hung == 0 || hung == 1) << hung;
  EXPECT_EQ(results[1 - hung].error_kind, "aborted");
  const std::string& msg = results[hung].error;
  ASSERT_EQ(results[hung].error_kind, "hang") << msg;
  EXPECT_TRUE(Contains(msg, "waited more than 200 ms in world#1 all_reduce numel=40")) << msg;
  EXPECT_TRUE(Contains(msg, "rank 0: waiting in world#1 all_reduce numel=40")) << msg;
  EXPECT_TRUE(Contains(msg, "rank 1: waiting in world#1 all_reduce numel=40")) << msg;
  EXPECT_TRUE(Contains(msg, "rank 2: running (last completed: world#0 barrier")) << msg;
  EXPECT_TRUE(Contains(msg, "rank 3: running (last completed: world#0 barrier")) << msg;
  EXPECT_TRUE(Contains(results[2].error, "timed out")) << results[2].error;
}

TEST(LocalCommunicatorFailure, AMemberThatFinishedMakesTheWaitAHangAtOnce) {
  // Rank 3 returns without the all-reduce: the others can never complete it, which the backend
  // reports at once instead of after the (here long) timeout.
  const auto start = Clock::now();
  auto results = RunLocalRanks(4, std::chrono::seconds(30), [](Communicator& c) {
    c.Barrier();
    if (c.rank() == 3) return;
    at::Tensor t = at::ones({40});
    c.AllReduce(t, ReduceOp::kSum);
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(results[3].ok);
  const int hung = PrimaryErrorRank(results);
  ASSERT_GE(hung, 0);
  ASSERT_EQ(results[hung].error_kind, "hang") << results[hung].error;
  EXPECT_TRUE(
      Contains(results[hung].error, "which can never complete: world rank 3 finished without it"))
      << results[hung].error;
  EXPECT_TRUE(Contains(results[hung].error, "rank 3: finished")) << results[hung].error;
  // A receive from a rank that finished without sending is the same.
  results = RunLocalRanks(2, std::chrono::seconds(30), [](Communicator& c) {
    if (c.rank() == 1) return;
    at::Tensor t = at::empty({3});
    c.Recv(t, 1);
  });
  EXPECT_EQ(results[0].error_kind, "hang") << results[0].error;
  EXPECT_TRUE(Contains(results[0].error, "world rank 1 finished without it")) << results[0].error;
}

TEST(LocalCommunicatorFailure, RecvFromSilentPeerAndLargeWorldHangsReturnPromptly) {
  auto start = Clock::now();
  auto results = RunLocalRanks(2, kShortTimeout, [](Communicator& c) {
    if (c.rank() == 1) return;
    at::Tensor t = at::empty({3});
    c.Recv(t, 1);
  });
  EXPECT_LT(Clock::now() - start, kPromptly);
  ASSERT_EQ(results[0].error_kind, "hang");
  EXPECT_TRUE(Contains(results[0].error, "rank 0: waiting in world#0 recv numel=3"))
      << results[0].error;
  EXPECT_TRUE(Contains(results[0].error, "rank 1: finished")) << results[0].error;

  constexpr int kWorld = testing_util::kLargeWorld;
  start = Clock::now();
  results = RunLocalRanks(kWorld, kShortTimeout, [](Communicator& c) {
    if (c.rank() != kWorld - 1) c.Barrier();
  });
  EXPECT_LT(Clock::now() - start, kPromptly);
  int hangs = 0;
  for (int r = 0; r + 1 < kWorld; ++r) {
    hangs += results[r].error_kind == "hang";
    EXPECT_TRUE(results[r].error_kind == "hang" || results[r].error_kind == "aborted");
  }
  EXPECT_EQ(hangs, 1);
  const std::string& msg = results[PrimaryErrorRank(results)].error;
  size_t lines = 0;
  for (size_t p = msg.find("\n  rank "); p != std::string::npos; p = msg.find("\n  rank ", p + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, static_cast<size_t>(kWorld)) << msg;
  EXPECT_TRUE(Contains(msg, "rank 36: finished")) << msg;
}

TEST(LocalCommunicatorFailure, ThrowingRankAbortsTheOthersPromptly) {
  for (bool std_exception : {true, false}) {
    const auto start = Clock::now();
    auto results = RunLocalRanks(5, kTimeout, [&](Communicator& c) {
      if (c.rank() == 1) {
        if (std_exception) throw std::runtime_error("boom from rank 1");
        throw 42;
      }
      at::Tensor t = at::ones({4});
      c.AllReduce(t, ReduceOp::kSum);
    });
    EXPECT_LT(Clock::now() - start, kPromptly);
    ASSERT_EQ(PrimaryErrorRank(results), 1);
    EXPECT_EQ(results[1].error_kind, "exception");
    EXPECT_TRUE(Contains(results[1].error, std_exception ? "boom from rank 1" : "unknown"));
    for (int r : {0, 2, 3, 4}) {
      EXPECT_EQ(results[r].error_kind, "aborted");
      EXPECT_TRUE(Contains(results[r].error, "world rank 1 failed (exception)"))
          << results[r].error;
    }
  }
}

void ExpectInvalid(const std::function<void()>& call, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "no std::invalid_argument; expected one containing: " << part;
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), part)) << e.what() << " lacks: " << part;
  }
}

TEST(LocalCommunicatorFailure, BadArgumentsAreRejectedBeforeTheRendezvous) {
  auto results = RunLocalRanks(2, kTimeout, [](Communicator& c) {
    const std::vector<int64_t> counts = {2, 3};
    at::Tensor in = at::ones({counts[c.rank()]}), out = at::empty({5});
    at::Tensor wrong_out = at::empty({6});
    ExpectInvalid([&] { c.AllGather(in, wrong_out, counts); },
                  "all_gather: out.numel()=6 must equal sum(counts)=5");
    ExpectInvalid([&] { c.AllGather(at::ones({4}), out, counts); },
                  "all_gather: in.numel()=4 must equal counts[rank]");
    ExpectInvalid([&] { c.AllGather(in, out, {5}); },
                  "all_gather: counts.size()=1 must equal the group size 2");
    ExpectInvalid([&] { c.AllGather(in, out, {6, -1}); }, "all_gather: counts[1]=-1 must be >= 0");
    ExpectInvalid(
        [&] {
          c.AllGather(in.view({1, -1}), out, counts);
        },
        "all_gather: in must be 1-D");
    at::Tensor strided = at::ones({10}).slice(0, 0, 10, 2);
    ExpectInvalid([&] { c.AllGather(in, strided, counts); }, "all_gather: out must be contiguous");
    at::Tensor half_out = at::empty({5}, at::kHalf);
    ExpectInvalid([&] { c.AllGather(in, half_out, counts); }, "out dtype c10::Half must equal");
    at::Tensor piece = at::empty({1});
    ExpectInvalid([&] { c.ReduceScatter(out, piece, counts, ReduceOp::kSum); },
                  "reduce_scatter: out.numel()=1 must equal counts[rank]");
    at::Tensor t = at::ones({2, 3}).t();
    ExpectInvalid([&] { c.AllReduce(t, ReduceOp::kSum); }, "all_reduce: t must be contiguous");
    at::Tensor ints = at::ones({3}, at::kLong);
    ExpectInvalid([&] { c.AllReduce(ints, ReduceOp::kAvg); }, "all_reduce: avg needs a floating");
    at::Tensor flags = at::ones({3}, at::kBool);
    ExpectInvalid([&] { c.AllReduce(flags, ReduceOp::kMax); }, "reductions need a floating or");
    at::Tensor undefined;
    ExpectInvalid([&] { c.AllReduce(undefined, ReduceOp::kSum); }, "t must be a defined tensor");
    ExpectInvalid([&] { c.Broadcast(in, 2); }, "broadcast: root=2 out of range [0, 2)");
    ExpectInvalid([&] { c.Broadcast(in, -1); }, "broadcast: root=-1 out of range");
    ExpectInvalid([&] { c.Send(in, c.rank()); },
                  "send: dst=" + std::to_string(c.rank()) + " is this rank");
    ExpectInvalid([&] { c.Recv(in, 7); }, "recv: src=7 out of range [0, 2)");
    // Rejected calls consume no sequence number: the ranks still agree on the next collective.
    at::Tensor ok = at::full({3}, 1.5);
    c.AllReduce(ok, ReduceOp::kSum);
    if (ok[0].item<double>() != 3.0) throw std::runtime_error("wrong all-reduce result");
  });
  EXPECT_TRUE(AllOk(results));

  EXPECT_THROW(LocalWorld(0, kTimeout), std::invalid_argument);
  EXPECT_THROW(LocalWorld(2, std::chrono::milliseconds(0)), std::invalid_argument);
  LocalWorld world(2, kTimeout);
  EXPECT_THROW(world.Rank(2), std::invalid_argument);
  auto rank0 = world.Rank(0);
  EXPECT_THROW(world.Rank(0), std::invalid_argument);
  world.Abort("stopped by the test");
  EXPECT_TRUE(world.aborted());
  try {
    rank0->Barrier();
    ADD_FAILURE() << "an aborted world accepted a barrier";
  } catch (const CollectiveAborted& e) {
    EXPECT_TRUE(Contains(e.what(), "stopped by the test")) << e.what();
  }
}

}  // namespace
}  // namespace paradiff
