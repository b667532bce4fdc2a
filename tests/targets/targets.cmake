# External targets (docs/TARGETS.md): targets_test.sh, one ctest test per case. The torch cases
# need python3-torch (scripts/setup installs it) and skip with 77 without it.
foreach(case broken_targets warm_broken_targets unattended_runs_leave_nothing bad_target_file deepspeed_round_trip deepspeed_real_configs
        megatron_real_args)
  add_test(NAME e2e.targets.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/targets/targets_test.sh $<TARGET_FILE:paradiff>
                   ${PROJECT_SOURCE_DIR} ${case})
  set_tests_properties(e2e.targets.${case} PROPERTIES LABELS "e2e;targets" TIMEOUT 120)
endforeach()
foreach(case torch_bitwise_world1 torch_bitwise_world1_bf16 torch_warm_leaks_nothing torch_crew_faults torch_crew_collect torch_serve_tracebacks torch_serve_reply_order torch_single_threaded_blas torch_accumulate_dp2 torch_lr_schedule torch_campaign_clean
             torch_planted_minimized torch_params_only)
  add_test(NAME torch.targets.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/targets/targets_test.sh $<TARGET_FILE:paradiff>
                   ${PROJECT_SOURCE_DIR} ${case})
  set_tests_properties(torch.targets.${case} PROPERTIES LABELS "e2e;targets;torch" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endforeach()
