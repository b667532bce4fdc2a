// NcclWorld and the nccl communicator (nccl_communicator.h): argument checks and fingerprints as in
// the local backend (arg_checks.h, nccl_args.h), then staging copies and NCCL calls, each wrapped
// in PARADIFF_CUDA_CHECK / PARADIFF_NCCL_CHECK; Call() prefixes every failure with the rank and
// group.
#include "comm/nccl_communicator.h"

#include <ATen/ops/empty.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "comm/nccl_args.h"
#include "core/cuda/cuda_support.h"

#define PARADIFF_NCCL_CHECK(comm, call) \
  ::paradiff::nccl::CheckNccl((call), (comm), #call, __FILE__, __LINE__)

namespace paradiff {
namespace nccl {

void CheckNccl(ncclResult_t rc, ncclComm_t comm, const char* call, const char* file, int line) {
  if (rc == ncclSuccess) return;
  const char* last = ncclGetLastError(comm);
  throw std::runtime_error(
      std::string("NCCL error at ") + file + ":" + std::to_string(line) + ": " + call + ": " +
      ncclGetErrorString(rc) +
      (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : ""));
}

namespace {

ncclDataType_t ReduceType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kHalf:
      return ncclFloat16;
    case at::kLong:
      return ncclInt64;
    case at::kInt:
      return ncclInt32;
    case at::kChar:
      return ncclInt8;
    default:
      return ncclUint8;  // kByte (nccl::Rules rejected the rest)
  }
}

ncclRedOp_t ReduceOpOf(ReduceOp op) { return op == ReduceOp::kMax ? ncclMax : ncclSum; }

int DtypeCode(const at::Tensor& t) { return static_cast<int>(t.scalar_type()); }

void* Ptr(const at::Tensor& t) { return const_cast<void*>(t.data_ptr()); }

// Host or device tensor <-> staging memory (cudaMemcpyDefault: unified addressing tells which).
void CopyIn(void* dst, const at::Tensor& t, cudaStream_t s) {
  if (t.nbytes() > 0)
    PARADIFF_CUDA_CHECK(cudaMemcpyAsync(dst, Ptr(t), t.nbytes(), cudaMemcpyDefault, s));
}
void CopyOut(const at::Tensor& t, const void* src, cudaStream_t s) {
  if (t.nbytes() > 0)
    PARADIFF_CUDA_CHECK(cudaMemcpyAsync(Ptr(t), src, t.nbytes(), cudaMemcpyDefault, s));
}

}  // namespace

// State shared by the communicators of one world on this rank.
struct World {
  int device = 0;
  int world_rank = 0;
  NcclOptions options;
  std::string abort_reason;  // non-empty after a hang aborted this rank's communicators
};

}  // namespace nccl

namespace {

using cuda::AsyncBuffer;
using cuda::DeviceGuard;

class NcclCommunicator : public Communicator {
  // See Note [NCCL buffered send]: a point-to-point communicator and its stream.
  struct Lane {
    cuda::Stream stream;
    ncclComm_t comm = nullptr;
  };

 public:
  // The caller makes the world's device current (the streams are created on it). Takes `coll`
  // over; on failure it is aborted.
  NcclCommunicator(std::shared_ptr<nccl::World> world, ncclComm_t coll, std::string name)
      : world_(std::move(world)),
        coll_(coll),
        name_(std::move(name)),
        rank_(CommRank(coll)),
        size_(CommCount(coll)),
        sequencer_(name_, rank_, size_) {
    try {
      Connect();
    } catch (...) {
      for (ncclComm_t c : {up_.comm, down_.comm, coll_})
        if (c != nullptr) (void)ncclCommAbort(c);
      throw;
    }
  }

  ~NcclCommunicator() override {
    const bool unwinding = std::uncaught_exceptions() > 0;
    int previous = -1;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(world_->device);
    bool abort = unwinding || !world_->abort_reason.empty();
    if (!abort) {
      try {  // see Note [NCCL buffered send]: sends still in flight reach their receivers first
        up_.stream.Synchronize();
        down_.stream.Synchronize();
      } catch (const std::exception&) {
        abort = true;  // a destructor must not throw; aborting releases what is left
      }
    }
    for (ncclComm_t c : {up_.comm, down_.comm, coll_})
      if (c != nullptr) (void)(abort ? ncclCommAbort(c) : ncclCommDestroy(c));
    for (cuda::Stream* stream : {&up_.stream, &down_.stream, &coll_stream_, &copy_stream_})
      stream->Reset();
    if (previous >= 0) (void)cudaSetDevice(previous);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void AllReduce(at::Tensor& t, ReduceOp op) override {
    comm_args::CheckAllReduce(rules(), t, op);
    const Fingerprint fp = sequencer_.Collective(CollOp::kAllReduce, t.numel(), DtypeName(t),
                                                 static_cast<int64_t>(op));
    Call(fp, nccl::DtypeCode(t), [&] {
      if (t.numel() == 0) return;
      const cudaStream_t s = coll_stream_.get();
      AsyncBuffer buf(t.nbytes(), s);
      nccl::CopyIn(buf.get(), t, s);
      PARADIFF_NCCL_CHECK(coll_, ncclAllReduce(buf.get(), buf.get(), t.numel(), nccl::ReduceType(t),
                                               nccl::ReduceOpOf(op), coll_, s));
      nccl::CopyOut(t, buf.get(), s);
      Wait(s, fp);
      if (op == ReduceOp::kAvg) t.div_(static_cast<int64_t>(size_));
    });
  }

  void AllGather(const at::Tensor& in, at::Tensor& out,
                 const std::vector<int64_t>& counts) override {
    const CollOp kOp = CollOp::kAllGather;
    const int64_t total = comm_args::CheckAllGather(rules(), in, out, counts, rank_, size_);
    const Fingerprint fp =
        sequencer_.Collective(kOp, in.numel(), DtypeName(in), -1, CountsHash(counts));
    Call(fp, nccl::DtypeCode(in), [&] {
      if (total == 0) return;
      const cudaStream_t s = coll_stream_.get();
      const size_t es = in.element_size();
      const std::vector<size_t> off = ByteOffsets(counts, es);
      AsyncBuffer buf(out.nbytes(), s);
      nccl::CopyIn(buf.get() + off[rank_], in, s);
      if (std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; })) {
        PARADIFF_NCCL_CHECK(coll_, ncclAllGather(buf.get() + off[rank_], buf.get(), counts[0] * es,
                                                 ncclUint8, coll_, s));
      } else {  // see Note [NCCL uneven counts]
        PARADIFF_NCCL_CHECK(coll_, ncclGroupStart());
        for (int r = 0; r < size_; ++r)
          if (counts[r] > 0)
            PARADIFF_NCCL_CHECK(coll_, ncclBroadcast(buf.get() + off[r], buf.get() + off[r],
                                                     counts[r] * es, ncclUint8, r, coll_, s));
        PARADIFF_NCCL_CHECK(coll_, ncclGroupEnd());
      }
      nccl::CopyOut(out, buf.get(), s);
      Wait(s, fp);
    });
  }

  void ReduceScatter(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& counts,
                     ReduceOp op) override {
    const CollOp kOp = CollOp::kReduceScatter;
    const int64_t total = comm_args::CheckReduceScatter(rules(), in, out, counts, op, rank_, size_);
    const Fingerprint fp = sequencer_.Collective(kOp, in.numel(), DtypeName(in),
                                                 static_cast<int64_t>(op), CountsHash(counts));
    Call(fp, nccl::DtypeCode(in), [&] {
      if (total == 0) return;
      const cudaStream_t s = coll_stream_.get();
      const size_t es = in.element_size();
      const std::vector<size_t> off = ByteOffsets(counts, es);
      AsyncBuffer src(in.nbytes(), s), dst(out.nbytes(), s);
      nccl::CopyIn(src.get(), in, s);
      const ncclDataType_t type = nccl::ReduceType(in);
      if (std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; })) {
        PARADIFF_NCCL_CHECK(coll_, ncclReduceScatter(src.get(), dst.get(), counts[0], type,
                                                     nccl::ReduceOpOf(op), coll_, s));
      } else {  // see Note [NCCL uneven counts]
        PARADIFF_NCCL_CHECK(coll_, ncclGroupStart());
        for (int r = 0; r < size_; ++r)
          if (counts[r] > 0)
            PARADIFF_NCCL_CHECK(coll_, ncclReduce(src.get() + off[r], dst.get(), counts[r], type,
                                                  nccl::ReduceOpOf(op), r, coll_, s));
        PARADIFF_NCCL_CHECK(coll_, ncclGroupEnd());
      }
      nccl::CopyOut(out, dst.get(), s);
      Wait(s, fp);
      if (op == ReduceOp::kAvg) out.div_(static_cast<int64_t>(size_));
    });
  }

  void Broadcast(at::Tensor& t, int root) override {
    comm_args::CheckBroadcast(rules(), t, root, size_);
    const Fingerprint fp = sequencer_.Collective(CollOp::kBroadcast, t.numel(), DtypeName(t), root);
    Call(fp, nccl::DtypeCode(t), [&] {
      if (t.numel() == 0) return;
      const cudaStream_t s = coll_stream_.get();
      AsyncBuffer buf(t.nbytes(), s);
      if (rank_ == root) nccl::CopyIn(buf.get(), t, s);
      PARADIFF_NCCL_CHECK(
          coll_, ncclBroadcast(buf.get(), buf.get(), t.nbytes(), ncclUint8, root, coll_, s));
      if (rank_ != root) nccl::CopyOut(t, buf.get(), s);
      Wait(s, fp);
    });
  }

  void Send(const at::Tensor& t, int dst) override {
    comm_args::CheckPointToPoint(rules(), CollOp::kSend, t, dst, rank_, size_);
    const Fingerprint fp = sequencer_.PointToPoint(CollOp::kSend, t.numel(), DtypeName(t), dst);
    Call(fp, -1, [&] {  // see Note [NCCL buffered send]
      const nccl::PointHeader header = nccl::MakeHeader(fp, t);
      const size_t header_bytes = world_->options.check_fingerprints ? sizeof header : 0;
      if (header_bytes + t.nbytes() == 0) return;
      const cudaStream_t copy = copy_stream_.get();
      AsyncBuffer data(header_bytes + t.nbytes(), copy);
      if (header_bytes > 0)
        PARADIFF_CUDA_CHECK(
            cudaMemcpyAsync(data.get(), header.data(), header_bytes, cudaMemcpyHostToDevice, copy));
      nccl::CopyIn(data.get() + header_bytes, t, copy);
      copy_stream_.Synchronize();  // never waits on NCCL: the copy stream carries copies only
      const Lane& lane = LaneTo(dst);
      const cudaStream_t s = lane.stream.get();
      PARADIFF_NCCL_CHECK(lane.comm, ncclGroupStart());
      if (header_bytes > 0)
        PARADIFF_NCCL_CHECK(lane.comm,
                            ncclSend(data.get(), header_bytes, ncclUint8, dst, lane.comm, s));
      if (t.nbytes() > 0)
        PARADIFF_NCCL_CHECK(lane.comm, ncclSend(data.get() + header_bytes, t.nbytes(), ncclUint8,
                                                dst, lane.comm, s));
      PARADIFF_NCCL_CHECK(lane.comm, ncclGroupEnd());
      PARADIFF_CUDA_CHECK(cudaFreeAsync(data.release(), s));  // once the send is done
    });
  }

  void Recv(at::Tensor& t, int src) override {
    comm_args::CheckPointToPoint(rules(), CollOp::kRecv, t, src, rank_, size_);
    const Fingerprint fp = sequencer_.PointToPoint(CollOp::kRecv, t.numel(), DtypeName(t), src);
    Call(fp, -1, [&] {
      nccl::PointHeader header{};
      const size_t header_bytes = world_->options.check_fingerprints ? sizeof header : 0;
      if (header_bytes + t.nbytes() == 0) return;
      const Lane& lane = LaneFrom(src);
      const cudaStream_t s = lane.stream.get();
      AsyncBuffer data(header_bytes + t.nbytes(), s);
      PARADIFF_NCCL_CHECK(lane.comm, ncclGroupStart());
      if (header_bytes > 0)
        PARADIFF_NCCL_CHECK(lane.comm,
                            ncclRecv(data.get(), header_bytes, ncclUint8, src, lane.comm, s));
      if (t.nbytes() > 0)
        PARADIFF_NCCL_CHECK(lane.comm, ncclRecv(data.get() + header_bytes, t.nbytes(), ncclUint8,
                                                src, lane.comm, s));
      PARADIFF_NCCL_CHECK(lane.comm, ncclGroupEnd());
      if (header_bytes > 0)
        PARADIFF_CUDA_CHECK(
            cudaMemcpyAsync(header.data(), data.get(), header_bytes, cudaMemcpyDeviceToHost, s));
      Wait(s, fp);
      if (header_bytes > 0) nccl::CheckHeader(header, fp, t, src);
      nccl::CopyOut(t, data.get() + header_bytes, s);
      Wait(s, fp);
    });
  }

  void Barrier() override {
    const Fingerprint fp = sequencer_.Collective(CollOp::kBarrier, 0, "", -1);
    Call(fp, -1, [&] {
      const cudaStream_t s = coll_stream_.get();
      AsyncBuffer one(sizeof(float), s);
      PARADIFF_CUDA_CHECK(cudaMemsetAsync(one.get(), 0, sizeof(float), s));
      PARADIFF_NCCL_CHECK(coll_,
                          ncclAllReduce(one.get(), one.get(), 1, ncclFloat32, ncclSum, coll_, s));
      Wait(s, fp);
    });
  }

  std::unique_ptr<Communicator> Split(int color, int key) override {
    const Fingerprint fp = sequencer_.Collective(CollOp::kSplit, 0, "", -1);
    std::unique_ptr<Communicator> child;
    Call(fp, -1, [&] {
      const cudaStream_t s = coll_stream_.get();
      const int mine[2] = {color, key};
      std::vector<int> all(2 * static_cast<size_t>(size_));
      AsyncBuffer buf(all.size() * sizeof(int), s);
      PARADIFF_CUDA_CHECK(cudaMemcpyAsync(buf.get() + 2 * sizeof(int) * rank_, mine, sizeof mine,
                                          cudaMemcpyHostToDevice, s));
      PARADIFF_NCCL_CHECK(coll_, ncclAllGather(buf.get() + 2 * sizeof(int) * rank_, buf.get(), 2,
                                               ncclInt32, coll_, s));
      PARADIFF_CUDA_CHECK(cudaMemcpyAsync(all.data(), buf.get(), all.size() * sizeof(int),
                                          cudaMemcpyDeviceToHost, s));
      Wait(s, fp);
      std::vector<int> colors;
      for (int r = 0; r < size_; ++r) colors.push_back(all[2 * r]);
      std::sort(colors.begin(), colors.end());
      colors.erase(std::unique(colors.begin(), colors.end()), colors.end());
      const int dense =
          static_cast<int>(std::lower_bound(colors.begin(), colors.end(), color) - colors.begin());
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      ncclComm_t comm = nullptr;
      PARADIFF_NCCL_CHECK(coll_, ncclCommSplit(coll_, dense, key, &comm, &config));
      const std::string suffix = splits_done_ == 0 ? "" : "." + std::to_string(splits_done_);
      ++splits_done_;
      child = std::make_unique<NcclCommunicator>(world_, comm,
                                                 name_ + "/c" + std::to_string(color) + suffix);
    });
    return child;
  }

 private:
  comm_args::ArgRules rules() const { return nccl::Rules(world_->device); }

  static int CommRank(ncclComm_t c) {
    int r = -1;
    PARADIFF_NCCL_CHECK(c, ncclCommUserRank(c, &r));
    return r;
  }
  static int CommCount(ncclComm_t c) {
    int n = 0;
    PARADIFF_NCCL_CHECK(c, ncclCommCount(c, &n));
    return n;
  }

  static std::vector<size_t> ByteOffsets(const std::vector<int64_t>& counts, size_t es) {
    std::vector<size_t> off(counts.size(), 0);
    for (size_t r = 1; r < counts.size(); ++r)
      off[r] = off[r - 1] + static_cast<size_t>(counts[r - 1]) * es;
    return off;
  }

  // See Note [NCCL buffered send]: one lane per direction, a connection to every peer on it.
  void Connect() {
    for (Lane* lane : {&up_, &down_}) {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      PARADIFF_NCCL_CHECK(coll_, ncclCommSplit(coll_, 0, rank_, &lane->comm, &config));
    }
    if (size_ == 1) return;
    Fingerprint setup;
    setup.group = name_ + " (connecting peers)";
    setup.rank = rank_;
    for (Lane* lane : {&up_, &down_}) {
      const cudaStream_t s = lane->stream.get();
      const size_t bytes = 2 * static_cast<size_t>(size_);
      AsyncBuffer buf(bytes, s);
      PARADIFF_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, bytes, s));
      PARADIFF_NCCL_CHECK(lane->comm, ncclGroupStart());
      for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_) continue;
        if (&LaneTo(peer) == lane)
          PARADIFF_NCCL_CHECK(lane->comm,
                              ncclSend(buf.get() + peer, 1, ncclUint8, peer, lane->comm, s));
        if (&LaneFrom(peer) == lane)
          PARADIFF_NCCL_CHECK(
              lane->comm, ncclRecv(buf.get() + size_ + peer, 1, ncclUint8, peer, lane->comm, s));
      }
      PARADIFF_NCCL_CHECK(lane->comm, ncclGroupEnd());
      Wait(s, setup);
    }
  }

  // Messages to a higher rank travel on up_, to a lower rank on down_.
  const Lane& LaneTo(int dst) const { return dst > rank_ ? up_ : down_; }
  const Lane& LaneFrom(int src) const { return src < rank_ ? up_ : down_; }

  void Progress(const char* what, const Fingerprint& fp) const {
    if (world_->options.progress) world_->options.progress(std::string(what) + " " + fp.ToString());
  }

  // Runs one call: progress lines, the rank's device, the abort check, the fingerprint check of
  // collectives, then `body`. Failures other than the Collective* kinds and bad arguments come out
  // as std::runtime_error prefixed with the rank and group.
  template <typename Body>
  void Call(const Fingerprint& fp, int dtype_code, Body&& body) {
    Progress("enter", fp);
    if (!world_->abort_reason.empty())
      throw CollectiveAborted("nccl backend, world rank " + std::to_string(world_->world_rank) +
                              ": " + fp.ToString() + " after an abort: " + world_->abort_reason);
    try {
      DeviceGuard guard(world_->device);
      if (fp.op != CollOp::kSend && fp.op != CollOp::kRecv) Agree(fp, dtype_code);
      body();
    } catch (const CollectiveMismatch&) {
      throw;
    } catch (const CollectiveHang&) {
      throw;
    } catch (const CollectiveAborted&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("nccl backend, world rank " + std::to_string(world_->world_rank) +
                               ", group '" + name_ + "' rank " + std::to_string(rank_) + ", in " +
                               fp.ToString() + ": " + e.what());
    }
    Progress("done", fp);
  }

  // See Note [NCCL fingerprint check].
  void Agree(const Fingerprint& fp, int dtype_code) {
    if (!world_->options.check_fingerprints || size_ == 1) return;
    const cudaStream_t s = coll_stream_.get();
    const nccl::WireFingerprint mine = nccl::ToWire(fp, dtype_code);
    std::vector<int64_t> all(static_cast<size_t>(size_) * nccl::kWireWords);
    const size_t bytes = sizeof(mine);
    AsyncBuffer buf(bytes * size_, s);
    PARADIFF_CUDA_CHECK(
        cudaMemcpyAsync(buf.get() + bytes * rank_, mine.data(), bytes, cudaMemcpyHostToDevice, s));
    PARADIFF_NCCL_CHECK(
        coll_, ncclAllGather(buf.get() + bytes * rank_, buf.get(), bytes, ncclUint8, coll_, s));
    PARADIFF_CUDA_CHECK(
        cudaMemcpyAsync(all.data(), buf.get(), bytes * size_, cudaMemcpyDeviceToHost, s));
    Wait(s, fp);
    const int odd = nccl::FirstDisagreement(all, size_);
    if (odd >= 0) throw nccl::MismatchError(all, odd, name_);
  }

  // Waits for `s`, watching NCCL's asynchronous errors and the timeout (nccl_communicator.h).
  void Wait(cudaStream_t s, const Fingerprint& fp) {
    const auto start = std::chrono::steady_clock::now();
    const auto timeout = world_->options.timeout;
    while (true) {
      const cudaError_t rc = cudaStreamQuery(s);
      if (rc == cudaSuccess) return;
      if (rc != cudaErrorNotReady) cuda::CheckCuda(rc, "cudaStreamQuery", __FILE__, __LINE__);
      for (ncclComm_t c : {coll_, up_.comm, down_.comm}) {
        if (c == nullptr) continue;
        ncclResult_t async = ncclSuccess;
        PARADIFF_NCCL_CHECK(c, ncclCommGetAsyncError(c, &async));
        nccl::CheckNccl(async, c, "asynchronous error (ncclCommGetAsyncError)", __FILE__, __LINE__);
      }
      if (timeout.count() > 0 && std::chrono::steady_clock::now() - start > timeout) {
        world_->abort_reason = "rank " + std::to_string(world_->world_rank) + " waited more than " +
                               std::to_string(timeout.count()) + " ms in " + fp.ToString();
        throw CollectiveHang("nccl backend: " + world_->abort_reason);
      }
      std::this_thread::yield();
    }
  }

  std::shared_ptr<nccl::World> world_;
  // Streams first: they outlive the NCCL communicators the destructor releases.
  cuda::Stream coll_stream_, copy_stream_;
  Lane up_, down_;
  ncclComm_t coll_ = nullptr;
  std::string name_;
  int rank_, size_;
  FingerprintSequencer sequencer_;
  int splits_done_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> NcclWorld(Communicator& bootstrap, const NcclOptions& options) {
  auto world = std::make_shared<nccl::World>();
  world->world_rank = bootstrap.rank();
  world->options = options;
  ncclUniqueId id{};
  std::string error;
  try {  // every rank reports before anyone waits for the id
    int count = 0;
    PARADIFF_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (count == 0) throw std::runtime_error("cudaGetDeviceCount: 0 devices");
    world->device = options.device >= 0 ? options.device : bootstrap.rank() % count;
    if (world->device >= count)
      throw std::runtime_error("device " + std::to_string(world->device) + " >= device count " +
                               std::to_string(count));
    if (bootstrap.rank() == 0) {
      DeviceGuard guard(world->device);
      PARADIFF_NCCL_CHECK(nullptr, ncclGetUniqueId(&id));
    }
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  at::Tensor failed = at::empty({1}, at::kLong);
  failed.fill_(error.empty() ? 0 : 1);
  bootstrap.AllReduce(failed, ReduceOp::kMax);
  if (failed.item<int64_t>() != 0)
    throw std::runtime_error("NcclWorld: world rank " + std::to_string(bootstrap.rank()) + ": " +
                             (error.empty() ? "another rank failed to set up CUDA / NCCL" : error));
  at::Tensor bytes = at::empty({static_cast<int64_t>(sizeof id)}, at::kByte);
  std::memcpy(bytes.data_ptr(), &id, sizeof id);
  bootstrap.Broadcast(bytes, 0);
  std::memcpy(&id, bytes.data_ptr(), sizeof id);
  ncclComm_t comm = nullptr;
  try {
    DeviceGuard guard(world->device);
    PARADIFF_NCCL_CHECK(nullptr, ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
    return std::make_unique<NcclCommunicator>(world, comm, "world");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("NcclWorld: world rank " + std::to_string(bootstrap.rank()) + ": " +
                             e.what());
  }
}

}  // namespace paradiff
