import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang import speculative
from ansible_collections.blackwell.gpu_node.plugins.filter.speculative import (
    FilterModule,
    speculative_problems,
    speculative_settings,
)

PREFIX = "sglang_server_speculative_"


def settings(**change):
    values = dict(algorithm="EAGLE3", draft_model_path="/models/draft", num_steps=None, eagle_topk=None,
                  num_draft_tokens=None)
    values.update(change)
    return values


@pytest.mark.parametrize("change", [
    {}, dict(num_steps=3), dict(num_steps=3, eagle_topk=1, num_draft_tokens=4),
    dict(algorithm="EAGLE", num_steps=5, eagle_topk=4, num_draft_tokens=8), dict(algorithm="STANDALONE"),
    dict(num_steps="3", eagle_topk="1", num_draft_tokens="4"),  # from -e key=value
])
def test_settings_sglang_starts_with_pass(change):
    assert speculative.problems(settings(**change), PREFIX) == []


@pytest.mark.parametrize("change,problem", [
    (dict(draft_model_path=None), "sglang_server_speculative_draft_model_path is required"),
    (dict(draft_model_path=""), "sglang_server_speculative_draft_model_path is required"),
    (dict(algorithm="NGRAM"), "sglang_server_speculative_algorithm=NGRAM is not one SGLang 0.5.9 runs"),
    (dict(algorithm="eagle3"), "sglang_server_speculative_algorithm=eagle3 is not one"),
    (dict(num_steps=0), "sglang_server_speculative_num_steps=0 must be a positive integer"),
    (dict(num_steps=3, eagle_topk=-1), "sglang_server_speculative_eagle_topk=-1 must be a positive integer"),
    (dict(num_steps=3, num_draft_tokens="4x"), "sglang_server_speculative_num_draft_tokens='4x' must be"),
    (dict(num_steps=3, num_draft_tokens="4\n"), "sglang_server_speculative_num_draft_tokens='4\\n' must be"),
    (dict(num_steps=2.5), "sglang_server_speculative_num_steps=2.5 must be"),
    (dict(num_steps=True), "sglang_server_speculative_num_steps=True must be a positive integer"),
    (dict(eagle_topk=4), "sglang_server_speculative_eagle_topk set without sglang_server_speculative_num_steps"),
    (dict(num_draft_tokens=8), "sglang_server_speculative_num_draft_tokens set without"),
    (dict(algorithm="EAGLE3\n"), "sglang_server_speculative_algorithm: the value holds the control character"),
    (dict(draft_model_path="/d\nx"), "sglang_server_speculative_draft_model_path: the value holds the control"),
])
def test_each_refused_setting_is_named(change, problem):
    problems = speculative.problems(settings(**change), PREFIX)
    assert any(found.startswith(problem) for found in problems), problems


def test_topk_and_draft_tokens_without_steps_are_one_problem():
    problems = speculative.problems(settings(eagle_topk=4, num_draft_tokens=8), "speculative.")
    assert problems == ["speculative.eagle_topk and speculative.num_draft_tokens set without speculative.num_steps: "
                        "SGLang 0.5.9 chooses the three together and refuses one alone; set speculative.num_steps "
                        "too, or unset speculative.eagle_topk and speculative.num_draft_tokens"]


def test_the_filter_is_the_core():
    assert speculative_problems(settings(eagle_topk=4), PREFIX) == speculative.problems(settings(eagle_topk=4), PREFIX)


def test_a_draft_without_config_json_is_named(tmp_path):
    assert speculative.draft_model_problem(str(tmp_path), "sglang_server_speculative_draft_model_path").startswith(
        "sglang_server_speculative_draft_model_path=%s has no config.json" % tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert speculative.draft_model_problem(str(tmp_path), "v") is None


def test_a_linked_config_json_is_a_draft(tmp_path):
    # A Hugging Face cache snapshot links config.json into its blobs.
    (tmp_path / "blob").write_text("{}")
    (tmp_path / "snapshot").mkdir()
    (tmp_path / "snapshot" / "config.json").symlink_to(tmp_path / "blob")
    assert speculative.draft_model_problem(str(tmp_path / "snapshot"), "v") is None


def test_settings_are_read_back_from_the_command_line():
    argv = ["/opt/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm",
            "EAGLE3", "--speculative-draft-model-path", "/m/draft", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--api-key", "********"]
    assert speculative.from_argv(argv) == dict(enabled=True, algorithm="EAGLE3", draft_model_path="/m/draft",
                                               num_steps=3, eagle_topk=1, num_draft_tokens=4)


def test_a_server_without_a_draft_is_not_speculative():
    assert speculative.from_argv(["python", "-m", "sglang.launch_server", "--model-path", "/m"]) == dict(
        enabled=False, algorithm=None, draft_model_path=None, num_steps=None, eagle_topk=None, num_draft_tokens=None)
    assert speculative.from_argv(None)["enabled"] is False


def test_nextn_runs_with_a_draft_model():
    assert speculative.problems(settings(algorithm="NEXTN"), PREFIX) == []


def test_the_whole_messages_of_a_missing_draft_and_an_unknown_algorithm():
    assert speculative.problems(settings(algorithm="NGRAM", draft_model_path=None), PREFIX) == [
        "sglang_server_speculative_draft_model_path is required with speculative decoding: the draft model's "
        "directory (with its config.json)",
        "sglang_server_speculative_algorithm=NGRAM is not one SGLang 0.5.9 runs with a draft model: use one of "
        "EAGLE, EAGLE3, NEXTN, STANDALONE (EAGLE3 for an EAGLE-3 draft)"]


def test_the_whole_message_of_a_draft_without_config_json(tmp_path):
    assert speculative.draft_model_problem(str(tmp_path), "v") == (
        "v=%s has no config.json: point it at the draft model's directory (for EAGLE-3, the EAGLE3 checkpoint "
        "matching the served model), or download it there first" % tmp_path)


def test_a_setting_whose_value_is_the_last_word_is_read():
    assert speculative.from_argv(["python", "--speculative-algorithm", "EAGLE3"])["algorithm"] == "EAGLE3"
    assert speculative.from_argv(["python", "--speculative-algorithm"])["algorithm"] is None


def test_the_filters_are_registered():
    assert FilterModule().filters() == {"speculative_problems": speculative_problems,
                                        "speculative_settings": speculative_settings}
    assert speculative_settings(["python", "--speculative-algorithm", "EAGLE3"]) == speculative.from_argv(
        ["python", "--speculative-algorithm", "EAGLE3"])
