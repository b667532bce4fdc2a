// The hashes of comm/communicator.h that fingerprints carry across ranks and into stored files:
// their values must never change.
#include "comm/communicator.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace paradiff {
namespace {

// FNV-1a with the 64-bit prime, but kFnvOffset is 1469598103934665603, not the standard basis
// 14695981039346656037: the values below are this project's, pinned as they are.
TEST(CommunicatorHash, StringHashIsPinned) {
  EXPECT_EQ(StringHash(""), kFnvOffset);
  EXPECT_EQ(StringHash("a"), 0x44bd8ad473cd9906ULL);
  EXPECT_EQ(StringHash("foobar"), 0x88fad7c0a8ff07f2ULL);
  EXPECT_EQ(Fnv1a("bar", 3, StringHash("foo")), StringHash("foobar"));
}

TEST(CommunicatorHash, CountsHashHashesLittleEndianSizeThenCounts) {
  const unsigned char bytes[] = {2, 0, 0, 0, 0,    0,    0,    0,    3,    0,    0,    0,
                                 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(CountsHash({3, -1}), Fnv1a(bytes, sizeof bytes));
  EXPECT_EQ(CountsHash({3, -1}), 0x64b33cd09b20d49aULL);
}

}  // namespace
}  // namespace paradiff
