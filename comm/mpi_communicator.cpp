// MpiRuntime and the MPI communicator (mpi_communicator.h): argument checks (arg_checks.h) and
// fingerprints as in the local backend, then MPI calls, each wrapped in PARADIFF_MPI_CHECK.
#include "comm/mpi_communicator.h"

#include <ATen/ops/maximum.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "comm/arg_checks.h"

#define PARADIFF_MPI_CHECK(call) ::paradiff::mpi::Check((call), #call, __FILE__, __LINE__)

namespace paradiff {
namespace mpi {

void Check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "code %d", rc);
  int rank = -1, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw std::runtime_error("MPI error on world rank " + std::to_string(rank) + " at " + file + ":" +
                           std::to_string(line) + ": " + call + ": " + text);
}

// Combines two 16-bit floats in float and rounds back (see Note [MPI reduction order], kNative).
template <typename T, bool kMax>
void Combine16(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    b[i] = static_cast<T>(kMax ? ((std::isnan(x) || x > y) ? x : y) : x + y);
  }
}

// The user-defined reduction ops of one MpiRuntime.
struct Context {
  MPI_Op bf16_sum = MPI_OP_NULL, bf16_max = MPI_OP_NULL, half_sum = MPI_OP_NULL,
         half_max = MPI_OP_NULL;
};

}  // namespace mpi

namespace {

constexpr int kHeaderTag = 1;  // Send's header message (see Note [MPI fingerprint check])
constexpr int kDataTag = 2;    // Send's payload

constexpr comm_args::ArgRules kRules{"mpi"};

// MPI counts are ints: every byte count and displacement of a call must fit.
void CheckBytes(CollOp op, int64_t elements, int64_t element_size) {
  if (elements * element_size > INT_MAX)
    comm_args::Invalid(op, std::to_string(elements) + " elements of " +
                               std::to_string(element_size) +
                               " bytes exceed MPI's int count (mpi backend)");
}

void* Ptr(const at::Tensor& t) { return const_cast<void*>(t.data_ptr()); }

bool Overlap(const at::Tensor& a, const at::Tensor& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data_ptr()),
             b0 = reinterpret_cast<uintptr_t>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes() && a.nbytes() > 0 && b.nbytes() > 0;
}

// Byte counts and displacements of element counts.
void ByteLayout(const std::vector<int64_t>& counts, int64_t es, std::vector<int>& bytes,
                std::vector<int>& displs) {
  bytes.resize(counts.size());
  displs.resize(counts.size());
  int64_t off = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    bytes[r] = static_cast<int>(counts[r] * es);
    displs[r] = static_cast<int>(off * es);
    off += counts[r];
  }
}

// The fields Fingerprint::SameCall compares (numel only for ops whose numel must agree).
uint64_t CallHash(const Fingerprint& fp) {
  const bool gather_v = fp.op == CollOp::kAllGather || fp.op == CollOp::kReduceScatter;
  const int64_t v[] = {fp.seq, static_cast<int64_t>(fp.op), gather_v ? -1 : fp.numel, fp.root,
                       static_cast<int64_t>(fp.shape_hash)};
  return Fnv1a(v, sizeof v, StringHash(fp.group) ^ (StringHash(fp.dtype) * 31));
}

std::string Pack(const Fingerprint& fp) {
  std::ostringstream os;
  os << fp.group << '\n'
     << fp.dtype << '\n'
     << fp.seq << ' ' << static_cast<int>(fp.op) << ' ' << fp.numel << ' ' << fp.root << ' '
     << fp.rank << ' ' << fp.shape_hash;
  return os.str();
}

Fingerprint Unpack(const std::string& s) {
  std::istringstream is(s);
  Fingerprint fp;
  int op = 0;
  std::getline(is, fp.group);
  std::getline(is, fp.dtype);
  is >> fp.seq >> op >> fp.numel >> fp.root >> fp.rank >> fp.shape_hash;
  fp.op = static_cast<CollOp>(op);
  return fp;
}

// What Send tells Recv ahead of the payload.
struct PointHeader {
  int64_t seq = 0, numel = 0;
  int32_t dtype = 0, unused = 0;
  uint64_t group_hash = 0;
};

std::string ScalarTypeName(int32_t code) {
  if (code < 0 || code >= static_cast<int32_t>(at::ScalarType::NumOptions)) return "unknown";
  auto name = c10::scalarTypeToTypeMeta(static_cast<at::ScalarType>(code)).name();
  return std::string(name.data(), name.size());
}

struct PendingSend {
  PointHeader header;
  at::Tensor data;
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<const mpi::Context> ctx, MPI_Comm comm, std::string name,
                  MpiOptions opts)
      : ctx_(std::move(ctx)),
        comm_(comm),
        name_(std::move(name)),
        opts_(std::move(opts)),
        rank_(CommRank(comm)),
        size_(CommSize(comm)),
        sequencer_(name_, rank_, size_) {}

  ~MpiCommunicator() override {
    const bool unwinding = std::uncaught_exceptions() > 0;
    int finalized = 0;
    MPI_Finalized(&finalized);
    for (auto& p : pending_) {
      if (finalized) {
        (void)p.release();     // MPI is gone; nothing may touch the requests
      } else if (unwinding) {  // see Note [MPI buffered send]: MPI may still read the copy
        for (MPI_Request& r : p->req)
          if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
        (void)p.release();
      } else {
        MPI_Waitall(2, p->req, MPI_STATUSES_IGNORE);
      }
    }
    if (!finalized && !unwinding) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void AllReduce(at::Tensor& t, ReduceOp op) override {
    comm_args::CheckAllReduce(kRules, t, op);
    CheckBytes(CollOp::kAllReduce, t.numel() + size_, t.element_size());
    const Fingerprint fp = sequencer_.Collective(CollOp::kAllReduce, t.numel(), DtypeName(t),
                                                 static_cast<int64_t>(op));
    Enter(fp);
    at::Tensor flat = t.view({-1});
    if (opts_.reduction == MpiReduction::kNative) {
      NativeAllReduce(flat, op);
    } else {
      std::vector<int64_t> counts(size_, t.numel() / size_);
      for (int64_t r = 0; r < t.numel() % size_; ++r) ++counts[r];
      const at::Tensor piece = ReduceOwnedPiece(flat, counts, op);
      std::vector<int> bytes, displs;
      ByteLayout(counts, t.element_size(), bytes, displs);
      PARADIFF_MPI_CHECK(MPI_Allgatherv(Ptr(piece), bytes[rank_], MPI_BYTE, Ptr(flat), bytes.data(),
                                        displs.data(), MPI_BYTE, comm_));
    }
    Done(fp);
  }

  void AllGather(const at::Tensor& in, at::Tensor& out,
                 const std::vector<int64_t>& counts) override {
    const CollOp kOp = CollOp::kAllGather;
    const int64_t total = comm_args::CheckAllGather(kRules, in, out, counts, rank_, size_);
    CheckBytes(kOp, total, in.element_size());
    const Fingerprint fp =
        sequencer_.Collective(kOp, in.numel(), DtypeName(in), -1, CountsHash(counts));
    Enter(fp);
    const at::Tensor src = Overlap(in, out) ? in.clone() : in;  // MPI forbids aliased buffers
    std::vector<int> bytes, displs;
    ByteLayout(counts, in.element_size(), bytes, displs);
    PARADIFF_MPI_CHECK(MPI_Allgatherv(Ptr(src), bytes[rank_], MPI_BYTE, Ptr(out), bytes.data(),
                                      displs.data(), MPI_BYTE, comm_));
    Done(fp);
  }

  void ReduceScatter(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& counts,
                     ReduceOp op) override {
    const CollOp kOp = CollOp::kReduceScatter;
    const int64_t total = comm_args::CheckReduceScatter(kRules, in, out, counts, op, rank_, size_);
    CheckBytes(kOp, std::max(total, counts[rank_] * size_), in.element_size());
    const Fingerprint fp = sequencer_.Collective(kOp, in.numel(), DtypeName(in),
                                                 static_cast<int64_t>(op), CountsHash(counts));
    Enter(fp);
    if (opts_.reduction == MpiReduction::kNative) {
      at::Tensor piece = out.new_empty({counts[rank_]});  // out may alias in
      std::vector<int> recv(counts.begin(), counts.end());
      PARADIFF_MPI_CHECK(MPI_Reduce_scatter(Ptr(in), Ptr(piece), recv.data(), NativeType(in),
                                            NativeOp(in, op), comm_));
      if (op == ReduceOp::kAvg) piece.div_(static_cast<int64_t>(size_));
      out.copy_(piece);
    } else {
      out.copy_(ReduceOwnedPiece(in, counts, op));
    }
    Done(fp);
  }

  void Broadcast(at::Tensor& t, int root) override {
    comm_args::CheckBroadcast(kRules, t, root, size_);
    CheckBytes(CollOp::kBroadcast, t.numel(), t.element_size());
    const Fingerprint fp = sequencer_.Collective(CollOp::kBroadcast, t.numel(), DtypeName(t), root);
    Enter(fp);
    PARADIFF_MPI_CHECK(MPI_Bcast(Ptr(t), static_cast<int>(t.nbytes()), MPI_BYTE, root, comm_));
    Done(fp);
  }

  void Send(const at::Tensor& t, int dst) override {
    comm_args::CheckPointToPoint(kRules, CollOp::kSend, t, dst, rank_, size_);
    CheckBytes(CollOp::kSend, t.numel(), t.element_size());
    const Fingerprint fp = sequencer_.PointToPoint(CollOp::kSend, t.numel(), DtypeName(t), dst);
    Progress("enter", fp);
    ReapSends();
    pending_.push_back(std::make_unique<PendingSend>());
    PendingSend& p = *pending_.back();
    p.header.seq = fp.seq;
    p.header.numel = t.numel();
    p.header.dtype = static_cast<int32_t>(t.scalar_type());
    p.header.group_hash = StringHash(name_);
    p.data = t.clone(at::MemoryFormat::Contiguous);
    PARADIFF_MPI_CHECK(
        MPI_Isend(&p.header, sizeof(PointHeader), MPI_BYTE, dst, kHeaderTag, comm_, &p.req[0]));
    PARADIFF_MPI_CHECK(MPI_Isend(Ptr(p.data), static_cast<int>(p.data.nbytes()), MPI_BYTE, dst,
                                 kDataTag, comm_, &p.req[1]));
    Progress("done", fp);
  }

  void Recv(at::Tensor& t, int src) override {
    comm_args::CheckPointToPoint(kRules, CollOp::kRecv, t, src, rank_, size_);
    CheckBytes(CollOp::kRecv, t.numel(), t.element_size());
    const Fingerprint fp = sequencer_.PointToPoint(CollOp::kRecv, t.numel(), DtypeName(t), src);
    Progress("enter", fp);
    ReapSends();
    PointHeader h;
    PARADIFF_MPI_CHECK(MPI_Recv(&h, sizeof h, MPI_BYTE, src, kHeaderTag, comm_, MPI_STATUS_IGNORE));
    if (h.numel != t.numel() || h.dtype != static_cast<int32_t>(t.scalar_type())) {
      MPI_Status status;
      int bytes = 0;
      PARADIFF_MPI_CHECK(MPI_Probe(src, kDataTag, comm_, &status));
      PARADIFF_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &bytes));
      std::vector<char> sink(static_cast<size_t>(std::max(bytes, 1)));
      PARADIFF_MPI_CHECK(
          MPI_Recv(sink.data(), bytes, MPI_BYTE, src, kDataTag, comm_, MPI_STATUS_IGNORE));
      Fingerprint sent;
      sent.group = h.group_hash == StringHash(name_) ? name_ : "<another group>";
      sent.seq = h.seq;
      sent.op = CollOp::kSend;
      sent.numel = h.numel;
      sent.dtype = ScalarTypeName(h.dtype);
      sent.root = rank_;
      sent.rank = src;
      throw CollectiveMismatch("point-to-point mismatch in group '" + name_ + "': rank " +
                                   std::to_string(src) + " sent " + sent.ToString() + " but rank " +
                                   std::to_string(rank_) + " receives " + fp.ToString(),
                               sent, fp);
    }
    PARADIFF_MPI_CHECK(MPI_Recv(Ptr(t), static_cast<int>(t.nbytes()), MPI_BYTE, src, kDataTag,
                                comm_, MPI_STATUS_IGNORE));
    Progress("done", fp);
  }

  void Barrier() override {
    const Fingerprint fp = sequencer_.Collective(CollOp::kBarrier, 0, "", -1);
    Enter(fp);
    ReapSends();
    PARADIFF_MPI_CHECK(MPI_Barrier(comm_));
    Done(fp);
  }

  std::unique_ptr<Communicator> Split(int color, int key) override {
    const Fingerprint fp = sequencer_.Collective(CollOp::kSplit, 0, "", -1);
    Enter(fp);
    const int mine[2] = {color, key};
    std::vector<int> all(2 * static_cast<size_t>(size_));
    PARADIFF_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm_));
    std::vector<int> colors;
    for (int r = 0; r < size_; ++r) colors.push_back(all[2 * r]);
    std::sort(colors.begin(), colors.end());
    colors.erase(std::unique(colors.begin(), colors.end()), colors.end());
    const int dense =
        static_cast<int>(std::lower_bound(colors.begin(), colors.end(), color) - colors.begin());
    MPI_Comm child = MPI_COMM_NULL;
    PARADIFF_MPI_CHECK(MPI_Comm_split(comm_, dense, key, &child));
    const std::string suffix = splits_done_ == 0 ? "" : "." + std::to_string(splits_done_);
    ++splits_done_;
    Done(fp);
    return std::make_unique<MpiCommunicator>(ctx_, child,
                                             name_ + "/c" + std::to_string(color) + suffix, opts_);
  }

 private:
  static int CommRank(MPI_Comm c) {
    int r = -1;
    PARADIFF_MPI_CHECK(MPI_Comm_rank(c, &r));
    return r;
  }
  static int CommSize(MPI_Comm c) {
    int s = 0;
    PARADIFF_MPI_CHECK(MPI_Comm_size(c, &s));
    return s;
  }

  void Progress(const char* what, const Fingerprint& fp) const {
    if (opts_.progress) opts_.progress(std::string(what) + " " + fp.ToString());
  }
  void Enter(const Fingerprint& fp) {
    Progress("enter", fp);
    Agree(fp);
  }
  void Done(const Fingerprint& fp) const { Progress("done", fp); }

  // See Note [MPI fingerprint check].
  void Agree(const Fingerprint& fp) {
    if (!opts_.check_fingerprints) return;
    const uint64_t mine = CallHash(fp);
    std::vector<uint64_t> all(size_);
    PARADIFF_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_));
    int odd = -1;
    for (int r = 1; r < size_ && odd < 0; ++r)
      if (all[r] != all[0]) odd = r;
    if (odd < 0) return;
    const std::string packed = Pack(fp);
    const int len = static_cast<int>(packed.size());
    std::vector<int> lens(size_), displs(size_, 0);
    PARADIFF_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_));
    std::partial_sum(lens.begin(), lens.end() - 1, displs.begin() + 1);
    std::string buf(static_cast<size_t>(displs.back() + lens.back()), '\0');
    PARADIFF_MPI_CHECK(MPI_Allgatherv(packed.data(), len, MPI_CHAR, &buf[0], lens.data(),
                                      displs.data(), MPI_CHAR, comm_));
    const Fingerprint a = Unpack(buf.substr(displs[0], lens[0]));
    const Fingerprint b = Unpack(buf.substr(displs[odd], lens[odd]));
    throw CollectiveMismatch("collective mismatch in group '" + name_ + "': rank 0 called " +
                                 a.ToString() + " but rank " + std::to_string(odd) + " called " +
                                 b.ToString(),
                             a, b);
  }

  void ReapSends() {
    pending_.erase(
        std::remove_if(pending_.begin(), pending_.end(),
                       [](std::unique_ptr<PendingSend>& p) {
                         int done = 0;
                         PARADIFF_MPI_CHECK(MPI_Testall(2, p->req, &done, MPI_STATUSES_IGNORE));
                         return done != 0;
                       }),
        pending_.end());
  }

  // See Note [MPI reduction order], kRankOrder: this rank's piece of the reduction of `in`, reduced
  // from every rank's copy of that piece in rank order, exactly like the local backend.
  at::Tensor ReduceOwnedPiece(const at::Tensor& in, const std::vector<int64_t>& counts,
                              ReduceOp op) {
    const int64_t es = in.element_size(), mine = counts[rank_];
    at::Tensor stage = in.new_empty({size_, mine});
    std::vector<int> send_bytes, send_displs;
    ByteLayout(counts, es, send_bytes, send_displs);
    std::vector<int> recv_bytes(size_, static_cast<int>(mine * es)), recv_displs(size_);
    for (int r = 0; r < size_; ++r) recv_displs[r] = static_cast<int>(r * mine * es);
    PARADIFF_MPI_CHECK(MPI_Alltoallv(Ptr(in), send_bytes.data(), send_displs.data(), MPI_BYTE,
                                     Ptr(stage), recv_bytes.data(), recv_displs.data(), MPI_BYTE,
                                     comm_));
    at::Tensor acc = stage[0].clone(at::MemoryFormat::Contiguous);
    for (int r = 1; r < size_; ++r) {
      if (op == ReduceOp::kMax) {
        at::maximum_out(acc, acc, stage[r]);
      } else {
        acc.add_(stage[r]);
      }
    }
    if (op == ReduceOp::kAvg) acc.div_(static_cast<int64_t>(size_));
    return acc;
  }

  void NativeAllReduce(at::Tensor& flat, ReduceOp op) {
    const int n = static_cast<int>(flat.numel());
    PARADIFF_MPI_CHECK(MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : Ptr(flat), Ptr(flat), n,
                                  NativeType(flat), NativeOp(flat, op), 0, comm_));
    PARADIFF_MPI_CHECK(MPI_Bcast(Ptr(flat), n, NativeType(flat), 0, comm_));
    if (op == ReduceOp::kAvg) flat.div_(static_cast<int64_t>(size_));
  }

  static MPI_Datatype NativeType(const at::Tensor& t) {
    switch (t.scalar_type()) {
      case at::kFloat:
        return MPI_FLOAT;
      case at::kDouble:
        return MPI_DOUBLE;
      case at::kLong:
        return MPI_INT64_T;
      case at::kInt:
        return MPI_INT32_T;
      case at::kShort:
        return MPI_INT16_T;
      case at::kChar:
        return MPI_INT8_T;
      case at::kByte:
        return MPI_UINT8_T;
      case at::kBFloat16:
      case at::kHalf:
        return MPI_UINT16_T;
      default:
        throw std::invalid_argument("mpi backend: no native reduction for " + DtypeName(t));
    }
  }

  MPI_Op NativeOp(const at::Tensor& t, ReduceOp op) const {
    const bool max = op == ReduceOp::kMax;
    if (t.scalar_type() == at::kBFloat16) return max ? ctx_->bf16_max : ctx_->bf16_sum;
    if (t.scalar_type() == at::kHalf) return max ? ctx_->half_max : ctx_->half_sum;
    return max ? MPI_MAX : MPI_SUM;
  }

  std::shared_ptr<const mpi::Context> ctx_;  // the runtime's ops (outlive every communicator)
  MPI_Comm comm_;                            // owned: freed in the destructor
  std::string name_;
  MpiOptions opts_;
  int rank_, size_;
  FingerprintSequencer sequencer_;
  std::vector<std::unique_ptr<PendingSend>> pending_;  // see Note [MPI buffered send]
  int splits_done_ = 0;
};

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  PARADIFF_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized)
    throw std::runtime_error("MpiRuntime: MPI is already initialized in this process");
  PARADIFF_MPI_CHECK(MPI_Init(argc, argv));
  PARADIFF_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  PARADIFF_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  PARADIFF_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  auto ctx = std::make_shared<mpi::Context>();
  PARADIFF_MPI_CHECK(MPI_Op_create(&mpi::Combine16<c10::BFloat16, false>, 1, &ctx->bf16_sum));
  PARADIFF_MPI_CHECK(MPI_Op_create(&mpi::Combine16<c10::BFloat16, true>, 1, &ctx->bf16_max));
  PARADIFF_MPI_CHECK(MPI_Op_create(&mpi::Combine16<c10::Half, false>, 1, &ctx->half_sum));
  PARADIFF_MPI_CHECK(MPI_Op_create(&mpi::Combine16<c10::Half, true>, 1, &ctx->half_max));
  context_ = std::move(ctx);
}

MpiRuntime::~MpiRuntime() {
  for (MPI_Op* op :
       {&context_->bf16_sum, &context_->bf16_max, &context_->half_sum, &context_->half_max})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
  MPI_Finalize();
}

std::unique_ptr<Communicator> MpiRuntime::World(const MpiOptions& options) {
  MPI_Comm dup = MPI_COMM_NULL;
  PARADIFF_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  return std::make_unique<MpiCommunicator>(context_, dup, "world", options);
}

std::unique_ptr<Communicator> MpiRuntime::World(const MpiOptions& options, int size) {
  if (size <= 0 || size > world_size_ || world_rank_ >= size)
    throw std::invalid_argument("MpiRuntime::World: world rank " + std::to_string(world_rank_) +
                                " cannot join a world of the first " + std::to_string(size) +
                                " of " + std::to_string(world_size_) + " ranks");
  MPI_Group all = MPI_GROUP_NULL, first = MPI_GROUP_NULL;
  PARADIFF_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &all));
  int range[1][3] = {{0, size - 1, 1}};
  PARADIFF_MPI_CHECK(MPI_Group_range_incl(all, 1, range, &first));
  MPI_Comm comm = MPI_COMM_NULL;
  const int made = MPI_Comm_create_group(MPI_COMM_WORLD, first, /*tag=*/0, &comm);
  MPI_Group_free(&first);
  MPI_Group_free(&all);
  PARADIFF_MPI_CHECK(made);
  PARADIFF_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return std::make_unique<MpiCommunicator>(context_, comm, "world", options);
}

void MpiRuntime::Abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace paradiff
