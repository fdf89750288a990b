# tests/phk.cmake — the PHK design's tests, included by tests/CMakeLists.txt.
#   design_phk      mechanisms of phk and its variants, against every library of the suite
#                   (libraries that are not phk skip it)
#   bitmap_search   unit test of the two chunk-bitmap searches (src/core/bitmap.h), no preload

_locus_suite_program(design_phk design_phk.c)
locus_suite_add_test(NAME design_phk KIND design TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_phk>)
locus_suite_add_test(NAME design_phk_immediate KIND design TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_phk>
                     ENVIRONMENT LOCUS_DISCARD=immediate)

add_executable(locus_test_bitmap_search bitmap_search.c)
set_target_properties(locus_test_bitmap_search PROPERTIES
                      OUTPUT_NAME bitmap_search
                      RUNTIME_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
                      C_STANDARD 11 C_EXTENSIONS ON)
target_compile_options(locus_test_bitmap_search PRIVATE -O2 -g -Wall -Wextra)
add_test(NAME unit_bitmap_search COMMAND $<TARGET_FILE:locus_test_bitmap_search>)
set_tests_properties(unit_bitmap_search PROPERTIES LABELS "unit" TIMEOUT 60)
