# Runs a judge that must reject its input: exit code 1 and a first failing case named in its report.
#   cmake -DJUDGE=<exe> -P expect_failure.cmake
execute_process(COMMAND ${JUDGE} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected the judge to exit with 1 (a failing case), got ${rc}\n${out}${err}")
endif()
if(NOT out MATCHES "FAIL  [^\n]+\n +[^\n]+\n +expected [^\n]+\n +actual [^\n]+\n +hint: ")
  message(FATAL_ERROR "expected a first failing case with expected, actual and a hint:\n${out}${err}")
endif()
