#include "oracles/collective_oracle.h"

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include "oracles/tolerance.h"

namespace paradiff {

namespace {

// One call as Fingerprint::ToString prints it: "group#seq op numel=N dtype=D key=V [counts#H]".
struct Call {
  bool parsed = false;
  std::string text, group, op, dtype, attr_key, attr, counts;
  int64_t seq = -1, numel = -1;
};

Call ParseCall(const std::string& text) {
  static const std::regex re(
      R"(^(\S+)#(\d+) (\S+) numel=(-?\d+) dtype=(\S*) (op|root|dst|src)=(\S+)(?: counts#(\S+))?)");
  Call c;
  c.text = text;
  std::smatch m;
  if (!std::regex_search(text, m, re)) return c;
  c.parsed = true;
  c.group = m[1];
  c.seq = std::stoll(m[2]);
  c.op = m[3];
  c.numel = std::stoll(m[4]);
  c.dtype = m[5];
  c.attr_key = m[6];
  c.attr = m[7];
  c.counts = m[8];
  return c;
}

// "<a>_vs_<b>" with the two names sorted, so the arrival order of the ranks does not matter.
std::string Versus(const std::string& a, const std::string& b) {
  return std::min(a, b) + "_vs_" + std::max(a, b);
}

// Layout-independent name of how two calls differ (see the header).
std::string Difference(const Call& a, const Call& b) {
  if (!a.parsed || !b.parsed) return "";
  if (a.op != b.op) return Versus(a.op, b.op);
  if (a.dtype != b.dtype) return a.op + ".dtype";
  if (a.attr != b.attr || a.attr_key != b.attr_key)
    return a.op + "." + (a.attr_key == "op" ? "reduce_op" : a.attr_key == "root" ? "root" : "peer");
  if (a.counts != b.counts) return a.op + ".counts";
  if (a.numel != b.numel) return a.op + ".numel";
  if (a.group != b.group || a.seq != b.seq) return a.op + ".order";
  return a.op + ".unknown";
}

Verdict Base(VerdictKind kind, const Config& cfg, int64_t step, int rank, int other,
             const std::string& detail, const std::string& msg) {
  Verdict v;
  v.kind = kind;
  v.oracle = "collective";
  v.where.step = step;
  v.where.phase = Phase::kCollective;
  v.where.rank = rank;
  v.where.other_rank = other;
  v.where.detail = detail;
  v.where.error = 1;  // one disagreeing call (see Note [Discrete bounds])
  v.where.bound = kDiscreteBound;
  v.message = msg + " (" + (step >= 0 ? "step " + std::to_string(step) + ", " : std::string()) +
              "seed " + std::to_string(cfg.seed) + ")";
  return v;
}

// The step of a recorded call of rank `r` (RankObservations::collective_marks); -1 if unrecorded.
int64_t StepOfCall(const RankObservations& r, const Fingerprint* call) {
  const int64_t k = call - r.collectives.data();
  const auto& marks = r.collective_marks;
  const auto it = std::upper_bound(marks.begin(), marks.end(), k);
  return it == marks.end() ? -1 : static_cast<int64_t>(it - marks.begin());
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

Verdict MismatchVerdict(const EngineOutcome& e, const Config& cfg) {
  static const std::regex coll(R"(mismatch in group '([^']*)': rank (\d+) (?:called|sent) (.+?) )"
                               R"(but rank (\d+) (?:called|receives) (.+)$)");
  const std::string line = FirstLine(e.failure);
  std::smatch m;
  if (!std::regex_search(line, m, coll))
    return Base(VerdictKind::kCollective, cfg, e.failure_step, e.failure_rank, -1, "", e.failure);
  const Call a = ParseCall(m[3]), b = ParseCall(m[5]);
  return Base(VerdictKind::kCollective, cfg, e.failure_step, std::stoi(m[2]), std::stoi(m[4]),
              Difference(a, b),
              "ranks disagree on a collective in group '" + m[1].str() + "': rank " + m[2].str() +
                  " called " + m[3].str() + " but rank " + m[4].str() + " called " + m[5].str());
}

Verdict HangVerdict(const EngineOutcome& e, const Config& cfg) {
  // A wait that timed out, or one the backend knows can never complete (a member finished).
  static const std::regex timed_out(
      R"(collective hang: world rank (\d+) waited more than (\d+) ms in (.+)$)");
  static const std::regex never(
      R"(collective hang: world rank (\d+) waits in (.+), which can never complete: world rank (\d+) finished without it$)");
  static const std::regex state(R"(^\s*rank (\d+): (.*)$)");
  const std::string line = FirstLine(e.failure);
  std::smatch m;
  const bool waited = std::regex_search(line, m, timed_out);
  if (!waited && !std::regex_search(line, m, never))
    return Base(VerdictKind::kHang, cfg, e.failure_step, e.failure_rank, -1, "", e.failure);
  const int waiter = std::stoi(m[1]);
  const std::string waited_in = waited ? m[3].str() : m[2].str();
  const std::string how = waited ? " waited " + m[2].str() + " ms in " : " waits forever in ";
  const Call call = ParseCall(waited_in);
  int other = waited ? -1 : std::stoi(m[3]);
  std::string other_state = waited ? "unknown" : "finished", other_text = other_state;
  std::istringstream lines(e.failure);
  for (std::string l; waited && std::getline(lines, l);) {
    std::smatch s;
    if (!std::regex_search(l, s, state)) continue;
    const int r = std::stoi(s[1]);
    const std::string st = s[2];
    if (r == waiter || st == "waiting in " + waited_in) continue;
    other = r;
    other_text = st;
    if (st.rfind("waiting in ", 0) == 0) {
      const Call c = ParseCall(st.substr(11));
      other_state = c.parsed ? c.op : "waiting";
    } else {
      other_state = st.substr(0, st.find_first_of(" :("));
    }
    break;
  }
  const std::string op = call.parsed ? call.op : "call";
  return Base(VerdictKind::kHang, cfg, e.failure_step, waiter, other, Versus(op, other_state),
              "hang: rank " + std::to_string(waiter) + how + waited_in +
                  (other >= 0 ? " while rank " + std::to_string(other) + " was " + other_text
                              : std::string(" (no other rank's state known)")));
}

}  // namespace

Verdict EngineFailureVerdict(const EngineOutcome& e, const Config& cfg) {
  if (!e.target.empty()) {  // an external target's failure (targets/target_runner.h)
    Verdict v;
    v.kind = e.failure_kind == FailureKind::kHang ? VerdictKind::kHang : VerdictKind::kCrash;
    v.oracle = "target";
    v.where.phase = Phase::kRun;
    v.where.rank = e.failure_rank;
    v.where.detail = e.failure_detail;
    v.message = e.failure + " (seed " + std::to_string(cfg.seed) + ")";
    return v;
  }
  if (e.failure_kind == FailureKind::kCollective) return MismatchVerdict(e, cfg);
  if (e.failure_kind == FailureKind::kHang) return HangVerdict(e, cfg);
  Verdict v;
  v.kind = VerdictKind::kCrash;
  v.oracle = "engine";
  v.where.phase = Phase::kRun;
  v.where.rank = e.failure_rank;
  v.message = e.failure + " (seed " + std::to_string(cfg.seed) + ")";
  return v;
}

Verdict CheckCollectiveLogs(const Config& cfg, const Observations& obs) {
  struct Member {
    const RankObservations* obs = nullptr;
    int world_rank = -1;
    std::vector<const Fingerprint*> calls;
    bool ambiguous = false;
  };
  std::map<std::string, std::map<int, Member>> groups;  // group -> group rank -> calls
  for (const auto& r : obs.ranks) {
    for (const auto& fp : r.collectives) {
      if (fp.op == CollOp::kSend || fp.op == CollOp::kRecv) continue;  // numbered per peer
      Member& m = groups[fp.group][fp.rank];
      if (m.world_rank >= 0 && m.world_rank != r.rank) m.ambiguous = true;
      m.world_rank = r.rank;
      m.obs = &r;
      m.calls.push_back(&fp);
    }
  }
  for (const auto& [group, members] : groups) {
    if (std::any_of(members.begin(), members.end(),
                    [](const auto& m) { return m.second.ambiguous; }))
      continue;  // two ranks claim one group rank: the name does not identify one group
    const Member& first = members.begin()->second;
    for (const auto& [grank, m] : members) {
      const size_t n = std::min(first.calls.size(), m.calls.size());
      for (size_t k = 0; k < n; ++k) {
        const Fingerprint &a = *first.calls[k], &b = *m.calls[k];
        if (a.SameCall(b)) continue;
        const Call ca = ParseCall(a.ToString()), cb = ParseCall(b.ToString());
        return Base(VerdictKind::kCollective, cfg, StepOfCall(*m.obs, &b), first.world_rank,
                    m.world_rank, Difference(ca, cb),
                    "the recorded collective logs disagree in group '" + group + "' at call " +
                        std::to_string(k) + ": rank " + std::to_string(first.world_rank) +
                        " called " + ca.text + " but rank " + std::to_string(m.world_rank) +
                        " called " + cb.text);
      }
      if (first.calls.size() != m.calls.size()) {
        const bool longer = m.calls.size() > first.calls.size();
        const Fingerprint& extra = longer ? *m.calls[n] : *first.calls[n];
        const RankObservations& holder = longer ? *m.obs : *first.obs;
        return Base(VerdictKind::kCollective, cfg, StepOfCall(holder, &extra), first.world_rank,
                    m.world_rank, Versus(Name(extra.op), "missing"),
                    "the recorded collective logs disagree in group '" + group + "': rank " +
                        std::to_string(first.world_rank) + " made " +
                        std::to_string(first.calls.size()) + " calls, rank " +
                        std::to_string(m.world_rank) + " made " + std::to_string(m.calls.size()) +
                        "; the first unmatched is " + extra.ToString());
      }
    }
  }
  return Verdict{};
}

Verdict CollectiveOracle::Check(const OracleInput& in) const {
  const EngineOutcome& e = in.outcome;
  if (!e.target.empty())
    return SkipVerdict(name(),
                       "external target " + e.target + ": its collectives are not recorded");
  if (!e.ok) {
    if (e.failure_kind == FailureKind::kCollective || e.failure_kind == FailureKind::kHang)
      return EngineFailureVerdict(e, in.cfg);
    return SkipVerdict(name(), std::string("the engine failed with a ") + Name(e.failure_kind) +
                                   ", not a collective");
  }
  return CheckCollectiveLogs(in.cfg, e.obs);
}

}  // namespace paradiff
