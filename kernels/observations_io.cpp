// Observations <-> bytes (observations_io.h). A Writer appends raw fields; a Reader consumes them
// and stops at the first inconsistency with a message naming the byte offset.
#include "kernels/observations_io.h"

#include <ATen/ops/empty.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "comm/fresh.h"
#include "core/atomic_file.h"

namespace paradiff {

namespace {

constexpr char kMagic[] = "PARADIFF-OBS";
constexpr uint32_t kVersion = 2;  // 2: padding_max_abs, collective_marks
constexpr char kEndMarker[] = "END";
// Plausibility limits against junk sizes (far above anything a budgeted config produces).
constexpr uint64_t kMaxCount = uint64_t{1} << 40;
constexpr int64_t kMaxDims = 16;

class Writer {
 public:
  template <typename T>
  void Raw(T v) {
    static_assert(std::is_trivially_copyable<T>::value, "raw fields are trivially copyable");
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void Str(const std::string& s) {
    Raw<uint64_t>(s.size());
    out_ += s;
  }
  void Tensor(const at::Tensor& t) {
    Raw<uint8_t>(t.defined() ? 1 : 0);
    if (!t.defined()) return;
    const at::Tensor c = t.cpu().contiguous();
    Str(c10::toString(c.scalar_type()));
    Raw<uint64_t>(c.dim());
    for (int64_t s : c.sizes()) Raw<int64_t>(s);
    Raw<uint64_t>(c.nbytes());
    out_.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : in_(bytes) {}
  template <typename T>
  T Raw() {
    T v;
    std::memcpy(&v, Take(sizeof v, "a field"), sizeof v);
    return v;
  }
  uint64_t Count(const char* what) {
    // Every element takes at least one byte: a count beyond the rest of the input is junk.
    const uint64_t n = Raw<uint64_t>();
    if (n > in_.size() - pos_)
      Fail(std::string("implausible ") + what + " count " + std::to_string(n));
    return n;
  }
  std::string Str() {
    const uint64_t n = Count("string length");
    return std::string(Take(n, "a string"), n);
  }
  at::Tensor Tensor() {
    if (Raw<uint8_t>() == 0) return at::Tensor();
    const std::string type = Str();
    at::ScalarType st = at::ScalarType::Undefined;
    for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i)
      if (type == c10::toString(static_cast<at::ScalarType>(i)))
        st = static_cast<at::ScalarType>(i);
    if (st == at::ScalarType::Undefined) Fail("unknown dtype '" + type + "'");
    const uint64_t dims = Raw<uint64_t>();
    if (dims > static_cast<uint64_t>(kMaxDims))
      Fail("implausible tensor rank " + std::to_string(dims));
    std::vector<int64_t> sizes(dims);
    uint64_t numel = 1;
    for (auto& s : sizes) {
      s = Raw<int64_t>();
      if (s < 0 || (s > 0 && numel > kMaxCount / static_cast<uint64_t>(s)))
        Fail("implausible tensor size " + std::to_string(s));
      numel *= static_cast<uint64_t>(s);
    }
    const uint64_t nbytes = Raw<uint64_t>();
    if (nbytes != numel * c10::elementSize(st))
      Fail("tensor byte count " + std::to_string(nbytes) + " does not match its sizes and dtype " +
           type);
    if (nbytes > in_.size() - pos_) Fail("truncated: tensor values run past the end");
    at::Tensor t = Empty(sizes, st);
    if (nbytes > 0) std::memcpy(t.data_ptr(), Take(nbytes, "tensor values"), nbytes);
    return t;
  }
  void Expect(const char* literal, size_t n, const char* what) {
    if (std::memcmp(Take(n, what), literal, n) != 0) Fail(std::string("bad ") + what);
  }
  bool AtEnd() const { return pos_ == in_.size(); }
  size_t pos() const { return pos_; }
  [[noreturn]] void Fail(const std::string& msg) const {
    throw ParseError(msg + " at byte " + std::to_string(pos_));
  }

 private:
  const char* Take(uint64_t n, const char* what) {
    if (n > in_.size() - pos_) Fail(std::string("truncated: ") + what + " runs past the end");
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  const std::string& in_;
  size_t pos_ = 0;
};

void WriteFingerprint(Writer& w, const Fingerprint& fp) {
  w.Str(fp.group);
  w.Raw<int64_t>(fp.seq);
  w.Raw<int32_t>(static_cast<int32_t>(fp.op));
  w.Raw<int64_t>(fp.numel);
  w.Str(fp.dtype);
  w.Raw<int64_t>(fp.root);
  w.Raw<int32_t>(fp.rank);
  w.Raw<uint64_t>(fp.shape_hash);
}

Fingerprint ReadFingerprint(Reader& r) {
  Fingerprint fp;
  fp.group = r.Str();
  fp.seq = r.Raw<int64_t>();
  const int32_t op = r.Raw<int32_t>();
  if (op < 0 || op > static_cast<int32_t>(CollOp::kSplit))
    r.Fail("unknown collective op " + std::to_string(op));
  fp.op = static_cast<CollOp>(op);
  fp.numel = r.Raw<int64_t>();
  fp.dtype = r.Str();
  fp.root = r.Raw<int64_t>();
  fp.rank = r.Raw<int32_t>();
  fp.shape_hash = r.Raw<uint64_t>();
  return fp;
}

}  // namespace

std::string SerializeObservations(const RankObservations& obs) {
  Writer w;
  for (size_t i = 0; i + 1 < sizeof kMagic; ++i) w.Raw<char>(kMagic[i]);
  w.Raw<uint32_t>(kVersion);
  w.Raw<int64_t>(obs.rank);
  w.Raw<uint64_t>(obs.steps.size());
  for (const RankStep& s : obs.steps) {
    w.Raw<double>(s.loss_sum);
    w.Raw<int64_t>(s.loss_count);
    w.Raw<double>(s.grad_norm);
    w.Raw<double>(s.loss_scale);
    w.Raw<uint8_t>(s.skipped ? 1 : 0);
    w.Raw<double>(s.padding_max_abs);
    w.Raw<uint64_t>(s.pieces.size());
    for (const TensorPiece& p : s.pieces) {
      w.Str(p.kind);
      w.Str(p.tensor);
      w.Raw<int64_t>(p.offset);
      w.Tensor(p.values);
    }
  }
  w.Raw<uint64_t>(obs.memory.size());
  for (const MemoryAccount& m : obs.memory) {
    w.Raw<uint64_t>(m.bytes.size());
    for (const auto& [key, value] : m.bytes) {
      w.Str(key);
      w.Raw<int64_t>(value);
    }
  }
  w.Raw<uint64_t>(obs.collectives.size());
  for (const Fingerprint& fp : obs.collectives) WriteFingerprint(w, fp);
  w.Raw<uint64_t>(obs.collective_marks.size());
  for (int64_t m : obs.collective_marks) w.Raw<int64_t>(m);
  for (size_t i = 0; i + 1 < sizeof kEndMarker; ++i) w.Raw<char>(kEndMarker[i]);
  return w.Take();
}

StatusOr<RankObservations> ParseObservations(const std::string& bytes, const std::string& what) {
  Reader r(bytes);
  RankObservations obs;
  try {
    r.Expect(kMagic, sizeof kMagic - 1, "magic (not an observations file)");
    const uint32_t version = r.Raw<uint32_t>();
    if (version != kVersion)
      r.Fail("unsupported version " + std::to_string(version) + " (expected " +
             std::to_string(kVersion) + ")");
    obs.rank = static_cast<int>(r.Raw<int64_t>());
    obs.steps.resize(r.Count("step"));
    for (RankStep& s : obs.steps) {
      s.loss_sum = r.Raw<double>();
      s.loss_count = r.Raw<int64_t>();
      s.grad_norm = r.Raw<double>();
      s.loss_scale = r.Raw<double>();
      s.skipped = r.Raw<uint8_t>() != 0;
      s.padding_max_abs = r.Raw<double>();
      s.pieces.resize(r.Count("piece"));
      for (TensorPiece& p : s.pieces) {
        p.kind = r.Str();
        p.tensor = r.Str();
        p.offset = r.Raw<int64_t>();
        p.values = r.Tensor();
      }
    }
    obs.memory.resize(r.Count("memory account"));
    for (MemoryAccount& m : obs.memory) {
      const uint64_t n = r.Count("memory entry");
      for (uint64_t i = 0; i < n; ++i) {
        std::string key = r.Str();
        m.bytes[key] = r.Raw<int64_t>();
      }
    }
    obs.collectives.resize(r.Count("collective"));
    for (Fingerprint& fp : obs.collectives) fp = ReadFingerprint(r);
    obs.collective_marks.resize(r.Count("collective mark"));
    for (int64_t& m : obs.collective_marks) m = r.Raw<int64_t>();
    r.Expect(kEndMarker, sizeof kEndMarker - 1, "end marker");
    if (!r.AtEnd()) r.Fail("trailing bytes after the end marker");
  } catch (const ParseError& e) {
    return Status::Error("", what + ": malformed observations: " + e.what());
  }
  return obs;
}

Status WriteObservationsFile(const std::string& path, const RankObservations& obs) {
  return WriteFileAtomic(path, SerializeObservations(obs));
}

StatusOr<RankObservations> ReadObservationsFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::Error("", path + ": cannot open observations file");
  std::ostringstream os;
  os << f.rdbuf();
  if (f.bad()) return Status::Error("", path + ": read error");
  return ParseObservations(os.str(), path);
}

}  // namespace paradiff
