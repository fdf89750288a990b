# tests/lf.cmake — the LF design's tests (and its pow2 baseline's), included by
# tests/CMakeLists.txt.
#   design_lf        mechanisms of lf and pow2 (classes, threshold, custom bins on pages of their
#                    own, LF-opt, sites told apart, strdup seen through, table and bin bounds with
#                    100,000 call sites), against every library of the suite (libraries that are
#                    not pow2 or lf skip it); also with LOCUS_LF_OPT=0, with a threshold of 2 (the
#                    custom bins run out), with the immediate discard policy, and with
#                    LOCUS_SITES=1 (the per-site report at exit)
#   design_lf_cxx    two `new T` sites, and std::string built in two functions, are told apart

_locus_suite_program(design_lf design_lf.c)
_locus_suite_program(design_lf_cxx design_lf_cxx.cpp)
locus_suite_add_test(NAME design_lf KIND design STRESS TIMEOUT 120
                     COMMAND $<TARGET_FILE:locus_test_design_lf>)
locus_suite_add_test(NAME design_lf_opt0 KIND design STRESS TIMEOUT 120
                     COMMAND $<TARGET_FILE:locus_test_design_lf>
                     ENVIRONMENT LOCUS_LF_OPT=0)
locus_suite_add_test(NAME design_lf_t2 KIND design STRESS TIMEOUT 120
                     COMMAND $<TARGET_FILE:locus_test_design_lf>
                     ENVIRONMENT LOCUS_LF_THRESHOLD=2)
locus_suite_add_test(NAME design_lf_immediate KIND design TIMEOUT 120
                     COMMAND $<TARGET_FILE:locus_test_design_lf>
                     ENVIRONMENT LOCUS_DISCARD=immediate)
locus_suite_add_test(NAME design_lf_sites KIND design TIMEOUT 120
                     COMMAND $<TARGET_FILE:locus_test_design_lf> sites
                     ENVIRONMENT LOCUS_SITES=1)
locus_suite_add_test(NAME design_lf_cxx KIND design STRESS TIMEOUT 60
                     COMMAND $<TARGET_FILE:locus_test_design_lf_cxx>)
