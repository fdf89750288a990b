# tests/medius.cmake — the Medius design's tests, included by tests/CMakeLists.txt.
#   design_medius   mechanisms of medius (K-region placement near a hint, the size-class cache,
#                   LOCUS_MEDIUS_K), against every library of the suite (others skip it)

_locus_suite_program(design_medius design_medius.c)
locus_suite_add_test(NAME design_medius KIND design STRESS TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_medius>)
locus_suite_add_test(NAME design_medius_k16 KIND design TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_medius>
                     ENVIRONMENT LOCUS_MEDIUS_K=16)
