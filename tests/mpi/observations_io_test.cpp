// Observations files (kernels/observations_io.h): every field and every dtype round-trips bit for
// bit; truncated, corrupted or foreign files give a Status naming the path and the byte offset.
#include "kernels/observations_io.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace paradiff {
namespace {

RankObservations Sample() {
  RankObservations o;
  o.rank = 3;
  for (int s = 0; s < 2; ++s) {
    RankStep st;
    st.loss_sum = 0.1 + s;  // not exact in binary
    st.loss_count = 4;
    st.grad_norm = std::nextafter(1.0, 2.0);
    st.loss_scale = 65536;
    st.skipped = s == 1;
    st.padding_max_abs = s * 0.25;
    const at::Tensor base = at::randn({17}, at::kDouble) * 1e3;
    for (auto type : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kLong})
      st.pieces.push_back({"grad", std::string("t.") + c10::toString(type), 5 * s, base.to(type)});
    st.pieces.push_back({"param", "empty", 0, at::empty({0}, at::kFloat)});
    st.pieces.push_back(
        {"param", "nan", 0, at::full({2}, std::numeric_limits<float>::quiet_NaN())});
    st.pieces.push_back({"param", "undefined", 0, at::Tensor()});
    o.steps.push_back(st);
    MemoryAccount m;
    m.bytes = {{"params", 100 + s}, {"grads", 7}};
    o.memory.push_back(m);
  }
  Fingerprint fp;
  fp.group = "world/c0";
  fp.seq = 9;
  fp.op = CollOp::kReduceScatter;
  fp.numel = 12;
  fp.dtype = "c10::BFloat16";
  fp.root = 0;
  fp.rank = 3;
  fp.shape_hash = 0xfedcba9876543210ULL;
  o.collectives = {fp, fp};
  o.collective_marks = {1, 2};
  return o;
}

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || (a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
                          std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0);
}

TEST(ObservationsIo, RoundTripsEveryFieldBitwise) {
  const RankObservations a = Sample();
  StatusOr<RankObservations> parsed = ParseObservations(SerializeObservations(a), "mem");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const RankObservations& b = parsed.value();
  EXPECT_EQ(b.rank, a.rank);
  ASSERT_EQ(b.steps.size(), a.steps.size());
  for (size_t s = 0; s < a.steps.size(); ++s) {
    EXPECT_EQ(std::memcmp(&a.steps[s].loss_sum, &b.steps[s].loss_sum, sizeof(double)), 0);
    EXPECT_EQ(b.steps[s].grad_norm, a.steps[s].grad_norm);
    EXPECT_EQ(b.steps[s].loss_count, a.steps[s].loss_count);
    EXPECT_EQ(b.steps[s].loss_scale, a.steps[s].loss_scale);
    EXPECT_EQ(b.steps[s].skipped, a.steps[s].skipped);
    EXPECT_EQ(b.steps[s].padding_max_abs, a.steps[s].padding_max_abs);
    ASSERT_EQ(b.steps[s].pieces.size(), a.steps[s].pieces.size());
    for (size_t i = 0; i < a.steps[s].pieces.size(); ++i) {
      const TensorPiece &x = a.steps[s].pieces[i], &y = b.steps[s].pieces[i];
      EXPECT_EQ(y.kind, x.kind);
      EXPECT_EQ(y.tensor, x.tensor);
      EXPECT_EQ(y.offset, x.offset);
      EXPECT_TRUE(SameBits(x.values, y.values)) << x.tensor;
    }
    EXPECT_EQ(b.memory[s].bytes, a.memory[s].bytes);
  }
  ASSERT_EQ(b.collectives.size(), 2u);
  EXPECT_EQ(b.collective_marks, a.collective_marks);
  EXPECT_EQ(b.collectives[1].ToString(), a.collectives[1].ToString());
  EXPECT_EQ(b.collectives[1].shape_hash, a.collectives[1].shape_hash);
}

TEST(ObservationsIo, RejectsTruncatedCorruptAndForeignInput) {
  const std::string good = SerializeObservations(Sample());
  for (size_t cut : {size_t{0}, size_t{5}, good.size() / 2, good.size() - 1}) {
    StatusOr<RankObservations> r = ParseObservations(good.substr(0, cut), "f.obs");
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_NE(r.status().ToString().find("f.obs: malformed observations"), std::string::npos);
    EXPECT_NE(r.status().ToString().find("at byte"), std::string::npos);
  }
  EXPECT_FALSE(ParseObservations(good + "x", "f").ok());
  std::string huge = good;
  std::memset(&huge[12 + 4 + 8], 0xff, 8);  // the step count
  EXPECT_NE(ParseObservations(huge, "f").status().ToString().find("implausible step count"),
            std::string::npos);
  EXPECT_FALSE(ReadObservationsFile("/nonexistent/rank0.obs").ok());
}

}  // namespace
}  // namespace paradiff
