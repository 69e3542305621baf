# The visualizer in a headless browser (ctest label `browser`): scripts/visualizer_check writes pages with
# `cpsim run --html`, opens them in headless Chromium, checks what was drawn (timeline rows, grid tiles per step,
# per-rank charts, benchmark charts, no JavaScript error) and saves a screenshot into <build>/tests/browser.
# Where Chromium is not installed it prints why and exits 77, which ctest reports as skipped.
add_test(NAME browser.visualizer
         COMMAND ${PROJECT_SOURCE_DIR}/scripts/visualizer_check $<TARGET_FILE:cpsim_cli>
                 ${CMAKE_BINARY_DIR}/tests/browser)
set_tests_properties(browser.visualizer PROPERTIES LABELS browser SKIP_RETURN_CODE 77 TIMEOUT 180)
