# Each lesson in LESSONS (a list of executables) given a mask flag it does not take exits 2 with one line on stderr
# that names lesson 12 and prints nothing on stdout. FLAGS: the flag sets to try, separated by "|" (default: every
# mask flag).
#   cmake "-DLESSONS=<exe>;<exe>..." [-DFLAGS="--docs 8,8|--pad-docs"] -P mask_refusal.cmake
if(NOT FLAGS)
  set(FLAGS "--window 4|--docs 8,8|--docs=8,8|--pad-docs")
endif()
string(REPLACE "|" ";" sets "${FLAGS}")
foreach(lesson IN LISTS LESSONS)
  foreach(set IN LISTS sets)
    separate_arguments(flags UNIX_COMMAND "${set}")
    execute_process(COMMAND ${lesson} ${flags} INPUT_FILE /dev/null OUTPUT_VARIABLE out ERROR_VARIABLE err
                    RESULT_VARIABLE rc)
    string(REGEX MATCHALL "\n" newlines "${err}")
    list(LENGTH newlines lines)
    if(NOT rc EQUAL 2 OR NOT lines EQUAL 1 OR NOT err MATCHES "lesson 12" OR NOT out STREQUAL "")
      message(FATAL_ERROR "${lesson} ${flags}: exit ${rc}, ${lines} lines on stderr (want 2, 1 naming lesson 12, "
                          "nothing on stdout):\n${err}${out}")
    endif()
  endforeach()
endforeach()
message(STATUS "every lesson refused ${FLAGS} in one line naming lesson 12")
