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
