# The DeepSpeed target (adapters/deepspeed, docs/DEEPSPEED.md): deepspeed_test.sh, one ctest test per
# case. All but export_mapping need the pinned environments (scripts/setup-targets) and skip with 77
# without them. A DeepSpeed warm worker imports torch + DeepSpeed once per command (5-10 s).
add_test(NAME e2e.targets.deepspeed_export_mapping
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/targets/deepspeed_test.sh $<TARGET_FILE:paradiff>
                 ${PROJECT_SOURCE_DIR} deepspeed_export_mapping)
set_tests_properties(e2e.targets.deepspeed_export_mapping PROPERTIES LABELS "e2e;targets" TIMEOUT 120)
foreach(case deepspeed_parity_world1 deepspeed_parity_world2 deepspeed_pipe_parity deepspeed_checkpoint
             deepspeed_pipe_checkpoint
             deepspeed_own_adam deepspeed_lr_schedule deepspeed_fixed_after_0192 deepspeed_fixed_zero3_after_0192
             deepspeed_zero3_options deepspeed_gradient_scaling deepspeed_elastic_checkpoint
             deepspeed_offload deepspeed_bf16_master deepspeed_activation_checkpointing deepspeed_module_tree
             deepspeed_zero_init
             deepspeed_warm_leaks_nothing
             deepspeed_campaign_clean
             deepspeed_planted_minimized deepspeed_rediscover_pr8154)
  add_test(NAME deepspeed.targets.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/targets/deepspeed_test.sh $<TARGET_FILE:paradiff>
                   ${PROJECT_SOURCE_DIR} ${case})
  set_tests_properties(deepspeed.targets.${case} PROPERTIES LABELS "e2e;targets;deepspeed" TIMEOUT 400
                       SKIP_RETURN_CODE 77)
endforeach()
