#!/usr/bin/env bash
# The MPI integration check of docs/distributed.md: builds `om` with the `mpi` feature and
# runs `om train --mode exact --shards S` alone and under `mpirun -np 1, 2, 4`, for the
# digits and (one epoch of) the OCR task; every run's final-loss bits and parameter hash
# must equal the single-process run's. Needs Debian's OpenMPI and libclang:
#   apt-get install -y libopenmpi-dev openmpi-bin libclang-dev
# Then the failure checks: under `mpirun -np 2`, rank 1 fails (its loss errs or panics, its
# model has another size, its batch is too short or of another length) and every rank must
# return an `Err` naming rank 1 (om-dist's example `mpi_failures`); a rank stuck past the
# timeout must end the job with a message, never hang.
# Usage: tools/mpi_check.sh [SHARDS]   (default 8; the process counts must not exceed it)
set -euo pipefail
cd "$(dirname "$0")/.."
shards="${1:-8}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release --features mpi --quiet
cargo build --release --features mpi --quiet -p om-dist --example mpi_failures
om=target/release/om
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
fail=0
for task in "digits" "ocr --epochs 1"; do
    # shellcheck disable=SC2086 # the task carries its own options
    want="$("$om" train --task $task --mode exact --shards "$shards" --threads 1 --out "$out" 2>/dev/null | grep -E '^(final|parameters)')"
    echo "${task%% *}, 1 process:"
    echo "$want" | sed 's/^/  /'
    for np in 1 2 4; do
        # a hung collective must not hang the check: every run has a time limit
        # shellcheck disable=SC2086
        got="$(timeout 600 mpirun --oversubscribe -np "$np" "$om" train --dist mpi --task $task --mode exact --shards "$shards" --threads 1 --out "$out" 2>/dev/null | grep -E '^(final|parameters)' | sed "s/on $np process(es)/on 1 process(es)/" || true)"
        if [ "$got" == "$want" ]; then
            echo "  mpirun -np $np: same bits and parameter hash"
        else
            echo "  mpirun -np $np: DIFFERENT:"
            echo "$got" | sed 's/^/    /'
            fail=1
        fi
    done
done
echo "failures under mpirun -np 2:"
for kind in ok error panic sizes short weights; do
    if got="$(timeout 120 mpirun --oversubscribe -np 2 target/release/examples/mpi_failures "$kind" 2>/dev/null)" &&
        [ "$(echo "$got" | grep -c 'as expected')" == 2 ]; then
        echo "  $kind: every rank failed as expected (or succeeded, for ok)"
    else
        echo "  $kind: WRONG:"
        echo "$got" | sed 's/^/    /'
        fail=1
    fi
done
# a rank stuck past the 0.5 s timeout: the job ends (nonzero) with the message, within the limit
set +e
err="$(timeout 120 mpirun --oversubscribe -np 2 target/release/examples/mpi_failures stuck 2>&1 >/dev/null)"
status=$?
set -e
if [ "$status" != 0 ] && [ "$status" != 124 ] && echo "$err" | grep -q "waited 0.5 s for the other ranks"; then
    echo "  stuck: the job was aborted with the message (exit $status)"
else
    echo "  stuck: WRONG (exit $status):"
    echo "$err" | sed 's/^/    /'
    fail=1
fi
exit "$fail"
