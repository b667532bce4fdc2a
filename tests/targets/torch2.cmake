# The PyTorch 2.x target (adapters/torch2, docs/TORCH2.md): torch2_test.sh, one ctest test per case.
# Every case needs the torch venv made by scripts/setup-targets (work/venv/torch-2.15.0) and skips
# with 77 without it. Each case's warm worker imports torch once (about 5 s); each campaign is 2-4
# configs, fixed by its seed.
foreach(case ddp_world1 fsdp2_world1 pp_world1 ddp_static_no_sync fsdp2_planted hsdp fsdp1
             fsdp1_accum fsdp1_flat fsdp1_hsdp hsdp_accum checkpoint tp_checkpoint lr_schedule
             activation_checkpointing warm_leaks_nothing release_2_6_0 release_2_8_0
             bf16_reduce_divides bf16_own_kernels pp_dp tp tp_planted tp_sp tp_pp tp_width1
             ddp_campaign ddp_static_campaign ddp_bucket_view_campaign ddp_bf16_reduce_campaign
             fsdp1_campaign fsdp1_nested_campaign fsdp1_flat_campaign fsdp1_accum_campaign
             fsdp2_campaign fsdp2_noreshard_campaign fsdp2_nested_campaign fsdp2_accum_campaign
             hsdp_campaign hsdp_accum_campaign pp_campaign tp_campaign tp_fsdp2_campaign
             tp_sp_campaign tp_pp_campaign)
  add_test(NAME torch2.targets.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/targets/torch2_test.sh $<TARGET_FILE:paradiff>
                   ${PROJECT_SOURCE_DIR} ${case})
  set_tests_properties(torch2.targets.${case} PROPERTIES LABELS "e2e;targets;torch2" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endforeach()
# The release cases check several bugs each (T2-14's a hang that waits out a 15 s watchdog): about
# 100-150 s alone, so ctest's full limit under `ctest -j2` beside the other target tests.
set_tests_properties(torch2.targets.release_2_6_0 torch2.targets.release_2_8_0
                     PROPERTIES TIMEOUT 600)
