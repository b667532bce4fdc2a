// Gradient buckets: which parameters are reduced together. Parameters are taken in backward order
// (last parameter first, the order their gradients become ready); a bucket closes when the next
// parameter would push it past zero.bucket_elems (a parameter larger than a bucket gets its own).
// Within a bucket parameters are packed in ascending flat order (kernels/flat_pack.h).
#pragma once

#include <vector>

#include "kernels/faults.h"
#include "kernels/flat_layout.h"

namespace paradiff {

// Buckets in reduction order; each a list of ascending entry indices.
std::vector<std::vector<int>> PlanBuckets(const FlatLayout& layout, int64_t bucket_elems,
                                          int dp_rank, const FaultSet& faults);

}  // namespace paradiff
