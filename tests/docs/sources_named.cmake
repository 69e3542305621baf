# Fails when the project's own text calls its two source texts "seed": a reader cannot know what that is. They are
# cited by title: the blog post "On Context Parallelism" and the handbook chapter "Context parallelism: Ring
# Attention and Ulysses". The random generator's seed (`--seed`, "the same seed") is another word and stays.
#   cmake -DROOT=<source dir> -P sources_named.cmake
file(GLOB_RECURSE files RELATIVE ${ROOT} ${ROOT}/README.md ${ROOT}/CMakeLists.txt
     ${ROOT}/docs/*.md ${ROOT}/lessons/* ${ROOT}/exercises/* ${ROOT}/sim/* ${ROOT}/tests/* ${ROOT}/visualizer/*
     ${ROOT}/scripts/* ${ROOT}/cmake/*)
list(FILTER files EXCLUDE REGEX "\\.(png|npy|json)$")
list(FILTER files EXCLUDE REGEX "^tests/docs/sources_named\\.cmake$")
# "seed blog", "the seed's ...", "the seeds", "seeds/", "seed notebook", "every seed length", ...
set(noun "(blog|notebook|post|chapter|handbook|text|texts|paper|source|sources|benchmark|table|shape|exercise|length")
set(noun "${noun}|lengths|expects|says|rule|columns)")
set(patterns "[Ss][Ee][Ee][Dd][Ss]?('s)? +${noun}([^a-z]|$)" "[Tt]he [Ss]eed's" "[Tt]he [Ss]eeds([^a-z]|$)"
             "[Ss]eeds/")
set(found "")
foreach(f IN LISTS files)
  file(READ ${ROOT}/${f} text)
  foreach(p IN LISTS patterns)
    string(REGEX MATCHALL "[^\n]*${p}[^\n]*" hits "${text}")
    foreach(hit IN LISTS hits)
      string(APPEND found "  ${f}: ${hit}\n")
    endforeach()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "these lines call the source texts \"seed\"; cite them by title (\"the blog post On Context "
                      "Parallelism\", \"the handbook chapter Context parallelism: Ring Attention and Ulysses\"):\n"
                      "${found}")
endif()
message(STATUS "checked ${ROOT}: the source texts are cited by title")
