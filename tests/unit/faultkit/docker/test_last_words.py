"""``faultkit.docker.containers.last_words``: the line of a failed engine's log the gate quotes."""

from __future__ import annotations

import pytest

from faultkit.docker.containers import LAST_WORDS_MAX, last_words

#: the simnode's start-up failure (testbed/simnode/node.py), as its container logs it
SIMNODE = """\
INFO:     Started server process [1]
ERROR EngineCore failed to start.
Traceback (most recent call last):
  (simulated)
ValueError: max_model_len 16384 exceeds the model's 8192 (max_position_embeddings)
"""

#: llama-server given a model file that is not there (no traceback: error words)
LLAMA = """\
build: 1 (abc) with cc for x86_64-linux-gnu
llama_model_load: error loading model: failed to open /models/missing.gguf
main: exiting due to model loading error
"""


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (SIMNODE, "ValueError: max_model_len 16384 exceeds the model's 8192 "
                  "(max_position_embeddings)"),
        (LLAMA, "main: exiting due to model loading error"),
        ("serving\nshutting down\n", "shutting down"),  # no error word: the last line
        (SIMNODE * 2 + "INFO restarting\n", "ValueError: max_model_len 16384 exceeds the "
                                            "model's 8192 (max_position_embeddings)"),
    ],
    ids=["traceback", "error-words", "last-line", "restart-loop"],
)
def test_the_line_that_says_why_the_engine_stopped(log: str, expected: str) -> None:
    assert last_words(log) == expected


def test_an_empty_log_has_no_last_words() -> None:
    assert last_words("") is None and last_words("\n  \n") is None


def test_a_long_line_is_cut() -> None:
    said = last_words("RuntimeError: " + "x" * 1000)
    assert said is not None and len(said) == LAST_WORDS_MAX and said.startswith("RuntimeError: ")
