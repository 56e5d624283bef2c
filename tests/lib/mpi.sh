# Shared by the MPI suites (60-mpi, 61-mpi-ckpt); sourced after harness.sh.
# shellcheck shell=bash

# shellcheck disable=SC2034 # used by the suites that source this
T=$H_BUILD/tests/mpi
NP=${CKPT_TEST_MPI_NP:-4}
MPIRUN=(mpirun --oversubscribe -np "$NP")
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
# The agents pin these by themselves; the bare runs get the same.
export OMPI_MCA_coll='^sm,han,adapt' OMPI_MCA_coll_tuned_use_dynamic_rules=1 \
	OMPI_MCA_coll_tuned_allreduce_algorithm=4 OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize=0 \
	OMPI_MCA_coll_tuned_reduce_algorithm=6 OMPI_MCA_coll_tuned_bcast_algorithm=6

# mpi_setup SUITE: Open MPI installed (scripts/deps.sh, set mpi) and
# `make mpi` built; false with a FAIL line otherwise.
mpi_setup() {
	if ! CKPT_DEPS_EXTRA="mpi" "$H_TOP/scripts/deps.sh" >"$H_WORK/deps.log" 2>&1; then
		h_fail "$1" "Open MPI cannot be installed (scripts/deps.sh, set mpi)" "$H_WORK/deps.log"
		return 1
	fi
	if ! make --no-print-directory -C "$H_TOP" BUILD="$H_BUILD" mpi >"$H_WORK/make.log" 2>&1; then
		h_fail "$1" "make mpi failed" "$H_WORK/make.log"
		return 1
	fi
}

# The channels in /dev/shm, one name per line.
shm_names() {
	local f
	for f in /dev/shm/ckmpi-*; do
		[ -e "$f" ] && echo "${f##*/}"
	done | sort
}
