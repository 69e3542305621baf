# The GPU tests, built when the CUDA backend is (include()d from tests/CMakeLists.txt).
#   test_gpu_host  what needs no GPU: tile counts, the NCCL batching rule, the MMA fragments (label unit); the GPU
#                  check rules and bf16 rounding need no CUDA and are tested in tests/kernels and tests/core
#   test_gpu       the CUDA device, the cuda-threads communicator, every strategy on cuda-threads, and the nccl
#                  backend (label gpu). Without a usable GPU it prints why and exits 77: CTest reports it skipped.
# The nccl suites run as entries of their own, since a process that has used CUDA may not fork ranks that use it.
if(NOT TARGET cpsim_cuda)
  return()
endif()

file(GLOB CPSIM_GPU_HOST_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/host/*.cpp)
add_executable(test_gpu_host ${CPSIM_GPU_HOST_TESTS} ${CMAKE_CURRENT_LIST_DIR}/../test_main.cpp)
target_link_libraries(test_gpu_host PRIVATE cpsim cpsim_cuda doctest::doctest)
add_test(NAME gpu_host.unit COMMAND test_gpu_host)
set_tests_properties(gpu_host.unit PROPERTIES LABELS unit TIMEOUT 300)

file(GLOB CPSIM_GPU_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
add_executable(test_gpu ${CPSIM_GPU_TESTS})
target_link_libraries(test_gpu PRIVATE cpsim cpsim_cuda doctest::doctest)
add_test(NAME gpu.cuda COMMAND test_gpu --test-suite-exclude=nccl,nccl_multi)
add_test(NAME gpu.nccl COMMAND test_gpu --test-suite=nccl)
add_test(NAME gpu.nccl_multi COMMAND test_gpu --min-gpus=2 --test-suite=nccl_multi)
set_tests_properties(gpu.cuda gpu.nccl gpu.nccl_multi PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900)

# The build carried to a GPU machine and the one command run there (scripts/gpu-check; label unit, no GPU needed):
#   gpu.carry.preset     CMakePresets.json's gpu-carry makes a carried build (CUDA on, MPI off, static Boost,
#                        x86-64-v3, sm_90 and sm_80)
#   gpu.carry.libraries  ldd: what this build's cpsim and test_gpu need. In a gpu-carry build, nothing but the C and
#                        C++ runtimes, the loader and NVIDIA's libraries. In another build (CI's release), the same
#                        plus exactly what the MPI backend and shared Boost bring, which gpu-carry leaves out: so a new
#                        dependency fails here, in a build CI already has, without a second build of everything
#                        (scripts/gpu-check --prepare runs the strict check on the carried build itself)
#   gpu.check.*          gpu-check's step limits add up to at most 480 s; its argument handling; without a usable
#                        GPU it stops after the probe with the reason and exits 1
#   gpu.torch_peer       tests/gpu/torch_peer.py without a GPU (and the checker itself on the CPU where torch is)
set(_gpu_dir ${CMAKE_CURRENT_LIST_DIR})
set(_expect ${CMAKE_CURRENT_LIST_DIR}/../mpi/expect.sh)
set(_gpu_check ${PROJECT_SOURCE_DIR}/scripts/gpu-check)
add_test(NAME gpu.carry.preset COMMAND ${CMAKE_COMMAND} -DPRESETS=${PROJECT_SOURCE_DIR}/CMakePresets.json
                                       -P ${_gpu_dir}/carry_preset.cmake)
if(NOT CPSIM_MPI AND CPSIM_STATIC_BOOST AND NOT CPSIM_NATIVE)
  set(_carried "")
else()
  set(_carried --not-carried)
endif()
set(_gpu_unit_tests gpu.carry.preset)
if(CPSIM_SANITIZE STREQUAL "")  # sanitizer builds need their runtimes, which no carried build has
  add_test(NAME gpu.carry.libraries COMMAND ${_gpu_check} --libraries ${_carried} $<TARGET_FILE:cpsim_cli>
                                            $<TARGET_FILE:test_gpu>)
  list(APPEND _gpu_unit_tests gpu.carry.libraries)
endif()
add_test(NAME gpu.check.limits COMMAND ${_expect} 0 "^total +[0-9]+ s" once -- ${_gpu_check} --limits)
add_test(NAME gpu.check.usage_no_folder
         COMMAND ${_expect} 2 "^gpu-check: name the folder for the logs, JSON and dumps" once -- ${_gpu_check})
add_test(NAME gpu.check.usage_not_empty
         COMMAND ${_expect} 2 "is not empty; name a new or empty folder" once -- ${_gpu_check} ${_gpu_dir})
add_test(NAME gpu.check.usage_a_file
         COMMAND ${_expect} 2 "exists and is not a folder" once -- ${_gpu_check} ${_gpu_dir}/gpu.cmake)
add_test(NAME gpu.check.usage_two_folders
         COMMAND ${_expect} 2 "one folder only" once -- ${_gpu_check} a b)
add_test(NAME gpu.check.refuses_without_gpu
         COMMAND ${_gpu_dir}/gpu_check_refusal.sh ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/gpu_check_refusal)
set_tests_properties(gpu.check.refuses_without_gpu PROPERTIES SKIP_RETURN_CODE 77)
list(APPEND _gpu_unit_tests gpu.check.limits gpu.check.usage_no_folder gpu.check.usage_not_empty
            gpu.check.usage_a_file gpu.check.usage_two_folders gpu.check.refuses_without_gpu)
find_program(CPSIM_PYTHON3 python3)
if(CPSIM_PYTHON3)
  add_test(NAME gpu.torch_peer.usage COMMAND ${_expect} 2 "the following arguments are required" once --
                                             ${CPSIM_PYTHON3} ${_gpu_dir}/torch_peer.py)
  add_test(NAME gpu.torch_peer.not_a_dump COMMAND ${_expect} 2 "^torch_peer: .* is not a folder" once --
                                                  ${CPSIM_PYTHON3} ${_gpu_dir}/torch_peer.py check ${_gpu_dir}/missing)
  add_test(NAME gpu.torch_peer.dumps COMMAND ${_gpu_dir}/torch_peer_test.sh ${CPSIM_PYTHON3} $<TARGET_FILE:cpsim_cli>
                                             ${CMAKE_CURRENT_BINARY_DIR}/torch_peer)
  list(APPEND _gpu_unit_tests gpu.torch_peer.usage gpu.torch_peer.not_a_dump gpu.torch_peer.dumps)
endif()
set_tests_properties(${_gpu_unit_tests} PROPERTIES LABELS unit TIMEOUT 120)
