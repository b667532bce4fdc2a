#include "kernels/buckets.h"

#include <algorithm>

namespace paradiff {

std::vector<std::vector<int>> PlanBuckets(const FlatLayout& layout, int64_t bucket_elems,
                                          int dp_rank, const FaultSet& faults) {
  const int n = static_cast<int>(layout.entries().size());
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = n - 1 - i;  // backward order
  if (faults.comm_rank_dependent_bucket_order && dp_rank % 2 == 1) {
    // BUG (zoo: comm.rank_dependent_bucket_order): odd ranks fill buckets in the order their
    // gradient hooks fired in forward registration order, so with more than one bucket the ranks'
    // buckets hold different parameters and the all-reduce adds unrelated gradients together.
    std::reverse(order.begin(), order.end());
  }
  std::vector<std::vector<int>> buckets;
  std::vector<int> cur;
  int64_t cur_elems = 0;
  for (int e : order) {
    const int64_t numel = layout.entries()[e].numel;
    if (!cur.empty() && cur_elems + numel > bucket_elems) {
      buckets.push_back(cur);
      cur.clear();
      cur_elems = 0;
    }
    cur.push_back(e);
    cur_elems += numel;
  }
  if (!cur.empty()) buckets.push_back(cur);
  for (auto& b : buckets) std::sort(b.begin(), b.end());
  return buckets;
}

}  // namespace paradiff
