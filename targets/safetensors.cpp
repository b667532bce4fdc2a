#include "targets/safetensors.h"

#include <ATen/ATen.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/atomic_file.h"

namespace paradiff {

namespace {

// Largest header accepted (the format's own limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct DTypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DTypeName kDTypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"BOOL", at::kBool},
};

const char* NameOf(at::ScalarType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return nullptr;
}

Status Bad(const std::string& path, const std::string& what) {
  return Status::Error(path, path + ": not a valid safetensors file: " + what);
}

}  // namespace

Status WriteSafeTensors(const std::string& path, const SafeTensors& st) {
  nlohmann::json header = nlohmann::json::object();
  if (!st.metadata.empty()) header["__metadata__"] = st.metadata;
  std::vector<at::Tensor> order;
  uint64_t offset = 0;
  for (const auto& [name, t] : st.tensors) {
    const char* dt = NameOf(t.scalar_type());
    if (dt == nullptr)
      return Status::Error(path, path + ": tensor " + name + " has an unsupported dtype");
    at::Tensor c = t.contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {
        {"dtype", dt}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    order.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the reference writer aligns the data to 8 bytes
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);  // little-endian
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& c : order)
    out.append(static_cast<const char*>(c.data_ptr()),
               static_cast<size_t>(c.numel()) * c.element_size());
  return WriteFileAtomic(path, out);
}

StatusOr<SafeTensors> ReadSafeTensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error(path, path + ": cannot be read (missing?)");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string data = ss.str();
  if (data.size() < 8) return Bad(path, "shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(data[i]);
  if (n > kMaxHeaderBytes || n > data.size() - 8)
    return Bad(path, "header length " + std::to_string(n) + " exceeds the file");
  nlohmann::json header =
      nlohmann::json::parse(data.begin() + 8, data.begin() + 8 + static_cast<long>(n), nullptr,
                            /*allow_exceptions=*/false);
  if (!header.is_object()) return Bad(path, "the header is not a JSON object");
  const uint64_t body = data.size() - 8 - n;
  const char* base = data.data() + 8 + n;
  SafeTensors out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) return Bad(path, "__metadata__ is not an object");
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string()) return Bad(path, "__metadata__." + k + " is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor " + name + ": ";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      return Bad(path,
                 where + "needs dtype (string), shape (array) and data_offsets ([begin, end])");
    at::ScalarType type = at::kFloat;
    bool known = false;
    for (const auto& d : kDTypes)
      if (e["dtype"] == d.name) type = d.type, known = true;
    if (!known) return Bad(path, where + "unsupported dtype " + e["dtype"].dump());
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return Bad(path, where + "shape entries must be integers >= 0");
      shape.push_back(d.get<int64_t>());
      numel *= shape.back();
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return Bad(path, where + "data_offsets must be integers >= 0");
    const uint64_t b = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    const uint64_t want = static_cast<uint64_t>(numel) * c10::elementSize(type);
    if (b > end || end > body)
      return Bad(path, where + "data_offsets [" + std::to_string(b) + ", " + std::to_string(end) +
                           ") outside the " + std::to_string(body) + "-byte body");
    if (end - b != want)
      return Bad(path, where + std::to_string(end - b) + " bytes for " +
                           e["dtype"].get<std::string>() + " shape " + e["shape"].dump() +
                           ", which needs " + std::to_string(want));
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    if (want > 0) std::memcpy(t.data_ptr(), base + b, want);
    out.tensors[name] = t;
  }
  return out;
}

}  // namespace paradiff
