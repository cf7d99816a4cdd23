import pytest

from ansible_collections.blackwell.gpu_node.plugins.filter.cuda_checks import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.checks import (
    cuda_home_problems,
    primary_fingerprints,
    repository_key_problems,
)

PINNED = "55E96F6409EC06F59ECE4979B8F98BBCCA0BB0E0"
EXTRA = "2426F062D9830CE3B7B32E00CA6303732CE989C6"
URL = "file:///srv/mirror/repos/debian12/x86_64/cuda-archive-keyring.gpg"
# gpg --show-keys --with-colons of the cuda_apt_repo fixture's keyring.
PINNED_KEY = (
    "pub:-:4096:1:B8F98BBCCA0BB0E0:1796120257:::-:::scSC::::::23::0:\n"
    "fpr:::::::::%s:\n"
    "uid:-::::1796120257::13CF15206E608F3A9FC384D473D22BE8302834CF::CUDA apt repository fixture::::::::::0:\n" % PINNED
)
# Another key, with a subkey of its own (whose fingerprint is not a primary key's).
EXTRA_KEY = (
    "pub:u:255:22:CA6303732CE989C6:1796120470:::u:::scESC:::::ed25519:::0:\n"
    "fpr:::::::::%s:\n"
    "uid:u::::1796120470::54A5FF0DB5FF2EFD80852FA05A3B4105AE99C9D8::extra <x@invalid>::::::::::0:\n"
    "sub:u:255:18:CF4EE35470A3B9A1:1796120473::::::e:::::cv25519::\n"
    "fpr:::::::::30C31AAAF476F0A090AE696FCF4EE35470A3B9A1:\n" % EXTRA
)


def test_the_two_filters_are_registered():
    assert sorted(FilterModule().filters()) == ["cuda_home_problems", "cuda_repository_key_problems"]


def test_nvidias_cuda_home_is_fine():
    assert cuda_home_problems("/usr/local/cuda-13.0", "13.0") == []


@pytest.mark.parametrize("cuda_home, expected", [
    ("/usr/local/cuda-13.0\n/tmp/evil", "cuda_home: the value holds the control character U+000A at position 20"),
    ("/usr/local/cuda-13.0\r", "cuda_home: the value holds the control character U+000D"),
    ("/usr/local/cuda\u2028", "cuda_home: the value holds the control character U+2028"),
    ("usr/local/cuda-13.0", "cuda_home=usr/local/cuda-13.0 is not an absolute path; NVIDIA's packages install CUDA "
                            "13.0 into /usr/local/cuda-13.0"),
    (None, "cuda_home=None is not an absolute path"),
    ("/opt/cuda 13.0", "cuda_home=/opt/cuda 13.0 holds whitespace, ':', ',' or '#'"),
    ("/opt/cuda:/tmp", "holds whitespace, ':', ',' or '#'"),
    ("/opt/cuda#13", "holds whitespace, ':', ',' or '#'"),
])
def test_a_cuda_home_the_linker_configuration_or_a_shell_cannot_hold_is_refused(cuda_home, expected):
    problems = cuda_home_problems(cuda_home, "13.0")
    assert len(problems) == 1 and expected in problems[0], problems


def test_only_primary_keys_count_subkeys_belong_to_them():
    assert primary_fingerprints(EXTRA_KEY + PINNED_KEY) == [EXTRA, PINNED]


def test_exactly_the_pinned_key_is_trusted_whatever_its_spelling():
    assert repository_key_problems(PINNED_KEY, PINNED, URL) == []
    assert repository_key_problems(PINNED_KEY, " ".join(PINNED[i:i + 4] for i in range(0, 40, 4)).lower(), URL) == []


@pytest.mark.parametrize("keys", [EXTRA_KEY + PINNED_KEY, PINNED_KEY + EXTRA_KEY])
def test_a_keyring_with_another_key_beside_the_pinned_one_is_refused_naming_both(keys):
    assert repository_key_problems(keys, PINNED, URL) == [
        "The keyring at %s holds other keys besides cuda_repo_key_fingerprint=%s: %s. apt would trust each key of it "
        "for NVIDIA's repository; only the pinned one may be. Have the mirror serve NVIDIA's keyring as it is"
        % (URL, PINNED, EXTRA)]


def test_a_keyring_without_the_pinned_key_is_refused_naming_what_it_has():
    assert repository_key_problems(EXTRA_KEY, PINNED, URL) == [
        "The key at %s has the fingerprint(s) %s, not cuda_repo_key_fingerprint=%s. If NVIDIA rotated its key, check "
        "the new one and set cuda_repo_key_fingerprint" % (URL, EXTRA, PINNED)]


def test_a_subkey_with_the_pinned_fingerprint_is_not_the_pinned_key():
    subkey_only = EXTRA_KEY.replace("30C31AAAF476F0A090AE696FCF4EE35470A3B9A1", PINNED)
    assert "not cuda_repo_key_fingerprint=" in repository_key_problems(subkey_only, PINNED, URL)[0]


def test_an_empty_keyring_has_no_fingerprint():
    assert "has the fingerprint(s) none" in repository_key_problems("", PINNED, URL)[0]


def test_the_whole_message_of_a_cuda_home_with_a_separator():
    assert cuda_home_problems("/opt/cuda 13", "13.0") == [
        "cuda_home=/opt/cuda 13 holds whitespace, ':', ',' or '#', which ld.so.conf takes for the end of an entry; "
        "use a path without them (NVIDIA's is /usr/local/cuda-13.0)"]


def test_fpr_records_are_read_by_their_tenth_field_and_a_blank_line_ends_a_key():
    assert primary_fingerprints("pub:-:4096\nfpr::::::::\n") == []
    assert primary_fingerprints("pub:-:4096\nfpr:::::::::abc\n\n") == ["ABC"]
    assert primary_fingerprints("pub:-:4096\nfpr:::::::::abc:\nfpr:::::::::def:\n") == ["ABC", "DEF"]


def test_the_whole_messages_of_a_wrong_keyring():
    assert repository_key_problems(PINNED_KEY + EXTRA_KEY, None, URL) == [
        "The key at %s has the fingerprint(s) %s, %s, not cuda_repo_key_fingerprint=. If NVIDIA rotated its key, "
        "check the new one and set cuda_repo_key_fingerprint" % (URL, PINNED, EXTRA)]
    third = EXTRA_KEY.replace(EXTRA, "1" * 40)
    assert repository_key_problems(PINNED_KEY + EXTRA_KEY + third, PINNED, URL) == [
        "The keyring at %s holds other keys besides cuda_repo_key_fingerprint=%s: %s, %s. apt would trust each key "
        "of it for NVIDIA's repository; only the pinned one may be. Have the mirror serve NVIDIA's keyring as it is"
        % (URL, PINNED, EXTRA, "1" * 40)]
