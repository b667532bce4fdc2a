// Unit tests of targets/crash_state.h: the bucket of an external target's crash, from logs shaped
// as torch.multiprocessing, a C++ terminate and a plain exit write them.
#include "targets/crash_state.h"

#include <gtest/gtest.h>

namespace paradiff {
namespace {

// A warm worker's leader re-raising a rank's error (torch.multiprocessing's format).
constexpr char kRankRaised[] =
    R"(W1203 17:21:48.315000 3103 spawn.py:174] Terminating process 3104 via signal SIGTERM
Traceback (most recent call last):
  File "/a/serve.py", line 135, in _lead
    run(run_dir)
  File "/v/torch/multiprocessing/spawn.py", line 220, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException:

-- Process 3 terminated with the following error:
Traceback (most recent call last):
  File "/v/torch/multiprocessing/spawn.py", line 89, in _wrap
    fn(i, *args)
  File "/v/torch/distributed/pipelining/stage.py", line 641, in _validate_fwd_outputs
    raise PipeliningShapeError(
torch.distributed.pipelining._utils.PipeliningShapeError: Stage 3 forward outputs: value 0 has a stride mismatch: expected (81, 1) actual (82, 1)
)";

TEST(CrashState, TheRanksExceptionAndItsInnermostFrameNotTheWrapper) {
  EXPECT_EQ(CrashState(kRankRaised), "PipeliningShapeError-_validate_fwd_outputs");
}

TEST(CrashState, AnotherCauseIsAnotherStateAndSizesDoNotMatter) {
  const std::string other = R"(Traceback (most recent call last):
  File "/v/torch/distributed/pipelining/schedules.py", line 300, in __init__
    raise ValueError(
ValueError: Number of microbatches (1) must be greater than or equal to the number of stages (2).
)";
  EXPECT_EQ(CrashState(other), "ValueError-__init__");
  std::string resized = kRankRaised;
  resized.replace(resized.find("(81, 1)"), 7, "(5, 1)");
  EXPECT_EQ(CrashState(resized), CrashState(kRankRaised));
}

TEST(CrashState, APeersLostConnectionIsSkippedForTheCause) {
  const std::string log = R"(Traceback (most recent call last):
  File "/v/torch/distributed/distributed_c10d.py", line 4174, in all_reduce
    work = group.allreduce([tensor], opts)
RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:544] Connection closed by peer [127.0.0.1]:24246
Traceback (most recent call last):
  File "/a/adapter.py", line 237, in train
    loss_sum, loss_count = pipe.run_step(data)
  File "/v/torch/nn/parallel/distributed.py", line 1600, in forward
    inputs, kwargs = self._pre_forward(*inputs, **kwargs)
RuntimeError: params_.size() == rebuilt_param_indices_.size() INTERNAL ASSERT FAILED
)";
  EXPECT_EQ(CrashState(log), "RuntimeError-forward");
}

TEST(CrashState, ACxxTerminateHasItsTypeAlone) {
  const std::string log =
      "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
      "  what():  [enforce fail at pair.cc:464] op.preamble.length <= op.nbytes. 128 vs 64.\n"
      "Traceback (most recent call last):\n"
      "  File \"/v/torch/multiprocessing/spawn.py\", line 201, in join\n"
      "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal "
      "SIGABRT\n";
  EXPECT_EQ(CrashState(log), "EnforceNotMet");
}

TEST(CrashState, NoExceptionNoState) {
  EXPECT_EQ(CrashState("fake target: crashing on purpose\n"), "");
  EXPECT_EQ(CrashState(""), "");
  // A raise statement or a warning is not an exception line.
  EXPECT_EQ(CrashState("    raise ValueError(\nUserWarning: something\n"), "");
}

}  // namespace
}  // namespace paradiff
