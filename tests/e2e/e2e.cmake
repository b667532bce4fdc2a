# End-to-end tests of the paradiff command, one ctest test per case of cli_test.sh.
foreach(case help usage_errors domain validate_examples validate_invalid run_pass_and_report
        run_unsupported_or_bad_inject fault_zero_uneven_last_shard fault_gas_overwrite_grad
        fault_comm_rank_dependent_bucket_order)
  add_test(NAME e2e.cli.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/cli_test.sh $<TARGET_FILE:paradiff>
                   ${PROJECT_SOURCE_DIR} ${case})
  set_tests_properties(e2e.cli.${case} PROPERTIES LABELS "e2e" TIMEOUT 120)
endforeach()

foreach(case clean injected_found_and_replayed crash_and_hang_recorded kill_and_resume workdir_locked
        bad_options inconclusive_kept feedback_reproducible known_baseline group_signal_resumes)
  add_test(NAME e2e.campaign.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/campaign_test.sh $<TARGET_FILE:paradiff> ${case})
  set_tests_properties(e2e.campaign.${case} PROPERTIES LABELS "e2e;campaign" TIMEOUT 300)
endforeach()
# Three 128-execution campaigns (about 130 s alone): give it ctest's full limit, not 300 s, so that
# the two cores shared with the target tests under `ctest -j2` do not time it out.
set_tests_properties(e2e.campaign.feedback_reproducible PROPERTIES TIMEOUT 600)

# minimize / replay / gate / report / run --html (minimize_gate_test.sh).
foreach(case minimize_cli replay_categories regression_corpus gate_exit_codes gate_with_campaign
        campaign_minimize_report run_html)
  add_test(NAME e2e.minimize_gate.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/minimize_gate_test.sh $<TARGET_FILE:paradiff>
                   ${PROJECT_SOURCE_DIR} ${case})
  set_tests_properties(e2e.minimize_gate.${case} PROPERTIES LABELS "e2e;minimize" TIMEOUT 180)
endforeach()

# The bug-zoo self-test: each switch found by a short campaign that is not told which one, and a
# clean campaign of the same size without findings. Executions, not seconds, so it is
# deterministic; every one of the thirteen switches must be found within 200 executions.
add_test(NAME zoo.selftest
         COMMAND $<TARGET_FILE:paradiff> zoo run --runs 200 --stop-on-first --jobs 2 --seed 1
                 --minimize-budget-s 0 --corpus ${PROJECT_SOURCE_DIR}/corpus/seed
                 --workdir ${CMAKE_CURRENT_BINARY_DIR}/zoo-selftest)
set_tests_properties(zoo.selftest PROPERTIES LABELS "zoo;e2e" TIMEOUT 900)

# The held-out mechanisms (scripts/mutants, docs/ZOO.md) must keep applying to the engine: a change
# under tests/mutants/heldout.patch is caught here, not at the next mutation study. Skips (77)
# where git is missing.
add_test(NAME e2e.mutants_patch_applies
         COMMAND bash -c "command -v git >/dev/null || { echo 'SKIP: git is not on PATH'; exit 77; }; cd '${PROJECT_SOURCE_DIR}' && git apply --check tests/mutants/heldout.patch && echo 'heldout.patch applies'")
set_tests_properties(e2e.mutants_patch_applies PROPERTIES LABELS "e2e" SKIP_RETURN_CODE 77 TIMEOUT 60)

