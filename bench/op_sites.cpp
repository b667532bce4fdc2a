#include "bench/op_sites.h"

#include <execinfo.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

namespace paradiff::bench {

namespace {

struct Range {
  uintptr_t base = 0, begin = UINTPTR_MAX, end = 0;
};

// The load address and the mapped extent of the main program (dl_iterate_phdr lists it first).
const Range& Executable() {
  static const Range range = [] {
    Range r;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* out = static_cast<Range*>(data);
          out->base = info->dlpi_addr;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            out->begin = std::min<uintptr_t>(out->begin, info->dlpi_addr + ph.p_vaddr);
            out->end = std::max<uintptr_t>(out->end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
          }
          return 1;  // the first object only
        },
        &r);
    return r;
  }();
  return range;
}

// "paradiff::(anonymous namespace)::BlockForward(paradiff::ModelConfig const&, ...)" ->
// "paradiff::BlockForward".
std::string ShortName(std::string name) {
  const std::string anon = "(anonymous namespace)::";
  for (size_t at; (at = name.find(anon)) != std::string::npos;) name.erase(at, anon.size());
  const size_t paren = name.find('(');
  return paren == std::string::npos || paren == 0 ? name : name.substr(0, paren);
}

bool InlinedLibraryCode(const std::string& name) {
  for (const char* prefix : {"at::", "c10::", "std::", "torch::", "caffe2::"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// Function names of the offsets, by addr2line; empty if it could not run.
std::map<uintptr_t, std::string> Resolve(const std::set<uintptr_t>& offsets) {
  char in_path[] = "/tmp/paradiff-op-sites-XXXXXX";
  const int fd = mkstemp(in_path);
  if (fd < 0) return {};
  close(fd);
  {
    std::ofstream in(in_path);
    for (uintptr_t o : offsets) in << std::hex << "0x" << o << "\n";
  }
  const std::string cmd =
      "addr2line -f -C -e /proc/" + std::to_string(getpid()) + "/exe < " + in_path + " 2>/dev/null";
  std::map<uintptr_t, std::string> names;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[4096];
    auto it = offsets.begin();
    bool function_line = true;  // addr2line -f prints the function, then file:line
    while (it != offsets.end() && std::fgets(line, sizeof line, p) != nullptr) {
      if (function_line) {
        std::string name(line);
        if (!name.empty() && name.back() == '\n') name.pop_back();
        names[*it] = ShortName(name);
      } else {
        ++it;
      }
      function_line = !function_line;
    }
    pclose(p);
  }
  std::remove(in_path);
  if (names.size() != offsets.size()) return {};
  return names;
}

}  // namespace

void OpSites::Record(int phase, const char* op) {
  void* frames[32];
  const int n = backtrace(frames, 32);
  const Range& exe = Executable();
  auto in_exe = [&](int i) {
    const auto pc = reinterpret_cast<uintptr_t>(frames[i]);
    return pc > exe.begin && pc <= exe.end;
  };
  // This function and the callback that called it, then torch's dispatch and RecordFunction.
  int i = 0;
  while (i < n && in_exe(i)) ++i;
  while (i < n && !in_exe(i)) ++i;
  Stack stack{};
  for (size_t kept = 0; i < n && kept < kFrames && in_exe(i); ++i)
    // A return address: the call is the instruction before it.
    stack[kept++] = reinterpret_cast<uintptr_t>(frames[i]) - 1 - exe.base;
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_[{phase, op, stack}];
}

void OpSites::Report(const std::vector<std::string>& phases, size_t top, double per) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<uintptr_t> offsets;
  for (const auto& [key, count] : calls_)
    for (uintptr_t o : std::get<2>(key))
      if (o != 0) offsets.insert(o);
  const std::map<uintptr_t, std::string> names = Resolve(offsets);
  if (names.empty())
    std::fprintf(stderr, "op sites: addr2line (binutils) gave no names; sites are addresses\n");
  auto site = [&](const Stack& stack) {
    std::string first;
    for (uintptr_t o : stack) {
      if (o == 0) break;
      const auto it = names.find(o);
      if (it == names.end()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "+0x%zx", static_cast<size_t>(o));
        return std::string(buf);
      }
      if (first.empty()) first = it->second;
      if (!InlinedLibraryCode(it->second)) return it->second;
    }
    return first.empty() ? std::string("(no frame in this executable)") : first;
  };
  // phase -> site -> operator -> calls
  std::map<int, std::map<std::string, std::map<std::string, int64_t>>> by_site;
  for (const auto& [key, count] : calls_)
    by_site[std::get<0>(key)][site(std::get<2>(key))][std::get<1>(key)] += count;
  for (const auto& [phase, sites] : by_site) {
    std::vector<std::pair<int64_t, std::string>> order;
    for (const auto& [name, ops] : sites) {
      int64_t total = 0;
      for (const auto& [op, count] : ops) total += count;
      order.emplace_back(total, name);
    }
    std::sort(order.rbegin(), order.rend());
    const std::string& phase_name =
        phase >= 0 && phase < static_cast<int>(phases.size()) ? phases[phase] : "?";
    std::fprintf(stderr, "operator sites in %s (outermost calls per check):\n", phase_name.c_str());
    for (size_t k = 0; k < order.size() && k < top; ++k) {
      std::vector<std::pair<int64_t, std::string>> ops;
      for (const auto& [op, count] : sites.at(order[k].second)) ops.emplace_back(count, op);
      std::sort(ops.rbegin(), ops.rend());
      std::string most;
      for (size_t j = 0; j < ops.size() && j < 3; ++j) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s%s %.0f", j > 0 ? ", " : "", ops[j].second.c_str(),
                      static_cast<double>(ops[j].first) / per);
        most += buf;
      }
      std::fprintf(stderr, "  %8.0f  %s  (%s)\n", static_cast<double>(order[k].first) / per,
                   order[k].second.c_str(), most.c_str());
    }
  }
}

}  // namespace paradiff::bench
