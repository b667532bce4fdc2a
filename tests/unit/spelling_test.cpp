// The spelling tables (core/spelling.h): every enumerator of a closed vocabulary has exactly one
// name, distinct from the others, and reads back as itself.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>

#include "core/config.h"
#include "core/verdict.h"

namespace paradiff {
namespace {

// Walks enumerators 0..last (every enum here is contiguous from 0).
template <class E, size_t N>
void ExpectComplete(const Spelling<E> (&table)[N], E last) {
  std::set<std::string> names;
  for (int i = 0; i <= static_cast<int>(last); ++i) {
    const E e = static_cast<E>(i);
    const std::string name = NameIn(table, e);
    EXPECT_NE(name, "?") << "enumerator " << i << " has no name";
    EXPECT_TRUE(names.insert(name).second) << "two enumerators spelled '" << name << "'";
    const std::optional<E> back = ParseIn(table, name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(static_cast<int>(*back), i) << name;
  }
  EXPECT_EQ(names.size(), N) << "the table has entries beyond the last enumerator";
  EXPECT_FALSE(ParseIn(table, "no-such-name").has_value());
}

TEST(Spelling, EveryEnumeratorHasOneNameThatReadsBack) {
  ExpectComplete(kModelKindNames, ModelKind::kExactLinear);
  ExpectComplete(kActivationNames, Activation::kSwiglu);
  ExpectComplete(kScheduleNames, Schedule::kInterleaved);
  ExpectComplete(kPartitionNames, PartitionMethod::kExplicit);
  ExpectComplete(kDTypeNames, DType::kFp64);
  ExpectComplete(kLossScaleModeNames, LossScaleMode::kDynamic);
  ExpectComplete(kOptimizerNames, OptimizerKind::kAdamW);
  ExpectComplete(kBackendNames, Backend::kNccl);
  ExpectComplete(kVerdictKindNames, VerdictKind::kInconclusive);
  ExpectComplete(kPhaseNames, Phase::kDivergence);
}

TEST(Spelling, SignaturesSpellPhases) {
  Verdict v;
  v.kind = VerdictKind::kMismatch;
  v.oracle = "numeric";
  v.where.tensor_kind = "grad";
  v.where.layer = "mlp";
  v.where.phase = Phase::kGradient;
  EXPECT_EQ(v.Signature(), "mismatch.numeric.grad.mlp.gradient");
  v.where.phase = Phase::kNone;
  EXPECT_EQ(v.Signature(), "mismatch.numeric.grad.mlp.-");
}

}  // namespace
}  // namespace paradiff
