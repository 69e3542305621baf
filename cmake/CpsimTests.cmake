# cpsim_add_test_dir(<room>): every tests/<room>/*.cpp becomes one doctest executable `test_<room>`,
# registered in CTest as `<room>.unit` (label unit: every case outside the doctest suite "slow") and, when a file
# puts a case in that suite (TEST_SUITE("slow") or doctest::test_suite("slow")), as `<room>.slow` (label slow: the
# suite "slow"). Extra labels may follow: cpsim_add_test_dir(comm LABELS tsan).
function(cpsim_add_test_dir room)
  cmake_parse_arguments(ARG "" "" "LABELS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${room}/*.cpp)
  if(NOT sources)
    return()
  endif()
  add_executable(test_${room} ${sources} ${CMAKE_CURRENT_SOURCE_DIR}/test_main.cpp)
  target_link_libraries(test_${room} PRIVATE cpsim doctest::doctest Eigen3::Eigen)
  target_compile_definitions(test_${room} PRIVATE CPSIM_BINARY_DIR="${CMAKE_BINARY_DIR}"
                                                  CPSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_test(NAME ${room}.unit COMMAND test_${room} --test-suite-exclude=slow)
  set_tests_properties(${room}.unit PROPERTIES LABELS "unit;${ARG_LABELS}" TIMEOUT 600)
  set(slow_cases)
  foreach(source IN LISTS sources)
    file(STRINGS ${source} found REGEX "(TEST_SUITE|test_suite)\\(\"slow\"\\)")
    list(APPEND slow_cases ${found})
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${sources})  # a suite added later is seen
  if(slow_cases)  # a `<room>.slow` entry that ran no case would report a pass for nothing
    add_test(NAME ${room}.slow COMMAND test_${room} --test-suite=slow)
    set_tests_properties(${room}.slow PROPERTIES LABELS "slow;${ARG_LABELS}" TIMEOUT 900)
  endif()
endfunction()
