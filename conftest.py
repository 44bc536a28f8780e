"""Two tiers of tests: `make test` (the quick gate, under 10 minutes from a fresh clone on 2 cores,
what CI runs) and `make test-all` (everything, about four times as long).

A test is in the slow tier when it carries ``@pytest.mark.slow`` or its node id starts with one of
the prefixes in :data:`SLOW` below, each with the reason it may leave the quick gate: what else
covers it there, and what it costs. Measured per-test times: `make test-all` with
``--durations=0``. Whatever is moved here must keep a cheaper sibling in the quick gate (a
smaller parametrisation, one representative layout, a few chapters), so that every behaviour is
still checked by `make test`; this file lists only the extra cases.
"""

import pytest

# (node id prefix, why it is slow-tier only)
SLOW = [
    # Chapters are executed by `make book` (every notebook from a fresh kernel, `allow_errors:
    # false`, warnings as errors), which CI runs after `make test`; nbval would execute them a
    # second time. The solutions stay in the quick gate: nbval compares their stored PASS lines.
    ("chapters/", "executed by make book"),
    # Exercise notebooks run top to bottom and print NOT SOLVED YET: three representative ones
    # (plain, JAX on simulated devices, serving) in the quick gate; all 26 here (~8 s each).
    *((f"tests/test_notebooks.py::test_exercise_notebook_reports_not_solved_yet[{n}",
       "three exercise notebooks stay in the quick gate")
      for n in ("02_", "03_", "04_", "05_", "06_", "07_", "08_", "10_", "11_", "12_", "13_",
                "14_", "15_", "16_", "17_", "18_", "19_", "20_", "22_", "90_", "91_", "92_",
                "93_")),
    # Honest work graded in jails, chapter by chapter (~6 s a chapter): four chapters stay.
    *((f"tests/test_grading_honest.py::test_worked_solutions_get_full_marks[{n}",
       "four chapters stay in the quick gate")
      for n in ("02_", "03_", "04_", "05_", "06_", "07_", "08_", "10_", "11_", "12_", "13_",
                "14_", "15_", "16_", "17_", "18_", "19_", "20_", "21_", "90_", "91_", "92_")),
    # A class run whose worker is killed mid-notebook (~45 s): the class runner's other promises
    # (verdicts, flags, limits, reports) are graded in the quick gate by test_gradebook's class.
    ("tests/test_gradebook.py::test_a_stopped_worker_costs_its_notebook_only_and_results_survive",
     "the class runner itself stays in the quick gate"),
    # Calibration on the whole vTrain campaign (100-200 s each): the fitter itself is checked in
    # the quick gate on synthetic rows (test_fit_recovers_the_constant_that_made_the_step_times).
    ("tests/test_calibrate.py::test_single_node_calibration_predicts_the_multi_node_runs",
     "fits the whole vTrain campaign"),
    ("tests/test_calibrate.py::test_small_runs_of_a_stack_calibrate_its_large_runs",
     "fits the whole vTrain campaign"),
    # Compiled training steps on 8 simulated devices (10-30 s each): one or two layouts per
    # strategy stay in the quick gate.
    *((f"tests/test_train_step.py::{t}", "representative layouts stay in the quick gate")
      for t in ("test_step_equals_one_device_and_collectives_match_prediction[dp2-accumulate]",
                "test_step_equals_one_device_and_collectives_match_prediction[zero1-dp2-",
                "test_step_equals_one_device_and_collectives_match_prediction[zero2-dp2-",
                "test_step_equals_one_device_and_collectives_match_prediction[hsdp-4x2]",
                "test_step_equals_one_device_and_collectives_match_prediction[tp2]",
                "test_step_equals_one_device_and_collectives_match_prediction[dp4-tp2]",
                "test_step_equals_one_device_and_collectives_match_prediction[fsdp4-tp2-sp-",
                "test_adam_step_matches_too", "test_tp4_with_sequence_parallelism_and_dp2")),
    *((f"tests/test_train_step_expert.py::{t}", "representative layouts stay in the quick gate")
      for t in ("test_expert_parallel_step_equals_one_device[dp2-ep2-dropless]",
                "test_expert_parallel_step_equals_one_device[dp4-ep2-accumulate-dropless]",
                "test_expert_parallel_step_equals_one_device[dp4-ep4-dropless]",
                "test_expert_parallel_step_equals_one_device[dp4-ep2-tp2 (2x2x2)-dropless]",
                "test_shared_and_dense_layers", "test_bf16_all_to_alls_widened_to_f32",
                "test_more_moe_shapes_compile_what_the_model_says[E8-k2-cap1.25-dp4-ep4]",
                "test_more_moe_shapes_compile_what_the_model_says[E8-k2-dropless-dp8-ep8]",
                "test_more_moe_shapes_compile_what_the_model_says[E4-k1-")),
    *((f"tests/test_train_step_context.py::{t}", "one layout per variant stays in the quick gate")
      for t in ("test_cp_step_equals_one_device_and_collectives_match_prediction[allgather-cp2]",
                "test_cp_step_equals_one_device_and_collectives_match_prediction[ring-dp2-",
                "test_cp_step_equals_one_device_and_collectives_match_prediction[ulysses-cp2]",
                "test_cp_step_equals_one_device_and_collectives_match_prediction[ulysses-cp4-",
                "test_cp_step_equals_one_device_and_collectives_match_prediction[allgather-dp2-",
                "test_cp_step_equals_one_device_and_collectives_match_prediction[ring-2x2x2-")),
    *((f"tests/test_train_step_pipeline.py::{t}", "one schedule per shape stays in the quick gate")
      for t in ("test_pipelined_step_equals_one_device_and_collectives_match[pp2-gpipe]",
                "test_pipelined_step_equals_one_device_and_collectives_match[dp2-pp2-tp2-1f1b]",
                "test_pipelined_step_equals_one_device_and_collectives_match[dp2-pp2-tp2-inter",
                "test_four_stages_send_per_tick")),
]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: only in `make test-all` (see the repository's conftest.py)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.nodeid.startswith(prefix) for prefix, _ in SLOW):
            item.add_marker(pytest.mark.slow)


def _zmq_contexts_never_block_at_exit():
    """A zmq context dropped by a test (a kernel client, nbval's, nbclient's) is destroyed at some
    later garbage collection; with a message still queued for a kernel that is gone, its ``term()``
    waits for ever and hangs the test worker (seen in CI at 98%). Every context made in a test
    process gets LINGER 0 for its sockets, and is destroyed with linger 0."""
    try:
        import zmq
    except ImportError:
        return
    init, destroy = zmq.Context.__init__, zmq.Context.destroy

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            self.setsockopt(zmq.LINGER, 0)
        except Exception:
            pass

    def _destroy(self, linger=None):
        return destroy(self, linger=0 if linger is None else linger)

    zmq.Context.__init__, zmq.Context.destroy = __init__, _destroy


_zmq_contexts_never_block_at_exit()
