import functools

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import (
    MASK,
    masked_argv,
    masked_result_text,
    masked_text,
    secret_values,
)


def test_both_spellings_of_every_secret_flag_are_masked():
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "k1", "--admin-api-key=k2", "--port", "30000"]
    assert masked_argv(argv) == ["python", "-m", "sglang.launch_server", "--api-key", MASK,
                                 "--admin-api-key=" + MASK, "--port", "30000"]
    assert secret_values(argv) == ["k1", "k2"]


def test_a_flag_the_user_adds_is_masked_and_others_are_not():
    argv = ["--hf-token", "hf_x", "--api-key", "k", "--model-path=/m"]
    assert masked_argv(argv, ("--hf-token",)) == ["--hf-token", MASK, "--api-key", "k", "--model-path=/m"]


def test_a_secret_flag_as_the_last_word_leaves_nothing_to_mask():
    assert masked_argv(["--port", "1", "--api-key"]) == ["--port", "1", "--api-key"]


def test_server_args_line_and_given_values_are_masked():
    line = ("[2026-11-30 10:00:00] server_args=ServerArgs(model_path='/m', api_key='s3cr3t', "
            "admin_api_key=\"k9admin\", port=30000) token hf_abc")
    shown = masked_text(line, values=["hf_abc"])
    assert "s3cr3t" not in shown and "k9admin" not in shown and "hf_abc" not in shown
    assert "api_key='%s'" % MASK in shown and "admin_api_key='%s'" % MASK in shown
    assert "model_path='/m'" in shown and "port=30000" in shown


def test_empty_values_do_not_mask_everything():
    assert masked_text("plain line", values=["", None]) == "plain line"


def test_abbreviations_that_argparse_accepts_are_masked_too():
    argv = ["--api-ke=k1", "--admin-api", "k2", "--ap", "k3", "--port", "30000", "--", "x"]
    assert masked_argv(argv) == ["--api-ke=" + MASK, "--admin-api", MASK, "--ap", MASK, "--port", "30000", "--", "x"]
    assert secret_values(argv) == ["k1", "k2", "k3"]


def test_the_shortest_abbreviation_is_masked_and_a_bare_double_dash_is_not():
    assert masked_argv(["--a", "k", "--", "v"]) == ["--a", MASK, "--", "v"]


def test_a_longer_value_is_masked_before_a_value_inside_it():
    assert masked_text("token abcdef and abc", values=["abc", "abcdef"]) == "token %s and %s" % (MASK, MASK)


def test_the_whole_masked_server_args_line_and_a_flag_of_any_case():
    line = "server_args=ServerArgs(api_key='s3', admin_api_key=\"k9\", port=1)"
    assert masked_text(line) == "server_args=ServerArgs(api_key='%s', admin_api_key='%s', port=1)" % (MASK, MASK)
    assert masked_text("XAI_key='v' key='w'", secret_flags=("--XAI-key",)) == "XAI_key='%s' key='w'" % MASK


def test_a_result_text_is_masked_after_its_escapes_go_and_before_its_lines_are_cut():
    mask = functools.partial(masked_text, values=["p4ssw0rd"])
    text = "login p4ss\x1b[1mw0rd\n" + "x" * 2044 + "p4ssw0rd --api-key=\x1b[0mk-1"
    assert masked_result_text(text, mask) == "login %s\n%s [... %d bytes cut]" % (
        MASK, "x" * 2044 + MASK[:4], len(MASK) - 4 + len(" --api-key=") + len(MASK))
