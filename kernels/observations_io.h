// Observations on disk: one rank's RankObservations (sut/observations.h) written to a file by
// `paradiff rank` under mpirun and read back by the executor (kernels/engine_mpi.h).
//
// Format (version 1): the magic "PARADIFF-OBS" and a version, then every field of RankObservations
// in declaration order; integers and doubles as their 8 (or 4 / 1) raw bytes in the machine's byte
// order (little-endian on every supported platform; writer and reader run on the same machine
// kind), strings as a length and bytes, tensors as a defined flag, the ScalarType's name, sizes
// and the raw bytes of the contiguous values, and the marker "END". Tensors of every dtype
// (float, double, BFloat16, Half, integers) round-trip bit for bit; doubles are bit-exact too.
//
// Reading is defensive (a crashed rank may leave junk): a wrong magic or version, a truncated
// file, an unknown dtype, an implausible length or trailing bytes give a Status naming the path
// and the byte offset, never a crash.
#pragma once

#include <string>

#include "core/status.h"
#include "sut/observations.h"

namespace paradiff {

std::string SerializeObservations(const RankObservations& obs);
// `what` names the source in errors (a path).
StatusOr<RankObservations> ParseObservations(const std::string& bytes, const std::string& what);

// Atomically (core/atomic_file.h).
Status WriteObservationsFile(const std::string& path, const RankObservations& obs);
StatusOr<RankObservations> ReadObservationsFile(const std::string& path);

}  // namespace paradiff
