#!/usr/bin/env bash
# Runs its arguments when mpirun is on PATH; otherwise says why and exits 77 (ctest: Skipped).
command -v mpirun >/dev/null 2>&1 || {
  echo "SKIP: mpirun is not on PATH (install openmpi-bin); the mpi tests need it"
  exit 77
}
exec "$@"
