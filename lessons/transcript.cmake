# Runs one lesson with no terminal on stdin, masks its times ("12.34 ms" -> "#.## ms") and compares the
# transcript with the golden one. With -DUPDATE=ON it rewrites the golden instead.
#   cmake -DLESSON=<exe> -DARGS="<flags>" -DEXPECTED=<expected.txt> -DACTUAL=<file> [-DUPDATE=ON] -P transcript.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${LESSON} ${args} INPUT_FILE /dev/null OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc)
string(REGEX REPLACE "[0-9]+\\.[0-9]+ ms" "#.## ms" out "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${LESSON} exited with ${rc}\n--- stderr:\n${err}\n--- stdout:\n${out}")
endif()
# The lessons are written for an 80-column terminal, without trailing spaces.
string(REPEAT "[^\n]" 81 wide)
if(out MATCHES "(${wide}[^\n]*)")
  message(FATAL_ERROR "${LESSON}: a line is wider than 80 columns:\n${CMAKE_MATCH_1}")
endif()
if(out MATCHES "([^\n]* )\n")
  message(FATAL_ERROR "${LESSON}: a line ends in a space:\n[${CMAKE_MATCH_1}]")
endif()
if(UPDATE)
  file(WRITE ${EXPECTED} "${out}")
  message(STATUS "wrote ${EXPECTED}")
  return()
endif()
file(WRITE ${ACTUAL} "${out}")
# diff prints straight to the test's output, unwrapped.
execute_process(COMMAND diff -u ${EXPECTED} ${ACTUAL} RESULT_VARIABLE drc)
if(NOT drc EQUAL 0)
  message(FATAL_ERROR "the transcript above differs from ${EXPECTED} (- expected, + actual); if the change is "
                      "intended, rebuild the golden with the target update-lesson-goldens")
endif()
