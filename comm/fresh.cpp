#include "comm/fresh.h"

#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <vector>

namespace paradiff {

bool AutogradRecords(const at::Tensor& t) {
  return t.requires_grad() && c10::GradMode::is_enabled() &&
         !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::AutogradCPU);
}

at::Tensor Contiguous(const at::Tensor& t) {
  if (t.is_contiguous()) return t;
  if (!t.is_cpu() || AutogradRecords(t)) return t.contiguous();
  at::Tensor out = at::detail::empty_cpu(t.sizes(), t.scalar_type());
  const int64_t dims = t.dim(), n = t.numel();
  if (n == 0) return out;
  const size_t elem = t.element_size();
  // The innermost dimension is one run when its stride is 1, else runs of one element.
  const int64_t last = t.size(dims - 1);
  const bool dense_rows = t.stride(dims - 1) == 1;
  const int64_t run = dense_rows ? last : 1;
  const int64_t outer_dims = dense_rows ? dims - 1 : dims;
  std::vector<int64_t> index(static_cast<size_t>(outer_dims), 0);
  const char* src = static_cast<const char*>(t.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t done = 0; done < n; done += run) {
    int64_t offset = 0;
    for (int64_t d = 0; d < outer_dims; ++d) offset += index[d] * t.stride(d);
    std::memcpy(dst + done * elem, src + offset * elem, run * elem);
    for (int64_t d = outer_dims - 1; d >= 0; --d) {  // the next index, last dimension fastest
      if (++index[d] < t.size(d)) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace paradiff
