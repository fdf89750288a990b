# tests/tp.cmake — the TP design's tests, included by tests/CMakeLists.txt.
#   design_tp        mechanisms of tp (K-regions, hints, reuse, release, misuse), against every
#                    library of the suite (libraries that are not tp skip it); also with
#                    LOCUS_TP_K=7, 10, 14, an out-of-range value (the default must hold) and the
#                    immediate discard policy

_locus_suite_program(design_tp design_tp.c)
target_link_libraries(locus_test_design_tp PRIVATE Threads::Threads)
locus_suite_add_test(NAME design_tp KIND design STRESS TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_tp>)
locus_suite_add_test(NAME design_tp_immediate KIND design TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_tp>
                     ENVIRONMENT LOCUS_DISCARD=immediate)
foreach(k 7 10 14 99)
  locus_suite_add_test(NAME design_tp_k${k} KIND design TIMEOUT 60
                       COMMAND $<TARGET_FILE:locus_test_design_tp>
                       ENVIRONMENT LOCUS_TP_K=${k})
endforeach()
# Cross-thread churn with four-page K-regions for the small classes (LOCUS_TP_K=14): a slot
# handed out by bump was found holding a current free marker there (a false "double free"
# about one run in five before allocation cleared the marker word; docs/NEXT.md).
locus_suite_add_test(NAME design_heaps_tp_k14 KIND design TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_heaps> locks
                     ENVIRONMENT LOCUS_TP_K=14)
