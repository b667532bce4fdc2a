// The parser / validator libFuzzer target (the `asan` preset; docs/FUZZING.md, "The parser
// target"): one input is arbitrary bytes, read as a config's JSON text. Nothing is trained, so it
// runs thousands of inputs a second and reaches the parser's and the validator's corners that the
// config-level target (libfuzzer_target.cpp, which only keeps valid configs) skips.
//
// Besides ASan / UBSan / leak reports, an input fails (abort) when a documented property of
// core/config_json.h and core/budget.h breaks:
// - ParseConfig, CheckConfig and WriteConfig throw nothing: bad input is a Status;
// - every error of a Status has a message and names its field ("" only for errors about the
//   whole document, whose message starts "config: ");
// - a parsed config round-trips: ParseConfig(WriteConfig(c)) succeeds and equals c, and
//   WriteConfig of that is the same text (a fixed point);
// - CheckConfig is deterministic: the same config gives the same errors twice.
// The flag -paradiff_plant=roundtrip (the target's planted-bug self-test,
// e2e.libfuzzer.parse_planted) changes the seed of every re-read config, so the round-trip property
// must break on the first valid config.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "core/budget.h"
#include "core/config.h"
#include "core/config_json.h"
#include "core/status.h"

namespace paradiff {
namespace {

bool plant_roundtrip = false;  // set once by LLVMFuzzerInitialize

[[noreturn]] void Fail(const char* property, const std::string& detail) {
  std::fprintf(stderr, "paradiff_parse_fuzz: property broken: %s\n%s\n", property, detail.c_str());
  std::abort();
}

void CheckErrors(const Status& s, const char* what) {
  for (const FieldError& e : s.errors()) {
    if (e.message.empty()) Fail(what, "an error without a message, field '" + e.field + "'");
    // Field "" is the whole document, and its message says so ("config: malformed JSON ...").
    const bool whole_document = e.message.rfind("config: ", 0) == 0;
    if (e.field.empty() && !whole_document) Fail(what, "an error without a field: " + e.message);
  }
}

void CheckOne(const std::string& text) {
  const StatusOr<Config> parsed = ParseConfig(text);
  if (!parsed.ok()) {
    if (parsed.status().errors().empty()) Fail("parse", "a failed parse without an error");
    CheckErrors(parsed.status(), "parse errors name a field");
    return;
  }
  const Config& cfg = parsed.value();
  const std::string written = WriteConfig(cfg);
  StatusOr<Config> again = ParseConfig(written);
  if (!again.ok()) Fail("round trip parses", again.status().ToString() + "\n" + written);
  if (plant_roundtrip) again.value().seed += 1;
  if (!(again.value() == cfg)) Fail("round trip equal", written);
  if (WriteConfig(again.value()) != written) Fail("written form is a fixed point", written);

  const Status first = CheckConfig(cfg, ResourceBudget{});
  CheckErrors(first, "validation errors name a field");
  const Status second = CheckConfig(cfg, ResourceBudget{});
  if (first.ToString() != second.ToString()) {
    Fail("CheckConfig is deterministic", first.ToString() + "\n---\n" + second.ToString());
  }
}

}  // namespace
}  // namespace paradiff

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i < *argc; ++i) {
    const char* a = (*argv)[i];
    if (std::strcmp(a, "-paradiff_plant=roundtrip") == 0) {
      paradiff::plant_roundtrip = true;
    } else if (std::strncmp(a, "-paradiff_", 10) == 0) {
      std::fprintf(
          stderr,
          "ERROR: paradiff_parse_fuzz: unknown flag %s (known: -paradiff_plant=roundtrip)\n", a);
      std::exit(2);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    paradiff::CheckOne(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception& e) {
    paradiff::Fail("nothing throws", e.what());
  }
  return 0;
}
