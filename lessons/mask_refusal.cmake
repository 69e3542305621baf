# Each lesson in LESSONS (a list of executables) given --docs or --window exits 2 with one line on stderr that names
# lesson 12 and prints nothing on stdout; the lessons that take a mask list the flags in --help.
#   cmake "-DLESSONS=<exe>;<exe>..." -P mask_refusal.cmake
foreach(lesson IN LISTS LESSONS)
  foreach(flags "--window;4" "--docs;8,8" "--docs=8,8" "--pad-docs")
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
message(STATUS "every lesson refused --docs, --docs=, --window and --pad-docs in one line naming lesson 12")
