# ThreadSanitizer run of the threads backend, registered in CTest as `comm.tsan` (labels unit;tsan), so that
# the plain release build (what CI runs) checks the threads backend for data races too.
#
# test_comm_tsan compiles its own copy of sim/core, sim/os and sim/comm with -fsanitize=thread (the main library is
# not instrumented), plus the threads-backend test cases; it does not link cpsim_flags, so it builds in every
# preset, the asan one included. CPSIM_TSAN=1 trims the cases to what the sanitizer needs (every path of the
# backend, fewer ranks and smaller payloads). Included from tests/CMakeLists.txt.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=thread")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=thread")
check_cxx_source_compiles("int main() { return 0; }" CPSIM_HAVE_TSAN)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)

if(CPSIM_HAVE_TSAN AND NOT CPSIM_SANITIZE STREQUAL "thread")
  file(GLOB CPSIM_TSAN_SOURCES CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/sim/core/*.cpp
    ${PROJECT_SOURCE_DIR}/sim/os/*.cpp
    ${PROJECT_SOURCE_DIR}/sim/comm/*.cpp
    ${PROJECT_SOURCE_DIR}/sim/comm/collectives/*.cpp)
  add_executable(test_comm_tsan ${CPSIM_TSAN_SOURCES}
    ${CMAKE_CURRENT_LIST_DIR}/threads_backend_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/communicator_test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/../test_main.cpp)
  target_include_directories(test_comm_tsan PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(test_comm_tsan PRIVATE -fsanitize=thread -fno-omit-frame-pointer -g -O1 -Wall -Wextra)
  target_compile_definitions(test_comm_tsan PRIVATE CPSIM_TSAN=1)
  target_link_options(test_comm_tsan PRIVATE -fsanitize=thread)
  target_link_libraries(test_comm_tsan PRIVATE doctest::doctest Threads::Threads Boost::headers rt)
  # The 64 MiB cases stay out: ThreadSanitizer makes them minutes long.
  add_test(NAME comm.tsan COMMAND test_comm_tsan --test-suite-exclude=slow)
  set_tests_properties(comm.tsan PROPERTIES LABELS "unit;tsan" TIMEOUT 300
                                            ENVIRONMENT "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1")
endif()
