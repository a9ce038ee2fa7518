"""The suite's own budgets: a heavy test checks its memory is free before it starts, and the default
run (`make test`: everything not marked heavy) stays within DEFAULT_RUN_GIB. tests/conftest.py calls
these from pytest's hooks."""

from __future__ import annotations

import resource

import psutil
import pytest

DEFAULT_RUN_GIB = 8.0  # `make test` must fit 8 GiB on a 2-core machine
DEFAULT_RUN = "not heavy"
PEAKS: list[tuple[float, str]] = []  # (GiB, test) each time a test raised the high-water mark
# under pytest-xdist (`make test` runs two worker processes), the controller's list of each worker's
# highest (GiB, test): the workers may peak at the same moment, so their peaks add up against the budget
WORKER_PEAKS: list[tuple[float, str]] = []


# The default run's slow tail, moved to `make test-heavy` to keep `make test` within 10 minutes on 2 cores:
# every test that took >= 7 s in a default run (pytest --durations, AMD EPYC, 2 cores, 2026-11-26; 343 of its
# 825 s). A test added to this list still runs in CI.
SLOW = {
    # compiles of the larger zoo models (ResNet-20 with bootstraps: 15-20 s), each written and read back
    *(
        f"tests/test_program_zoo.py::test_zoo_program_round_trips[{case}]"
        for case in (
            "resnet20_relu-single",
            "resnet20_aespa-single",
            "resnet20_aespa_e100-single",
            "cifar-cnn_square-single",
            "cifar-cnn_swish-rg7-deg4-single",
            "cifar-cnn_swish-rg5-deg2-single",
            "lenet_square-single",
            "lenet_square-multi",
        )
    ),
    # Triton's interpreter runs each kernel program in NumPy: ~20 s each
    "tests/ckks/test_gpu_engine.py::test_triton_kernels_match_the_reference_under_the_interpreter",
    "tests/ckks/test_gpu_engine.py::test_key_switching_kernels_match_the_reference_under_the_interpreter",
    "tests/runtime/test_gpu_inference.py::test_mnist_cnn_with_word_pair_moduli",  # N = 2^15 on the CPU: 20 s
    "tests/runtime/test_gpu_inference.py::test_mnist_cnn_at_the_selected_parameters",  # 7 s: make test's 10 min
    "tests/test_api.py::test_cifar_zoo_model_grouped_batch_on_real_images",
    "tests/test_api.py::test_cifar_zoo_model_single_mode_on_real_images",
    "tests/compiler/test_residual.py::test_resnet20_sized_program_is_exact_with_bootstraps_on_the_plain_backend",
    "tests/compiler/test_frontend_resnet.py::test_imported_resnet_compiles_and_runs_with_bootstraps_on_the_plain_backend",
    "tests/ckks/test_lattigo_backend.py::test_go_side_tests",
    "tests/compiler/test_precision_selection.py::test_selection_is_128_bit_secure_on_every_zoo_model[cifar-cnn_square]",
    "tests/compiler/test_precision_selection.py::test_selection_is_128_bit_secure_on_every_zoo_model[cifar-cnn_swish-rg7-deg4]",
    "tests/compiler/test_precision_selection.py::test_selection_is_128_bit_secure_on_every_zoo_model[cifar-cnn_swish-rg5-deg2]",
    "tests/compiler/test_precision_selection.py::test_selection_is_128_bit_secure_on_every_zoo_model[lenet_square]",
    "tests/compiler/test_precision_selection.py::test_selection_is_128_bit_secure_on_every_zoo_model[mnist-mlp_swish-rg5-deg2]",
    "tests/runtime/test_complex_packing.py::test_real_digits_through_lattigo_match_real_packing",
    "tests/training/test_resnet.py::test_training_resumes_where_it_stopped",
    "tests/training/test_distill.py::test_a_fine_tuning_run_resumes_where_it_stopped",
    "tests/training/test_models.py::test_zoo_mnist_numpy_reference_accuracy[lenet-square]",
    "tests/deploy/test_serve_lattigo.py::test_encrypted_mnist_through_a_server_process_survives_a_restart",
    "tests/deploy/test_keyfile.py::test_a_saved_client_decrypts_what_it_encrypted_before[lattigo]",
    "tests/deploy/test_artefact.py::test_a_bootstrapping_model_file_runs_with_uploaded_bootstrapping_keys[lattigo]",
    "tests/runtime/test_runtime_backends.py::test_grouped_batch_mode_cifar_architecture[seal]",
    "tests/runtime/test_runtime_backends.py::test_grouped_batch_mode_cifar_architecture[lattigo]",
    "tests/runtime/test_runtime_backends.py::test_lazy_relinearization_keeps_the_eager_precision[lattigo]",
    "tests/runtime/test_runtime_plain.py::test_cifar_shaped_grouped_batch_three_way[square]",
    "tests/runtime/test_runtime_plain.py::test_cifar_shaped_grouped_batch_three_way[swish-rg7-deg4]",
    "tests/runtime/test_bootstrap_e2e.py::test_lattigo_encrypted_logits_match_plaintext",
    "tests/profile/test_cli.py::test_profile_primitives_and_report",
    # 2026-11-27: the default run had reached 10.5 min with OpenFHE's and the cluster's end-to-end tests (the
    # Ray cluster's own guarantees keep one test each in the default run: placement, no Ray without --cluster)
    "tests/runtime/test_openfhe_inference.py::test_zoo_mnist_batch_mode",
    "tests/deploy/test_serve_openfhe.py::test_encrypted_mnist_through_a_server_process_on_openfhe",
    "tests/runtime/test_bootstrap_e2e.py::test_openfhe_encrypted_logits_match_plaintext",
    "tests/distributed/test_batch.py::test_infer_on_the_cluster",
    "tests/distributed/test_batch.py::test_cluster_answers_as_one_process_on_the_same_ciphertexts",
    "tests/distributed/test_batch.py::test_run_returns_the_logits_in_order",
    "tests/distributed/test_batch.py::test_sets_of_a_worker_gone_for_good_run_on_another",
    "tests/distributed/test_batch.py::test_a_worker_killed_mid_run_loses_no_set",
    "tests/distributed/test_profile.py::test_sweep_on_the_cluster_gives_the_local_records_in_order",
    "tests/runtime/test_openfhe_inference.py::test_zoo_mnist_single_mode_at_default_parameters",
    "tests/profile/test_openfhe_profile.py::test_model_suite_on_a_zoo_model",
    # the default run had reached 9.7 min (2026-11-27): its slowest calls over 4.5 s move too
    "tests/benchmarks/test_heorg.py::test_stages_as_separate_processes_give_the_plaintext_models_predictions",
    "tests/compiler/test_chain_refresh.py::test_relu_and_maxpool_deeper_than_a_run_encrypted_on_lattigo",
    "tests/runtime/test_runtime_backends.py::test_zoo_mnist_on_embedded_digits[seal]",
    "tests/test_data_fetch.py::test_cifar_members_are_checked_one_by_one",
    "tests/compiler/test_precision_lattigo_primes.py::test_mlp_selected_for_lattigo_opens_and_runs",
    "tests/training/test_resnet.py::test_a_finished_run_resumed_recomputes_only_its_statistics",
    "tests/compiler/test_residual.py::test_random_resnet_bootstrapped_inside_its_blocks_on_lattigo",
    # 2026-11-27, the default run at 10:21 on a loaded machine with the gpu bootstrap and docs tests added:
    # its slowest calls (4.5-7 s each) move too
    "tests/ckks/test_bootstrap.py::test_bootstrap_keys_round_trip_to_another_backend[openfhe]",
    "tests/ckks/test_bootstrap.py::test_openfhe_refuses_keys_of_another_key_set_or_worker[openfhe]",
    "tests/ckks/test_bootstrap.py::test_hostile_bootstrap_keys_are_refused[openfhe]",
    "tests/deploy/test_deploy_steps.py::test_keygen_encrypt_evaluate_decrypt_as_separate_processes",
    "tests/distributed/test_profile.py::test_profile_command_on_the_cluster_writes_one_report",
    "tests/test_coverage_nets.py::test_compiles_from_torch_and_onnx[avgpool-cifar]",
    "tests/training/test_models.py::test_zoo_cifar_numpy_reference_accuracy",
    # 2026-11-27, an AMD EPYC VM without AVX-512 (Zen 3): the default run took 13.4 min on a quiet machine.
    # Every test of 3 s or more there moves, except those that alone cover by default the Ray cluster's
    # placement and Ray-free local path, `henn infer` end to end, encrypted MNIST on Lattigo, and the server's
    # deadlines and stalls (security: they stay whatever they cost)
    "tests/training/test_distill.py::test_fine_tuning_starts_from_the_named_weights_and_records_its_origin",
    "tests/report/test_render.py::test_markdown_report",
    "tests/compiler/test_chain_refresh.py::test_relu_and_maxpool_deeper_than_a_run_on_the_plain_backend[batch]",
    "tests/training/test_distill.py::test_unusable_starting_points_are_refused_with_the_fix",
    "tests/training/test_resnet.py::test_cpu_device_is_recorded_and_the_command_repeats_a_gpu_run",
    "tests/compiler/test_chain_refresh.py::test_a_shortcut_across_a_refreshing_relu[lattigo]",
    "tests/compiler/test_maxpool.py::test_padded_pools[batch-1]",
    "tests/deploy/test_client_part.py::test_a_client_with_only_the_client_part_runs_end_to_end[batch]",
    "tests/compiler/test_composite_relu.py::test_default_precision_is_the_fewest_bits_that_keep_the_predictions",
    "tests/test_coverage_nets.py::test_compiles_from_torch_and_onnx[mlp2-relu]",
    "tests/compiler/test_composite_relu.py::test_activation_bits",
    "tests/test_coverage_nets.py::test_compiles_from_torch_and_onnx[cryptonets]",
    "tests/training/test_resnet.py::test_resume_refuses_what_it_cannot_continue",
    "tests/ckks/test_gpu_sampling.py::test_triton_kernel_is_the_reference_stream_under_the_interpreter",
    "tests/test_program_zoo.py::test_zoo_program_round_trips[lenet_square-batch]",
    "tests/compiler/test_images_per_set.py::test_packed_images_with_bootstraps",
    "tests/test_program_zoo.py::test_zoo_program_round_trips[lenet_square-grouped]",
    "tests/compiler/test_residual.py::test_random_resnet_with_bootstraps_on_lattigo",
    "tests/compiler/test_composite_relu.py::test_abs_function",
    "tests/ckks/test_gpu_engine.py::test_ntt_evaluates_at_odd_powers_of_psi[3]",
    "tests/test_archive_hostile.py::test_seeded_damage_to_real_files_is_refused_with_the_one_error[program]",
    "tests/compiler/test_approximated_activations.py::test_the_degree_rule_needs_enough_images_and_yields_to_the_option",
    "tests/deploy/test_deploy_steps.py::test_a_saved_client_reconnects_to_a_server",
    "tests/deploy/test_client_part.py::test_the_client_part_holds_no_weight_bytes[single]",
    "tests/ckks/test_bootstrap.py::test_lattigo_streamed_and_kept_dft_matrices_bootstrap_alike",
    "tests/runtime/test_bootstrap_e2e.py::test_plain_noise_model_keeps_predictions[batch]",
    "tests/runtime/test_openfhe_inference.py::test_a_worker_killed_between_inferences_is_a_backend_error",
    "tests/ckks/test_lattigo_backend.py::test_a_buffer_of_2_gib_and_more_is_taken_whole",
    "tests/compiler/test_layers.py::test_convolutions[depthwise separable]",
    "tests/compiler/test_layers.py::test_views_and_permutations[view+permute]",
    "tests/compiler/test_precision_selection.py::test_chosen_set_keeps_predictions_on_lattigo_and_the_model_is_pessimistic",
    "tests/runtime/test_runtime_backends.py::test_streamed_weights_give_the_cached_result[seal]",
    "tests/compiler/test_layers.py::test_average_pools[global mean keepdim]",
    "tests/profile/test_openfhe_profile.py::test_primitives",
    "tests/compiler/test_layers.py::test_convolutions[grouped]",
    "tests/compiler/test_layers.py::test_convolutions[depthwise x2]",
    "tests/compiler/test_layers.py::test_average_pools[global mean]",
    "tests/test_program_zoo.py::test_zoo_program_round_trips[lenet_square-complex]",
    "tests/compiler/test_composite_relu.py::test_relu_mlp_matches_torch[torch]",
    "tests/test_program_zoo.py::test_zoo_program_round_trips[mnist-cnn_square-multi]",
    "tests/profile/test_openfhe_profile.py::test_thread_counts_reach_openmp",
    "tests/compiler/test_layers.py::test_consecutive_linear_layers[conv-bn-conv padded]",
    "tests/runtime/test_parallel_single.py::test_two_threads_give_the_logits_of_one_on_lattigo",
    "tests/compiler/test_maxpool.py::test_padded_pools[batch-2]",
    # then, the default run still at 10:25 in CI there: the tests of 2.5 s or more, but the fastest case of each
    # of test_layers.py's kinds, ReLU from ONNX and max pooling encrypted on Lattigo
    "tests/compiler/test_layers.py::test_average_pools[avgpool excluding pad]",
    "tests/compiler/test_maxpool.py::test_lenet_matches_torch[torch-batch]",
    "tests/compiler/test_layers.py::test_average_pools[avgpool (2, 3) stride (1, 2)]",
    "tests/runtime/test_runtime_backends.py::test_streamed_weights_give_the_cached_result[lattigo]",
    "tests/compiler/test_layers.py::test_average_pools[avgpool 3/2 pad 1]",
    "tests/runtime/test_runtime_backends.py::test_single_mode_over_several_ciphertexts[seal]",
    "tests/compiler/test_layers.py::test_average_pools[adaptive 2x3]",
    "tests/compiler/test_layers.py::test_convolutions[ZeroPad2d asymmetric]",
    "tests/ckks/test_gpu_bootstrap.py::test_bootstrap_keys_travel",
    "tests/compiler/test_maxpool.py::test_lenet_matches_torch[onnx-batch]",
    "tests/compiler/test_layers.py::test_consecutive_linear_layers[conv-conv]",
    "tests/compiler/test_layers.py::test_consecutive_linear_layers[linear-linear]",
    "tests/compiler/test_approximated_activations.py::test_mlp_matches_torch_within_the_reported_error[leakyrelu-torch]",
    "tests/ckks/test_bootstrap.py::test_bootstrap_precision[openfhe-1-1.0]",
    "tests/compiler/test_layers.py::test_convolutions[padding same]",
    "tests/compiler/test_precision_selection.py::test_more_precision_asked_gives_a_larger_scale_or_ring",
    "tests/compiler/test_layers.py::test_consecutive_linear_layers[conv-flatten-linear]",
    "tests/compiler/test_layers.py::test_convolutions[F.pad + padding]",
    "tests/compiler/test_layers.py::test_consecutive_linear_layers[square-conv-conv-conv]",
    "tests/compiler/test_approximated_activations.py::test_mlp_matches_torch_within_the_reported_error[leakyrelu-onnx]",
    "tests/test_datasets.py::test_cifar10_train",
    "tests/test_data_fetch.py::test_hostile_cifar_archives_are_refused[not an archive]",
    "tests/test_coverage_nets.py::test_compiles_from_torch_and_onnx[mlp-leakyrelu]",
    "tests/compiler/test_images_per_set.py::test_packed_images_encrypted_on_lattigo_match_plaintext",
    "tests/test_data_fetch.py::test_hostile_cifar_archives_are_refused[tampered batch]",
}
SLOW_GIB = 8  # what the slowest of them needs free


def mark_slow(items) -> None:
    """Mark the SLOW tests heavy (tests/test_suite_gates.py checks that each name still names a test)."""
    for item in items:
        if item.nodeid in SLOW and item.get_closest_marker("heavy") is None:
            item.add_marker(pytest.mark.heavy(gib=SLOW_GIB))


def check_free_memory(item) -> None:
    """A test marked heavy(gib=N) fails at once, saying so, where N GiB are not free, instead of being
    killed for memory (-9) minutes in."""
    mark = item.get_closest_marker("heavy")
    if mark is None:
        return
    need = float(mark.kwargs.get("gib", 0))
    have = psutil.virtual_memory().available / 2**30
    if have < need:
        pytest.fail(
            f"{item.nodeid} needs {need:.0f} GiB of free memory and this machine has {have:.1f} GiB available: "
            "stop other programs (another test run, a benchmark) and run `make test-heavy` again",
            pytrace=False,
        )


def peak_gib() -> float:
    """The largest resident set of this process or of any subprocess it waited for (a test's child)."""
    rss_kib = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return rss_kib / 2**20


def note_peak(before: float, test: str) -> None:
    after = peak_gib()
    if after > before + 0.25:
        PEAKS.append((after, test))


def worker_peak() -> tuple[float, str]:
    """This process's peak (GiB) and the test that last raised it, for the controller of a parallel run."""
    return peak_gib(), max(PEAKS)[1] if PEAKS else "the worker's start"


def over_budget(markexpr: str | None) -> list[tuple[float, str]]:
    """The tests that pushed a default run past its budget (none for other selections). In a parallel run,
    every worker's peak test when their peaks together exceed it."""
    if " ".join((markexpr or "").split()) != DEFAULT_RUN:
        return []
    if WORKER_PEAKS:
        return list(WORKER_PEAKS) if sum(g for g, _ in WORKER_PEAKS) > DEFAULT_RUN_GIB else []
    return [(g, t) for g, t in PEAKS if g > DEFAULT_RUN_GIB]


def summary(markexpr: str | None) -> list[str]:
    lines = []
    if WORKER_PEAKS:
        total = sum(g for g, _ in WORKER_PEAKS)
        each = ", ".join(f"{g:.1f} GiB in {t}" for g, t in sorted(WORKER_PEAKS, reverse=True))
        lines.append(f"peak memory {total:.1f} GiB at most, the workers' peaks together: {each}")
    elif PEAKS:
        peak, test = max(PEAKS)
        lines.append(f"peak memory {peak:.1f} GiB, reached in {test}")
    over = over_budget(markexpr)
    if over:
        lines.append(
            f"FAILED: the default run must stay within {DEFAULT_RUN_GIB:.0f} GiB; mark these tests heavy: "
            + ", ".join(f"{t} ({g:.1f} GiB)" for g, t in over)
        )
    return lines
