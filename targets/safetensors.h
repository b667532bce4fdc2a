// Safetensors files (the format of huggingface/safetensors): 8 bytes little-endian header length
// N, N bytes of JSON header {NAME: {"dtype": "F32", "shape": [...], "data_offsets": [BEGIN, END]},
// "__metadata__": {STRING: STRING}}, then the raw little-endian tensor bytes (offsets relative to
// the end of the header). The external-target protocol (docs/TARGETS.md) writes run inputs and
// reads target observations in this format. Reading never trusts the file: every offset, size and
// dtype is checked and a broken file is a Status naming the file, the tensor and the rule.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "core/status.h"

namespace paradiff {

struct SafeTensors {
  std::map<std::string, at::Tensor> tensors;    // name -> contiguous tensor with its shape
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Dtypes written and read: F64, F32, F16, BF16, I64, I32, BOOL.
Status WriteSafeTensors(const std::string& path, const SafeTensors& st);
StatusOr<SafeTensors> ReadSafeTensors(const std::string& path);

}  // namespace paradiff
