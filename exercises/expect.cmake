# Runs a command and checks its exit code and what it printed (stdout and stderr together).
#   cmake -DCOMMAND=<exe> "-DARGS=<arg> <arg> ..." -DEXPECT_RC=<code> "-DEXPECT_REGEX=<regex>" -P expect.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${COMMAND} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL EXPECT_RC)
  message(FATAL_ERROR "expected exit code ${EXPECT_RC}, got ${rc}:\n${out}${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "expected the output to match\n  ${EXPECT_REGEX}\ngot:\n${out}${err}")
endif()
