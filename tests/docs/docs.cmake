# Tests of the project's own text.
add_test(NAME "the project's text cites its source texts by title, never as seed"
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_LIST_DIR}/sources_named.cmake)
set_tests_properties("the project's text cites its source texts by title, never as seed" PROPERTIES LABELS unit
                     TIMEOUT 60)
