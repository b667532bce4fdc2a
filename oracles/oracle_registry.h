// The oracle registry: every oracle by name, in the canonical order CheckRun applies them (the
// first finding in this order is the verdict, so a structural violation is reported before the
// numeric mismatch it causes):
//   validation, collective, tiling, replica, memory, numeric, exact, determinism, metamorphic,
//   cross_backend.
// Sets: "default" = the campaign default, the cheap ones (everything but determinism and
// metamorphic, which run the engine again); "all" = the dedicated thorough mode, every oracle but
// the opt-in cross_backend (which starts an mpirun job: select it by name).
// A selection is a list of names and set names, each item possibly comma-separated
// ("numeric,tiling"); an empty selection is "default".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "oracles/oracle.h"

namespace paradiff {

// Every oracle name, in canonical order.
const std::vector<std::string>& AllOracleNames();
// The "all" set: every oracle but the opt-in ones, in canonical order.
const std::vector<std::string>& ThoroughOracleNames();
// The campaign default set, in canonical order.
const std::vector<std::string>& DefaultOracleNames();

// Expands a selection into oracle names in canonical order, without duplicates. An unknown name
// is an error on field "oracles" naming it and the known names.
StatusOr<std::vector<std::string>> ResolveOracleNames(const std::vector<std::string>& selection);

// The oracles of a selection in canonical order. Throws std::invalid_argument on an unknown name
// (callers taking names from users resolve them first).
std::vector<std::unique_ptr<Oracle>> MakeOracles(const std::vector<std::string>& selection);

}  // namespace paradiff
