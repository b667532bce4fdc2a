// Parameter initialization (kernels/param_init.h): the raw fill a rank uses for its slices writes
// the slice function's values, and the whole-parameter function hands each caller its own tensor
// although it keeps the values it generated.
#include "kernels/param_init.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/model_spec.h"

namespace paradiff {
namespace {

ParamSpec Spec(const char* name, std::vector<int64_t> shape, InitKind init, double scale) {
  ParamSpec s;
  s.name = name;
  s.shape = std::move(shape);
  s.init = init;
  s.scale = scale;
  return s;
}

std::vector<ParamSpec> EveryInitKind() {
  return {Spec("blocks.0.attn.q.weight", {12, 8}, InitKind::kNormal, 0.02),
          Spec("blocks.0.attn.q.weight", {12, 8}, InitKind::kDyadic, 0.125),
          Spec("blocks.0.ln1.weight", {8}, InitKind::kOnes, 0),
          Spec("blocks.0.ln1.bias", {8}, InitKind::kZeros, 0)};
}

TEST(ParamInit, ValuesWrittenInPlaceAreTheSlice) {
  for (const ParamSpec& spec : EveryInitKind()) {
    for (const int64_t begin : {int64_t{0}, int64_t{3}}) {
      const int64_t count = spec.numel() - begin;
      std::vector<double> out(static_cast<size_t>(count) + 2, -7.0);
      GenerateParamValues(spec, 11, begin, count, out.data() + 1);
      const at::Tensor slice = GenerateParamSlice(spec, 11, begin, count);
      for (int64_t i = 0; i < count; ++i)
        EXPECT_EQ(out[static_cast<size_t>(i + 1)], slice[i].item<double>())
            << spec.name << " " << i;
      EXPECT_EQ(out.front(), -7.0);  // nothing outside [out, out + count)
      EXPECT_EQ(out.back(), -7.0);
    }
  }
}

TEST(ParamInit, WholeParameterIsACopyEachCallerOwns) {
  const ParamSpec spec = EveryInitKind()[0];
  const at::Tensor expected = GenerateParamSlice(spec, 5, 0, spec.numel()).view(spec.shape);
  at::Tensor first = GenerateParam(spec, 5);
  ASSERT_TRUE(first.equal(expected));
  EXPECT_EQ(first.sizes(), at::IntArrayRef(spec.shape));
  first.mul_(3.0).add_(1.0);  // a reference updating its float64 parameters in place
  const at::Tensor second = GenerateParam(spec, 5);
  EXPECT_TRUE(second.equal(expected));
  EXPECT_NE(second.data_ptr(), first.data_ptr());
  // Another seed and another scale are other values, not the kept ones.
  EXPECT_FALSE(GenerateParam(spec, 6).equal(expected));
  ParamSpec wider = spec;
  wider.scale = 0.04;
  EXPECT_TRUE(GenerateParam(wider, 5).equal(expected * 2.0));
}

}  // namespace
}  // namespace paradiff
