# The mpi backend's tests (label mpi), registered when the backend is built (CPSIM_MPI). Each runs under
# `mpirun -np 4 --oversubscribe` through tests/mpi/mpirun.sh (which adds --allow-run-as-root for root):
#   mpi.communicator         every communicator call (doctest, test_mpi), ring reductions
#   mpi.native_reductions    the reduction cases again with CPSIM_MPI_REDUCTIONS=native
#   mpi.run.*                `cpsim run --backend mpi --check` for ring and hybrid, every strategy under documents and
#                            a window; bitwise equal to threads, processes
#   mpi.fault.*              a rank that throws, crashes, deadlocks or receives the wrong size ends the job
#   mpi.usage.*              --backend mpi without mpirun, --ranks disagreeing with the job: exit 2, one line
#   mpi.bench.side_by_side   `cpsim bench comm --backend threads,processes,mpi` prints its table
#   mpi.lesson.*             lessons under mpirun print their golden transcripts (with CPSIM_BUILD_LESSONS)
# Timeouts bound the fault tests; no test depends on how fast anything runs.
if(NOT CPSIM_MPI)
  return()
endif()
set(_mpi_dir ${CMAKE_CURRENT_SOURCE_DIR}/mpi)
set(_mpirun ${_mpi_dir}/mpirun.sh)
set(_expect ${_mpi_dir}/expect.sh)
set(_cpsim $<TARGET_FILE:cpsim_cli>)

add_executable(test_mpi ${_mpi_dir}/mpi_communicator_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/test_main.cpp)
target_link_libraries(test_mpi PRIVATE cpsim doctest::doctest)
add_executable(mpi_fault_probe ${_mpi_dir}/mpi_fault_probe.cpp)
target_link_libraries(mpi_fault_probe PRIVATE cpsim)

function(cpsim_mpi_test name)
  add_test(NAME mpi.${name} COMMAND ${ARGN})
  set_tests_properties(mpi.${name} PROPERTIES LABELS mpi TIMEOUT 300 ENVIRONMENT "CPSIM_MPIEXEC=${MPIEXEC_EXECUTABLE}")
endfunction()

cpsim_mpi_test(communicator ${_mpirun} $<TARGET_FILE:test_mpi>)
cpsim_mpi_test(native_reductions env CPSIM_MPI_REDUCTIONS=native ${_mpirun} $<TARGET_FILE:test_mpi>
               --test-case=*reduce*,*counts*)

set(_shape --ranks 4 --seq 64 --heads 4 --kv-heads 2 --head-dim 16 --dtype f64 --backward --check)
cpsim_mpi_test(run.ring_check ${_expect} 0 "^PASSED$" once --
               ${_mpirun} ${_cpsim} run --backend mpi --strategy ring ${_shape})
cpsim_mpi_test(run.hybrid_check ${_expect} 0 "^PASSED$" once --
               ${_mpirun} ${_cpsim} run --backend mpi --strategy hybrid --a2a 2 ${_shape})
# Masks on MPI: documents under per-document zigzag, a window under striped, forward and backward (issue 19).
foreach(_strategy all_gather ulysses ring hybrid pruned_ring mask_exchange)
  set(_extra)
  if(_strategy STREQUAL "ulysses")
    set(_extra --kv-replicate)  # Nkv = 2 over 4 ranks
  elseif(_strategy STREQUAL "hybrid")
    set(_extra --a2a 2)
  endif()
  cpsim_mpi_test(run.documents_${_strategy} ${_expect} 0 "^PASSED$" once --
                 ${_mpirun} ${_cpsim} run --backend mpi --strategy ${_strategy} ${_extra} --docs 24,8,32 ${_shape})
  cpsim_mpi_test(run.window_striped_${_strategy} ${_expect} 0 "^PASSED$" once --
                 ${_mpirun} ${_cpsim} run --backend mpi --strategy ${_strategy} ${_extra} --window 9 --sharding striped
                 ${_shape})
endforeach()
foreach(_strategy pass_kv pass_q decode)
  set(_tokens --new-tokens 3 --cached 61)
  if(NOT _strategy STREQUAL "decode")
    set(_tokens --new-tokens 24 --cached 40)
  endif()
  cpsim_mpi_test(run.inference_${_strategy} ${_expect} 0 "^PASSED$" once --
                 ${_mpirun} ${_cpsim} run --backend mpi --strategy ${_strategy} ${_tokens} --ranks 4 --heads 4
                 --kv-heads 2 --batch 2 --check)
endforeach()
set(_bits --ranks 4 --seq 64 --heads 4 --kv-heads 4 --head-dim 16 --dtype f32 --backward --seed 5)
foreach(_strategy ring all_gather ulysses)
  cpsim_mpi_test(run.same_bits_${_strategy} ${_mpi_dir}/same_bits.sh ${_cpsim} --strategy ${_strategy} ${_bits})
endforeach()
cpsim_mpi_test(run.same_bits_hybrid ${_mpi_dir}/same_bits.sh ${_cpsim} --strategy hybrid --a2a 2 ${_bits})

cpsim_mpi_test(fault.throw ${_expect} nonzero "rank 2: boom in the rank function \\(ending the MPI job\\)" --
               ${_mpirun} $<TARGET_FILE:mpi_fault_probe> throw)
cpsim_mpi_test(fault.crash ${_expect} nonzero "exited on signal 6" -- ${_mpirun} $<TARGET_FILE:mpi_fault_probe> crash)
cpsim_mpi_test(fault.deadlock ${_expect} nonzero
               "rank [0-3] waited [0-9.]+ s in recv from rank [0-3] \\(tag 4\\): likely deadlock" --
               ${_mpirun} $<TARGET_FILE:mpi_fault_probe> deadlock)
cpsim_mpi_test(fault.mismatch ${_expect} nonzero
               "rank 1:? posted recv from rank 0 \\(tag 3\\) of 50 bytes, but rank 0 sent more than 50 bytes" --
               ${_mpirun} $<TARGET_FILE:mpi_fault_probe> mismatch)
set_tests_properties(mpi.fault.throw mpi.fault.crash mpi.fault.deadlock mpi.fault.mismatch PROPERTIES TIMEOUT 60)

cpsim_mpi_test(usage.without_mpirun ${_expect} 2
               "^cpsim: error: --backend mpi with --ranks 4 needs 4 processes started by mpirun.* run it as `mpirun -np 4 " once --
               ${_cpsim} run --backend mpi --ranks 4 --strategy ring)
cpsim_mpi_test(usage.ranks_disagree ${_expect} 2
               "^cpsim: error: --ranks 2 disagrees with the MPI job: mpirun started 4 processes.* use --ranks 4, or mpirun -np 2$" once --
               ${_mpirun} ${_cpsim} run --backend mpi --ranks 2 --strategy ring)

cpsim_mpi_test(bench.side_by_side ${_expect} 0
               "^# +size \\(B\\) +count +type( +time \\(us\\) +algbw +busbw){3} +threads/mpi +processes/mpi +processes/threads +#wrong$" --
               ${_mpirun} ${_cpsim} bench comm --backend threads,processes,mpi --ranks 4 --minbytes 4K --maxbytes 64K)

# Lessons under mpirun (mpi.lesson.*): rank 0 tells the lesson, the other processes follow its runs
# (sim/runtime/mpi_runs.hpp); the transcript must be the lesson's golden one, as on threads. Lessons that launch
# outside run() (01, 02, 10) or change C between runs (06, 09) end with a usage error instead; 01 checks that.
if(CPSIM_BUILD_LESSONS)
  set(_lessons ${PROJECT_SOURCE_DIR}/lessons)
  foreach(_lesson 03_ring 04_lse_merge 05_zigzag 07_backward 08_mesh 11_choosing)
    cpsim_mpi_test(lesson.${_lesson} ${CMAKE_COMMAND} -DLESSON=${_mpirun}
                   "-DARGS=$<TARGET_FILE:lesson_${_lesson}> --backend mpi" -DEXPECTED=${_lessons}/${_lesson}/expected.txt
                   -DACTUAL=${CMAKE_CURRENT_BINARY_DIR}/mpi_${_lesson}.actual.txt -P ${_lessons}/transcript.cmake)
  endforeach()
  set_tests_properties(mpi.lesson.08_mesh PROPERTIES ENVIRONMENT "CPSIM_MPIEXEC=${MPIEXEC_EXECUTABLE};CPSIM_MPI_NP=8")
  cpsim_mpi_test(lesson.outside_run ${_expect} 2 "launches on the mpi backend outside the runs rank 0 announces" once
                 -- ${_mpirun} $<TARGET_FILE:lesson_01_sequence_split> --backend mpi)
endif()
